"""Benchmarks of the `bulkwire` Python package (run through bench/python/run).

1. Parsers on the standard bodies A-D at 1 KiB and 64 KiB chunks, no-op
   callbacks (or the peer's equivalent: events drained, data dropped):
   bulkwire, python-multipart, multipart (defnull, PushMultipartParser),
   werkzeug's sans-IO MultipartDecoder, streaming-form-data (NullTarget),
   and a pure-Python bytes.find loop over the same chunks (the floor).
2. Starlette request.form() end to end on a 100-field form and on body A
   (100 MiB file), with python-multipart and with bulkwire.install().
3. The advisory inputs through bulkwire at 1 and 8 MiB: 8 MiB must take
   <= 10x the time of 1 MiB (linear, or bounded by a limit).

Goals (exit 1 if one is missed): bulkwire never slower than python-multipart
on any body and chunk size; >= 3x python-multipart on C; within 1.2x of the
bytes.find floor on A.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator

import anyio

import bulkwire

KiB, MiB = 1 << 10, 1 << 20


def chunks(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def noop(*_a: object) -> None:
    pass


CALLBACKS = {
    "on_" + n: noop
    for n in (
        "part_begin",
        "part_data",
        "part_end",
        "header_field",
        "header_value",
        "header_end",
        "headers_finished",
        "end",
    )
}


def run_bulkwire(boundary: bytes, cs: list[bytes], _names: list[str]) -> None:
    p = bulkwire.MultipartParser(boundary, CALLBACKS)
    for c in cs:
        p.write(c)
    p.finalize()


def run_python_multipart(boundary: bytes, cs: list[bytes], _names: list[str]) -> None:
    from python_multipart.multipart import MultipartParser

    p = bulkwire._ORIGINALS.get("MultipartParser", MultipartParser)(boundary, CALLBACKS)
    for c in cs:
        p.write(c)
    p.finalize()


def run_defnull(boundary: bytes, cs: list[bytes], _names: list[str]) -> None:
    from multipart import PushMultipartParser

    with PushMultipartParser(boundary, max_segment_count=1 << 30, max_header_count=8) as p:
        for c in cs:
            for _ in p.parse(c):
                pass
        for _ in p.parse(b""):
            pass


def run_werkzeug(boundary: bytes, cs: list[bytes], _names: list[str]) -> None:
    from werkzeug.sansio.multipart import Epilogue, MultipartDecoder, NeedData

    d = MultipartDecoder(boundary, max_form_memory_size=None, max_parts=None)
    for c in [*cs, None]:
        d.receive_data(c)
        while True:
            ev = d.next_event()
            if isinstance(ev, (NeedData, Epilogue)):
                break


def run_streaming_form_data(boundary: bytes, cs: list[bytes], names: list[str]) -> None:
    from streaming_form_data import StreamingFormDataParser
    from streaming_form_data.targets import NullTarget

    p = StreamingFormDataParser(headers={"Content-Type": "multipart/form-data; boundary=" + boundary.decode()})
    for n in names:
        p.register(n, NullTarget())
    for c in cs:
        p.data_received(c)


def run_find_floor(boundary: bytes, cs: list[bytes], _names: list[str]) -> None:
    """The least a Python parser must do: find every delimiter across chunks."""
    delim = b"\r\n--" + boundary
    keep = len(delim) - 1
    tail = b""
    for c in cs:
        buf = tail + c if tail else c
        i = buf.find(delim)
        while i >= 0:
            i = buf.find(delim, i + 1)
        tail = buf[-keep:]


PARSERS: dict[str, Callable[[bytes, list[bytes], list[str]], None]] = {
    "bulkwire": run_bulkwire,
    "python-multipart": run_python_multipart,
    "multipart(defnull)": run_defnull,
    "werkzeug": run_werkzeug,
    "streaming-form-data": run_streaming_form_data,
    "bytes.find": run_find_floor,
}


def best(reps: int, f: Callable[[], None]) -> float:
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def names_of(body: bytes) -> list[str]:
    out, key, i = [], b'name="', 0
    while (i := body.find(key, i)) >= 0:
        j = body.index(b'"', i + len(key))
        out.append(body[i + len(key) : j].decode())
        i = j
    return sorted(set(out))


def parser_table(bodies: dict[str, bytes], boundary: bytes, sizes: list[int], reps: int) -> list[str]:
    failures = []
    print("\n## Parsers (MB/s; ratio = bulkwire time / peer time, < 1 means bulkwire is faster)\n")
    print("| body | chunk | " + " | ".join(PARSERS) + " | vs python-multipart | vs bytes.find |")
    print("|---|---:|" + "---:|" * (len(PARSERS) + 2))
    for key, body in bodies.items():
        names = names_of(body[: 2 * MiB]) if key != "C" else names_of(body)
        for size in sizes:
            cs = chunks(body, size)
            t = {}
            for name, f in PARSERS.items():
                try:
                    t[name] = best(reps, lambda f=f: f(boundary, cs, names))
                except Exception as e:  # a peer that cannot parse a body is reported, not fatal
                    print(f"<!-- {name} on {key}: {type(e).__name__}: {e} -->", file=sys.stderr)
                    t[name] = float("nan")
            mbs = [f"{len(body) / t[n] / 1e6:.0f}" for n in PARSERS]
            vs_pm = t["bulkwire"] / t["python-multipart"]
            vs_floor = t["bulkwire"] / t["bytes.find"]
            print(f"| {key} | {size // KiB} KiB | " + " | ".join(mbs) + f" | {vs_pm:.2f}x | {vs_floor:.2f}x |")
            if not vs_pm <= 1.0:
                failures.append(f"{key} at {size // KiB} KiB: slower than python-multipart ({vs_pm:.2f}x)")
            if key == "C" and not vs_pm <= 1 / 3:
                failures.append(f"C at {size // KiB} KiB: not 3x python-multipart ({1 / vs_pm:.2f}x)")
            if key == "A" and not vs_floor <= 1.2:
                failures.append(f"A at {size // KiB} KiB: {vs_floor:.2f}x the bytes.find floor (goal <= 1.2x)")
    return failures


def starlette_form(body: bytes, boundary: bytes, reps: int) -> float:
    from starlette.requests import Request

    cs = chunks(body, 64 * KiB)

    async def one() -> None:
        it: Iterator[bytes] = iter(cs)

        async def receive() -> dict:
            c = next(it, None)
            return {"type": "http.request", "body": c or b"", "more_body": c is not None}

        scope = {
            "type": "http",
            "method": "POST",
            "headers": [(b"content-type", b"multipart/form-data; boundary=" + boundary)],
        }
        form = await Request(scope, receive).form(max_files=10**6, max_fields=10**6)
        await form.close()

    return best(reps, lambda: anyio.run(one))


def starlette_table(form100: bytes, big: bytes, big_key: str, boundary: bytes, reps: int) -> None:
    print("\n## Starlette request.form() (64 KiB chunks; seconds, MB/s)\n")
    print("| body | python-multipart | bulkwire.install() | ratio |")
    print("|---|---:|---:|---:|")
    for label, body in (("100-field form", form100), (f"{len(big) / MiB:.0f} MiB file ({big_key})", big)):
        bulkwire.uninstall()
        starlette_form(body, boundary, 1)  # warm-up: imports, first-call costs
        t0 = starlette_form(body, boundary, reps)
        bulkwire.install()
        t1 = starlette_form(body, boundary, reps)
        bulkwire.uninstall()
        print(
            f"| {label} | {t0:.4f} s ({len(body) / t0 / 1e6:.0f}) | {t1:.4f} s ({len(body) / t1 / 1e6:.0f}) "
            f"| {t1 / t0:.2f}x |"
        )


def adversarial(n: int) -> dict[str, Callable[[], None]]:
    """Each advisory shape at n bytes, through the binding."""
    head = b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\n'
    close = b"\r\n--b--\r\n"

    def feed(data: bytes, chunk: int = 64 * KiB) -> Callable[[], None]:
        def f() -> None:
            p = bulkwire.MultipartParser(b"b", CALLBACKS)
            try:
                for c in chunks(data, chunk):
                    p.write(c)
                p.finalize()
            except bulkwire.MultipartParseError:
                pass

        return f

    empty_parts = b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\n\r\n' * (n // 48)
    return {
        "CR/LF preamble": feed(b"\r\n" * (n // 2) + head + b"x" + close),
        "CR/LF epilogue": feed(head + b"x" + close + b"\r\n" * (n // 2)),
        "CR/LF then no newline": feed(b"\r\n" + b"x" * n),
        "near-boundary part data": feed(head + (b"\r\n--" + b"b"[:-1] + b"X") * (n // 5) + close),
        "empty parts, one chunk": feed(empty_parts + b"--b--\r\n", chunk=len(empty_parts) + 8),
        "long header line": feed(b"--b\r\nX-A: " + b"a" * n),
        "crafted Content-Type": lambda: bulkwire.parse_options_header(b'a; !="' + b"\\" * n),
        "bytes per write (1 B)": feed(head + b"y" * (n // 64) + close, chunk=1),
    }


def linearity_table(small: int, large: int, reps: int) -> list[str]:
    failures = []
    print(f"\n## Advisory inputs through bulkwire: {small // KiB} KiB vs {large // KiB} KiB (goal <= 10x)\n")
    print("| input | small | large | ratio |")
    print("|---|---:|---:|---:|")
    a, b = adversarial(small), adversarial(large)
    for name in a:
        t1, t8 = best(reps, a[name]), best(reps, b[name])
        ratio = t8 / max(t1, 1e-7)
        print(f"| {name} | {t1 * 1e3:.3f} ms | {t8 * 1e3:.3f} ms | {ratio:.1f}x |")
        if ratio > 10 and t8 > 1e-3:
            failures.append(f"{name}: {ratio:.1f}x for {large // small}x the input")
    return failures


def form100(c_body: bytes, boundary: bytes) -> bytes:
    """The first 100 fields of body C, closed."""
    delim = b"--" + boundary + b"\r\n"
    i = 0
    for _ in range(101):
        i = c_body.index(delim, i) + 1
    return c_body[: i - 1] + b"--" + boundary + b"--\r\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bodies", required=True)
    ap.add_argument("--smoke", action="store_true", help="B and C only, one repetition, small inputs")
    args = ap.parse_args()
    meta = json.load(open(os.path.join(args.bodies, "meta.json")))
    boundary = meta["boundary"].encode()
    keys = ["B", "C"] if args.smoke else ["A", "B", "C", "D"]
    bodies = {k: open(os.path.join(args.bodies, k + ".bin"), "rb").read() for k in keys}
    reps = 1 if args.smoke else 3
    print(f"bulkwire {bulkwire.__version__}, Python {sys.version.split()[0]}, smoke={args.smoke}")
    failures = parser_table(bodies, boundary, [64 * KiB] if args.smoke else [KiB, 64 * KiB], reps)
    big = bodies["B"] if args.smoke else bodies["A"]
    starlette_table(form100(bodies["C"], boundary), big, "B" if args.smoke else "A", boundary, reps)
    failures += linearity_table(64 * KiB, 512 * KiB, reps) if args.smoke else linearity_table(MiB, 8 * MiB, reps)
    print()
    for f in failures:
        print("GOAL MISSED:", f)
    if args.smoke:
        print("smoke run: goals are not judged on smoke inputs")
        return 0
    print("all goals met" if not failures else f"{len(failures)} goal(s) missed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
