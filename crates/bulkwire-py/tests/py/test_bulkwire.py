"""bulkwire's Python API: the drop-in MultipartParser under the inputs of
python-multipart's and Starlette's advisories (each shape here; their time
bounds are in bench/python/run, never in a test), the iterator API, and the
README's FastAPI example."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import anyio
import pytest
from python_multipart.exceptions import FormParserError, MultipartParseError

import bulkwire

MiB = 1 << 20
CRATE = Path(__file__).resolve().parents[2]


def body(*fields: tuple[str, bytes], boundary: bytes = b"b") -> bytes:
    out = b""
    for name, value in fields:
        out += b"--" + boundary + b'\r\nContent-Disposition: form-data; name="' + name.encode() + b'"\r\n\r\n'
        out += value + b"\r\n"
    return out + b"--" + boundary + b"--\r\n"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, bytes]] = []
        self.data_objects: list[object] = []

    def callbacks(self) -> dict:
        def data(name):  # type: ignore[no-untyped-def]
            def f(d, s, e):  # type: ignore[no-untyped-def]
                self.data_objects.append(d)
                self.events.append((name, bytes(d[s:e])))

            return f

        def note(name):  # type: ignore[no-untyped-def]
            return lambda: self.events.append((name, b""))

        return {
            "on_part_begin": note("part_begin"),
            "on_part_data": data("part_data"),
            "on_part_end": note("part_end"),
            "on_header_field": data("header_field"),
            "on_header_value": data("header_value"),
            "on_header_end": note("header_end"),
            "on_headers_finished": note("headers_finished"),
            "on_end": note("end"),
        }


# --- advisories --------------------------------------------------------------------------


def test_crlf_preamble_is_bounded() -> None:
    # CVE-2024-53981: CR/LF before the first boundary, byte by byte with a log call each.
    p = bulkwire.MultipartParser(b"b")
    with pytest.raises(MultipartParseError, match="preamble"):
        p.write(b"\r\n" * (5 * MiB))


def test_crlf_epilogue_is_bounded() -> None:
    r = Recorder()
    p = bulkwire.MultipartParser(b"b", r.callbacks())
    p.write(body(("a", b"1")))
    assert r.events[-1] == ("end", b"")
    with pytest.raises(MultipartParseError, match="epilogue"):
        p.write(b"\r\n" * (5 * MiB))


def test_crlf_then_8mib_without_newline() -> None:
    p = bulkwire.MultipartParser(b"b")
    with pytest.raises(MultipartParseError, match="preamble"):
        p.write(b"\r\n" + b"x" * (8 * MiB))


def test_header_count_and_size_are_bounded() -> None:
    p = bulkwire.MultipartParser(b"b")
    head = b'--b\r\nContent-Disposition: form-data; name="x"\r\n'
    with pytest.raises(MultipartParseError, match="Maximum header count exceeded"):
        p.write(head + b"X-A: 1\r\n" * 8)
    p = bulkwire.MultipartParser(b"b")
    with pytest.raises(MultipartParseError, match="Maximum header size exceeded"):
        p.write(head + b"X-A: " + b"a" * (1 * MiB))


@pytest.mark.parametrize("n,ok", [(70, True), (71, False), (256, False), (257, False)])
def test_boundary_length(n: int, ok: bool) -> None:
    b = b"x" * n
    if not ok:
        with pytest.raises(FormParserError, match="exceeds maximum of 70"):
            bulkwire.MultipartParser(b)
        return
    r = Recorder()
    p = bulkwire.MultipartParser(b, r.callbacks())
    p.write(body(("a", b"v"), boundary=b))
    p.finalize()
    assert ("part_data", b"v") in r.events


def test_crafted_content_type_parameters() -> None:
    # CVE-2024-24762's regex-killer, linear here.
    ct, params = bulkwire.parse_options_header(b'application/x-www-form-urlencoded; !="' + b"\\" * 100_000)
    assert ct == b"application/x-www-form-urlencoded" and b"!" in params
    # RFC 7578 4.2: extended parameters never override plain ones.
    assert bulkwire.parse_options_header("form-data; name*=utf-8''evil; name=\"a\"")[1] == {b"name": b"a"}
    assert bulkwire.parse_options_header('form-data; name="a;b"; filename="f"')[1] == {b"name": b"a;b", b"filename": b"f"}
    assert bulkwire.parse_options_header('Multipart/Form-Data; boundary="x"') == (b"multipart/form-data", {b"boundary": b"x"})
    assert bulkwire.parse_options_header(None) == (b"", {})


def test_duplicate_disposition_name_is_rejected() -> None:
    p = bulkwire.MultipartParser(b"b")
    with pytest.raises(MultipartParseError, match="Content-Disposition"):
        p.write(b'--b\r\nContent-Disposition: form-data; name="a"; name="b"\r\n\r\nx\r\n--b--\r\n')


def test_truncated_body_fails_at_finalize() -> None:
    p = bulkwire.MultipartParser(b"b")
    p.write(body(("a", b"1"))[:-8])
    with pytest.raises(MultipartParseError, match="truncated"):
        p.finalize()


def test_callback_that_raises_stops_write() -> None:
    seen: list[bytes] = []

    class Stop(Exception):
        pass

    def on_part_data(d: bytes, s: int, e: int) -> None:
        seen.append(d[s:e])
        raise Stop

    p = bulkwire.MultipartParser(b"b", {"on_part_data": on_part_data})
    with pytest.raises(Stop):
        p.write(body(("a", b"1"), ("b", b"2")))
    assert seen == [b"1"]


def test_callback_may_reenter_the_parser() -> None:
    p: bulkwire.MultipartParser
    offsets: list[int] = []

    def on_part_end() -> None:
        offsets.append(p.offset)
        assert p.write(b"") == 0  # would be "Already borrowed" if the parser were held

    def on_end() -> None:
        p.finalize()  # the close delimiter was read: nothing more to check

    p = bulkwire.MultipartParser(b"b", {"on_part_end": on_part_end, "on_end": on_end})
    p.write(body(("a", b"1")))
    assert len(offsets) == 1 and p.done


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_bytes_bytearray_memoryview_input(kind: type) -> None:
    raw = body(("a", b"hello"), ("b", b"x" * 1000))
    r = Recorder()
    p = bulkwire.MultipartParser(b"b", r.callbacks())
    chunks = [raw[i : i + 7] for i in range(0, len(raw), 7)]
    for c in chunks:
        assert p.write(kind(c)) == len(c)
    p.finalize()
    ref = Recorder()
    q = bulkwire.MultipartParser(b"b", ref.callbacks())
    q.write(raw)
    q.finalize()

    def merged(ev):  # type: ignore[no-untyped-def]
        out: list = []
        for n, v in ev:
            if out and v and out[-1][0] == n:
                out[-1] = (n, out[-1][1] + v)
            else:
                out.append((n, v))
        return out

    assert merged(r.events) == merged(ref.events)


def test_part_data_is_the_callers_bytes_object() -> None:
    r = Recorder()
    p = bulkwire.MultipartParser(b"b", r.callbacks())
    raw = body(("a", b"payload" * 100))
    p.write(raw)
    assert any(d is raw for d in r.data_objects)
    assert all(d is raw for d in r.data_objects)


def test_max_size_truncates_like_python_multipart() -> None:
    p = bulkwire.MultipartParser(b"b", max_size=10)
    assert p.write(b"--b\r\nContent-Disposition: form-data; name=a\r\n") == 10
    with pytest.raises(ValueError):
        bulkwire.MultipartParser(b"b", max_size="x")


# --- Starlette ---------------------------------------------------------------------------


def test_starlette_max_fields_stops_10000_empty_parts_in_one_chunk() -> None:
    from starlette.datastructures import Headers
    from starlette.formparsers import MultiPartException, MultiPartParser

    bulkwire.install()
    raw = b"".join(b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\n\r\n' for _ in range(10_000))
    raw += b"--b--\r\n"
    parsed = []

    class Counting(MultiPartParser):
        def on_headers_finished(self) -> None:
            parsed.append(1)
            super().on_headers_finished()

    async def stream():  # type: ignore[no-untyped-def]
        yield raw  # one chunk
        yield b""

    async def main() -> None:
        parser = Counting(Headers({"content-type": "multipart/form-data; boundary=b"}), stream(), max_fields=1000)
        with pytest.raises(MultiPartException, match="Too many fields"):
            await parser.parse()

    anyio.run(main)
    assert len(parsed) == 1001  # stopped at the first field over the limit, not at 10,000


# --- iterator API ------------------------------------------------------------------------


def test_iterator_api() -> None:
    raw = (
        b'--b\r\nContent-Disposition: form-data; name="t"\r\n\r\nhello\r\n'
        b'--b\r\nContent-Disposition: form-data; name="f"; filename="a.bin"\r\nContent-Type: application/x\r\n\r\n'
        + b"z" * 300_000
        + b"\r\n--b--\r\n"
    )
    for source in (raw, io.BytesIO(raw), [raw[i : i + 1000] for i in range(0, len(raw), 1000)]):
        parts = []
        for part in bulkwire.parse(source, "multipart/form-data; boundary=b", chunk_size=4096):
            chunks = list(part)
            assert all(isinstance(c, memoryview) for c in chunks)
            parts.append((part.name, part.filename, part.content_type, b"".join(chunks)))
        assert parts == [("t", None, None, b"hello"), ("f", "a.bin", "application/x", b"z" * 300_000)]


def test_iterator_skips_unread_parts_and_reports_errors() -> None:
    raw = body(("a", b"1"), ("b", b"2"))
    names = [p.name for p in bulkwire.parse(raw, "multipart/form-data; boundary=b")]
    assert names == ["a", "b"]
    first = next(bulkwire.parse(raw, "multipart/form-data; boundary=b"))
    assert first.headers == [("Content-Disposition", 'form-data; name="a"')]
    with pytest.raises(MultipartParseError, match="truncated"):
        for _ in bulkwire.parse(raw[:-9], "multipart/form-data; boundary=b"):
            pass


# --- the README's FastAPI example --------------------------------------------------------


def test_readme_fastapi_example_runs() -> None:
    from starlette.testclient import TestClient

    spec = importlib.util.spec_from_file_location("fastapi_app", CRATE / "examples" / "fastapi_app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import python_multipart

    assert python_multipart.MultipartParser is bulkwire.MultipartParser
    readme = (CRATE / "README.md").read_text()
    assert (CRATE / "examples" / "fastapi_app.py").read_text().strip() in readme
    with TestClient(mod.app) as client:
        r = client.post("/upload", data={"title": "cat"}, files={"file": ("cat.jpg", b"\xff\xd8" * 1000, "image/jpeg")})
        assert r.status_code == 200, r.text
        assert r.json() == {"title": "cat", "filename": "cat.jpg", "size": 2000}
        r = client.post(
            "/upload", content=b"--b\r\nbroken", headers={"content-type": "multipart/form-data; boundary=b"}
        )
        assert r.status_code == 400
