"""Exception classes: python-multipart's own when it is installed, so that
code catching ``python_multipart.exceptions.MultipartParseError`` (or
Starlette catching ``FormParserError``) keeps working after the switch;
otherwise classes of the same names, bases and ``offset`` attribute."""

from __future__ import annotations

try:
    from python_multipart.exceptions import FormParserError, MultipartParseError, ParseError
except ImportError:  # python-multipart is not installed

    class FormParserError(ValueError):  # type: ignore[no-redef]
        """Base error class of the form parser (python-multipart's shape)."""

    class ParseError(FormParserError):  # type: ignore[no-redef]
        """A parse error; ``offset`` is the index of the offending byte in
        the data of the ``write`` that raised it (-1 when unknown)."""

        def __init__(self, message: str, *, offset: int = -1) -> None:
            super().__init__(message)
            self.offset = offset

    class MultipartParseError(ParseError):  # type: ignore[no-redef]
        """Raised by :class:`bulkwire.MultipartParser` on a malformed body or
        a body over one of its limits."""


__all__ = ["FormParserError", "ParseError", "MultipartParseError"]
