"""Differential test: python-multipart's own MultipartParser and bulkwire's
over every vector (python-multipart's sdist vectors, the project's
testsuite/vectors), whole, byte by byte and at random split points, must
give the same events, except on the vectors listed in DIFFERS (each with
its reason, the same choices as the foreign suites' expected differences).

Run by crates/bulkwire-py/tests/python.rs with BULKWIRE_VECTOR_DIRS set
(os.pathsep-separated directories of .http files)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from python_multipart.exceptions import MultipartParseError
import python_multipart.multipart

import bulkwire

# python-multipart's own parser, even when bulkwire.install() already ran.
PMParser = bulkwire._ORIGINALS.get("MultipartParser", python_multipart.multipart.MultipartParser)
assert PMParser is not bulkwire.MultipartParser

NAMES = (
    "part_begin",
    "part_data",
    "part_end",
    "header_begin",
    "header_field",
    "header_value",
    "header_end",
    "headers_finished",
    "end",
)
DATA = {"part_data", "header_field", "header_value"}

DELIMITER = "RFC 2046 5.1.1: a line starting with CRLF--boundary that goes on with other bytes is malformed"
PREAMBLE = "RFC 2046 5.1.1: bytes before the first delimiter are preamble, not an error"
# vector name -> reason bulkwire's events differ from python-multipart's.
DIFFERS = {
    "almost_match_boundary_without_CR": DELIMITER,
    "almost_match_boundary_without_LF": DELIMITER,
    "almost_match_boundary_without_final_hyphen": DELIMITER,
    "bad_initial_boundary": PREAMBLE + " (then truncated at finalize)",
    "base64_encoding_whitespace": (
        "header values are handed out without surrounding whitespace (RFC 9110 5.5: OWS is not part of "
        "the value); python-multipart keeps a leading tab and trailing spaces"
    ),
}


def vectors() -> list[tuple[str, bytes, bytes]]:
    """(name, boundary, body) of every multipart vector found."""
    out = []
    for d in os.environ.get("BULKWIRE_VECTOR_DIRS", "").split(os.pathsep):
        if not d:
            continue
        for http in sorted(Path(d).glob("*.http")):
            spec = http.with_suffix(".yaml")
            raw = http.read_bytes()
            if spec.exists():
                b = yaml.safe_load(spec.read_text())["boundary"]
                out.append((http.stem, b.encode("latin-1"), raw))
                continue
            head, sep, body = raw.partition(b"\r\n\r\n")
            if not sep or b"chunked" in head.lower():
                continue
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-type" and value.strip().lower().startswith(b"multipart/"):
                    _, params = bulkwire.parse_options_header(value.strip())
                    out.append((http.stem, params[b"boundary"], body))
    return out


VECTORS = vectors()


def events(make: Callable[..., object], boundary: bytes, chunks: list[bytes]) -> tuple[list, str | None]:
    """Merged events and the error class name (None when the body parsed)."""
    ev: list[tuple[str, bytes]] = []

    def data(name: str) -> Callable[[bytes, int, int], None]:
        return lambda d, s, e: ev.append((name, bytes(d[s:e])))

    def note(name: str) -> Callable[[], None]:
        return lambda: ev.append((name, b""))

    cbs = {"on_" + n: (data(n) if n in DATA else note(n)) for n in NAMES}
    err = None
    try:
        p = make(boundary, cbs)
        for c in chunks:
            p.write(c)
        p.finalize()  # type: ignore[attr-defined]
    except MultipartParseError as e:
        err = type(e).__name__
    merged: list[tuple[str, bytes]] = []
    for name, value in ev:
        if merged and value and merged[-1][0] == name and name in DATA:
            merged[-1] = (name, merged[-1][1] + value)
        else:
            merged.append((name, value))
    return merged, err


def splits(body: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.randrange(len(body) + 1) for _ in range(1 + seed % 5))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]


def test_vectors_present() -> None:
    names = {v[0] for v in VECTORS}
    assert len(VECTORS) >= 40, len(VECTORS)
    assert set(DIFFERS) <= names


@pytest.mark.parametrize("name,boundary,body", VECTORS, ids=[v[0] for v in VECTORS])
def test_same_events_every_chunking(name: str, boundary: bytes, body: bytes) -> None:
    ours = events(bulkwire.MultipartParser, boundary, [body])
    # bulkwire's own result does not depend on the chunking.
    assert events(bulkwire.MultipartParser, boundary, [body[i : i + 1] for i in range(len(body))]) == ours
    for seed in range(20):
        assert events(bulkwire.MultipartParser, boundary, splits(body, seed)) == ours, seed
    theirs = events(PMParser, boundary, [body])
    if name in DIFFERS:
        assert ours != theirs, f"{name} no longer differs: drop it from DIFFERS"
        return
    if theirs[1] is not None:
        # python-multipart rejects it: so must bulkwire (offsets may differ).
        assert ours[1] is not None, name
        return
    if ours[1] is not None:
        pytest.fail(f"{name}: bulkwire rejects a body python-multipart accepts")
    assert ours == theirs
