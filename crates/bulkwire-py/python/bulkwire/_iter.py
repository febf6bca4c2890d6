"""The iterator API: ``for part in bulkwire.parse(stream, content_type)``.

Parts come in body order; each part is itself an iterator over its data as
``memoryview`` slices of the chunks read from ``stream`` (no copy). A part
whose data is not read is skipped when the next part is asked for. Data
views stay valid as long as they are referenced (each keeps its chunk
alive).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Union

from ._bulkwire import Feeder

Stream = Union[IO[bytes], Iterable[bytes], bytes, bytearray, memoryview]

_CHUNK = 64 * 1024


class Part:
    """One part: ``name``, ``filename`` (``None`` for a text field),
    ``content_type`` (``None`` when not sent), ``headers`` (list of
    ``(name, value)`` in order, as sent), and its data when iterated."""

    __slots__ = ("name", "filename", "content_type", "headers", "_body", "_done")

    def __init__(self, body: _Body, ev: tuple) -> None:
        _, self.name, self.filename, self.content_type, self.headers = ev
        self._body = body
        self._done = False

    def __iter__(self) -> Iterator[memoryview]:
        return self

    def __next__(self) -> memoryview:
        if self._done:
            raise StopIteration
        data = self._body.next_data()
        if data is None:
            self._done = True
            raise StopIteration
        return data

    def read(self) -> bytes:
        """The rest of this part's data, joined (for small fields)."""
        return b"".join(self)

    def __repr__(self) -> str:
        return f"Part(name={self.name!r}, filename={self.filename!r}, content_type={self.content_type!r})"


def _chunks(stream: Stream, chunk_size: int) -> Iterator[bytes]:
    if isinstance(stream, (bytes, bytearray, memoryview)):
        data = bytes(stream)
        for i in range(0, len(data), chunk_size):
            yield data[i : i + chunk_size]
        return
    read = getattr(stream, "read", None)
    if read is not None:
        while True:
            c = read(chunk_size)
            if not c:
                return
            yield bytes(c) if not isinstance(c, bytes) else c
    else:
        for c in stream:
            if c:
                yield bytes(c) if not isinstance(c, bytes) else c


class _Body:
    """Pulls chunks from the stream and events from the feeder as asked."""

    def __init__(self, chunks: Iterator[bytes], feeder: Feeder) -> None:
        self._chunks = chunks
        self._feeder = feeder
        self._events: list = []
        self._i = 0
        self._view = memoryview(b"")
        self._finished = False
        self.current: Part | None = None

    def _next_event(self) -> tuple | None:
        while self._i >= len(self._events):
            if self._finished:
                return None
            chunk = next(self._chunks, None)
            if chunk is None:
                self._finished = True
                self._events, self._i = self._feeder.feed(b"", True), 0
            else:
                self._view = memoryview(chunk)
                self._events, self._i = self._feeder.feed(chunk, False), 0
        ev = self._events[self._i]
        self._i += 1
        return ev

    def next_data(self) -> memoryview | None:
        ev = self._next_event()
        if ev is None or ev[0] == 3:
            return None
        if ev[0] == 1:
            return self._view[ev[1] : ev[2]]
        if ev[0] == 2:
            return memoryview(ev[1])
        raise AssertionError(f"unexpected event {ev!r} inside a part")

    def next_part(self) -> Part | None:
        if self.current is not None:
            for _ in self.current:  # skip what the caller did not read
                pass
        while True:
            ev = self._next_event()
            if ev is None or ev[0] == 4:
                # Drain: a body that stops early is an error from the feeder.
                while self._next_event() is not None:
                    pass
                return None
            if ev[0] == 0:
                self.current = Part(self, ev)
                return self.current


def parse(
    stream: Stream,
    content_type: str,
    *,
    chunk_size: int = _CHUNK,
    max_parts: int | None = None,
    max_field_bytes: int | None = None,
    max_header_bytes: int | None = None,
    max_headers: int | None = None,
) -> Iterator[Part]:
    """Parses a multipart body (``multipart/form-data`` per RFC 7578, or
    ``multipart/related``/``mixed`` per RFC 2046) read from ``stream``: a
    binary file object (read ``chunk_size`` bytes at a time), an iterable of
    ``bytes`` chunks, or ``bytes``. ``content_type`` is the request's
    ``Content-Type`` header value. Raises ``MultipartParseError`` on a
    malformed, truncated or over-limit body; the limits default to
    bulkwire's (see the README)."""
    feeder = Feeder(
        content_type,
        max_parts=max_parts,
        max_field_bytes=max_field_bytes,
        max_header_bytes=max_header_bytes,
        max_headers=max_headers,
    )
    body = _Body(_chunks(stream, chunk_size), feeder)
    while True:
        part = body.next_part()
        if part is None:
            return
        yield part
