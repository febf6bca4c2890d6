"""Slow readers for bench/download/run: N concurrent downloads of one URL,
each read at 64 KiB/s (one 64 KiB read a second, as a client on a slow
link drains its socket) for SECONDS, then closed. Prints how many got
200 and the bytes read. Python's asyncio: one process, N sockets.

    python3 readers.py URL N SECONDS
"""

import asyncio
import sys
import urllib.parse

URL, N, SECONDS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
U = urllib.parse.urlsplit(URL)
PATH = U.path + ("?" + U.query if U.query else "")
RATE = 64 << 10


async def reader(stats):
    r, w = await asyncio.open_connection(U.hostname, U.port)
    w.write(f"GET {PATH} HTTP/1.1\r\nHost: {U.netloc}\r\n\r\n".encode())
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        stats["bad"] += 1
        w.close()
        return
    stats["ok"] += 1
    loop = asyncio.get_running_loop()
    end = loop.time() + SECONDS
    while loop.time() < end:
        got = await r.read(RATE)
        if not got:
            stats["cut"] += 1
            break
        stats["bytes"] += len(got)
        await asyncio.sleep(len(got) / RATE)
    w.close()


async def main():
    stats = {"ok": 0, "bad": 0, "cut": 0, "bytes": 0}
    # Opened in waves of 100: the listen backlog is not what is measured.
    tasks = []
    for i in range(N):
        tasks.append(asyncio.create_task(reader(stats)))
        if i % 100 == 99:
            await asyncio.sleep(0.05)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, Exception)]
    print(f"{stats['ok']} of {N} answered 200, {stats['bad']} otherwise, {len(errors)} failed"
          f"{' (' + repr(errors[0]) + ')' if errors else ''}, {stats['cut']} cut early; "
          f"{stats['bytes'] / 1048576:.0f} MiB read ({stats['bytes'] / 1048576 / SECONDS:.1f} MiB/s in all)")


asyncio.run(main())
