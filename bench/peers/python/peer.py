"""python-multipart peer driver for bench/peers: the low-level streaming MultipartParser.

usage: peer.py BODY BOUNDARY REPS EXPECTED_PARTS EXPECTED_PAYLOAD_BYTES
Prints one key=value line (see bench/peers/README.md).
"""
import sys
import time

try:  # python-multipart >= 0.0.13 installs as `python_multipart`
    from python_multipart.multipart import MultipartParser
    DIST_MODULE = "python_multipart"
except ImportError:  # older releases: `multipart`
    from multipart.multipart import MultipartParser
    DIST_MODULE = "multipart"

CHUNK = 64 * 1024


def status_kib(key):
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    if key == "VmHWM:":
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return 0


def best_ms(reps, f):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


def parse(body, boundary):
    counts = [0, 0]  # parts, payload bytes

    def on_part_begin():
        counts[0] += 1

    def on_part_data(data, start, end):
        counts[1] += end - start

    p = MultipartParser(boundary, {"on_part_begin": on_part_begin, "on_part_data": on_part_data})
    for i in range(0, len(body), CHUNK):
        p.write(body[i:i + CHUNK])
    p.finalize()
    return tuple(counts)


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: peer.py BODY BOUNDARY REPS EXPECTED_PARTS EXPECTED_PAYLOAD_BYTES")
    path, boundary = sys.argv[1], sys.argv[2]
    reps, want_parts, want_bytes = (int(x) for x in sys.argv[3:6])
    with open(path, "rb") as fh:
        body = fh.read()
    rss0 = status_kib("VmRSS:")

    got = None

    def run():
        nonlocal got
        got = parse(body, boundary)

    ms = best_ms(reps, run)
    hwm = status_kib("VmHWM:")
    if got != (want_parts, want_bytes):
        sys.exit("python-multipart: got parts=%d bytes=%d, want parts=%d bytes=%d" % (*got, want_parts, want_bytes))

    # In-language baselines, same process, same bytes.
    delim = b"\r\n--" + boundary.encode()
    hits = 0

    def scan():
        nonlocal hits
        hits = body.count(delim)

    memmem_ms = best_ms(reps, scan)
    dst = memoryview(bytearray(len(body)))

    def copy():
        dst[:] = body  # memoryview slice assignment is one memcpy; bytearray[:]= would copy twice

    memcpy_ms = best_ms(reps, copy)

    try:
        from importlib.metadata import version
        ver = version("python-multipart")
    except Exception:
        ver = "?"
    print("ms=%.3f baseline_memmem_ms=%.3f memcpy_ms=%.3f parts=%d bytes=%d delims=%d rss_delta_kib=%d version=%s"
          % (ms, memmem_ms, memcpy_ms, got[0], got[1], hits, max(hwm - rss0, 0), ver))


if __name__ == "__main__":
    main()
