"""Render bench/peers results: key=value lines in, one table on stdout + JSON lines out.

usage: report.py RESULTS_FILE OUT_JSON
"""
import json
import sys

NUM = {"size", "reps", "ms", "baseline_memmem_ms", "memcpy_ms", "parts", "bytes", "delims", "rss_delta_kib"}


def parse(line):
    rec = {}
    for tok in line.split():
        k, _, v = tok.partition("=")
        if k in NUM:
            try:
                v = float(v) if "." in v else int(v)
            except ValueError:
                pass
        rec[k] = v
    return rec


def main():
    res_path, out_path = sys.argv[1], sys.argv[2]
    rows = []
    with open(res_path) as fh:
        for line in fh:
            if line.strip():
                r = parse(line)
                ms, mm, mc = r.get("ms"), r.get("baseline_memmem_ms"), r.get("memcpy_ms")
                out = {
                    "peer": r.get("peer"), "version": r.get("version"), "body": r.get("body"),
                    "size": r.get("size"), "reps": r["reps"] if isinstance(r.get("reps"), int) else None, "ms": ms,
                    "mb_s": round(r["size"] / (ms / 1e3) / 1e6, 1) if ms else None,
                    "memmem_ms": mm, "memcpy_ms": mc,
                    "x_memmem": round(ms / mm, 2) if ms and mm else None,
                    "x_memcpy": round(ms / mc, 2) if ms and mc else None,
                    "parts": r.get("parts"), "payload_bytes": r.get("bytes"),
                    "rss_delta_kib": r.get("rss_delta_kib"),
                }
                rows.append(out)
    with open(out_path, "w") as fh:
        for o in rows:
            fh.write(json.dumps(o) + "\n")

    def f(v, fmt):
        return "-" if v is None or isinstance(v, str) else format(v, fmt)

    hdr = ("peer", "version", "body", "best", "ms", "MB/s", "x memmem", "x memcpy", "memmem ms", "memcpy ms", "+RSS MiB")
    fmt = "{:<17} {:<9} {:<4} {:>4} {:>10} {:>8} {:>9} {:>9} {:>10} {:>10} {:>9}"
    print(fmt.format(*hdr))
    print("-" * len(fmt.format(*hdr)))
    for o in rows:
        rss = o["rss_delta_kib"]
        print(fmt.format(
            o["peer"], str(o["version"])[:9], o["body"], "of %s" % (o["reps"] or "?"), f(o["ms"], ".2f"), f(o["mb_s"], ".1f"),
            f(o["x_memmem"], ".2f"), f(o["x_memcpy"], ".2f"), f(o["memmem_ms"], ".2f"), f(o["memcpy_ms"], ".2f"),
            f(rss / 1024 if isinstance(rss, (int, float)) else None, ".1f")))


if __name__ == "__main__":
    main()
