"""The measurements of bench/variants/run: see there."""

import http.client
import io
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

from PIL import Image

BASE, WORK, PID, REPEAT = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
HOST = urllib.parse.urlparse(BASE).netloc
AUTH = {"Authorization": "Bearer bench-token"}
Q = "w=300&h=300&fit=cover&format=webp"


def conn():
    return http.client.HTTPConnection(HOST, timeout=120)


def request(c, method, path, body=None, headers=None):
    h = dict(AUTH, **(headers or {}))
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return data


def upload(c, name, data):
    out = request(c, "PUT", f"/v1/media/{name}", data, {"Content-Type": "application/octet-stream"})
    return json.loads(out)["media"][0]["id"]


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def rss(field):
    with open(f"/proc/{PID}/status") as s:
        for line in s:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"no {field}")


def main():
    c = conn()
    rows = []
    for name, mp in [("big24.jpg", 24), ("big12.jpg", 12)]:
        path = f"{WORK}/{name}"
        data = open(path, "rb").read()
        vips, first, cached, down = [], [], [], []
        for i in range(REPEAT):
            t, _ = timed(lambda: subprocess.run(
                ["vipsthumbnail", path, "-s", "300x300", "--crop", "-o", f"{WORK}/v{i}.webp[Q=80]"],
                check=True))
            vips.append(t)
            ident = upload(c, f"r{i}-{name}", data)
            t, v = timed(lambda: request(c, "GET", f"/v1/media/{ident}/variant?{Q}"))
            first.append(t)
            got = Image.open(io.BytesIO(v))
            if (got.format, got.size) != ("WEBP", (300, 300)):
                raise SystemExit(f"variant of {name}: {got.format} {got.size}, not a 300×300 WebP")
            t, _ = timed(lambda: request(c, "GET", f"/v1/media/{ident}/variant?{Q}"))
            cached.append(t)
            same = upload(c, f"d{i}.webp", v)
            t, _ = timed(lambda: request(c, "GET", f"/v1/media/{same}"))
            down.append(t)
        m = {k: statistics.median(v) * 1000 for k, v in
             [("vips", vips), ("first", first), ("cached", cached), ("down", down)]}
        rows.append((name, mp, len(data), len(v), m))
    print()
    print("| file | vipsthumbnail | bulkwire first request | ratio (goal ≤ 1.5) | cached request | download of the same size | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, mp, size, vsize, m in rows:
        print(f"| {mp} MP JPEG, {size / 1048576:.1f} MiB → 300×300 WebP ({vsize:,} bytes) "
              f"| {m['vips']:.0f} ms | {m['first']:.0f} ms | **{m['first'] / m['vips']:.2f}** "
              f"| {m['cached']:.2f} ms | {m['down']:.2f} ms | **{m['cached'] / m['down']:.2f}** |")


def rss_row(n):
    """One row of the RSS table: n first requests at once on a server that
    has served nothing yet (memory an earlier row's requests left with the
    allocator would hide this row's)."""
    c = conn()
    data = open(f"{WORK}/big24.jpg", "rb").read()
    ids = [upload(c, f"c{n}-{k}.jpg", data) for k in range(n)]
    time.sleep(0.5)
    idle = rss("VmRSS:")
    with open(f"/proc/{PID}/clear_refs", "w") as f:
        f.write("5")
    errors = []

    def one(ident):
        try:
            request(conn(), "GET", f"/v1/media/{ident}/variant?{Q}")
        except SystemExit as e:
            errors.append(str(e))

    ts = [threading.Thread(target=one, args=(i,)) for i in ids]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    wall = time.perf_counter() - t
    grew = max(0, rss("VmHWM:") - idle)
    print(f"| {n} | {grew / 1048576:.1f} MiB | {grew / n / 1048576:.1f} MiB | {wall * 1000:.0f} ms"
          + (f" ({len(errors)} errors: {errors[0]})" if errors else "") + " |")


if len(sys.argv) > 5:
    rss_row(int(sys.argv[5]))
else:
    main()
