"""bulkwire: a python-multipart-compatible multipart parser in Rust.

- :class:`MultipartParser`: python-multipart's ``MultipartParser`` API
  (same callbacks, ``write``/``finalize``), bounded and linear-time.
- :func:`parse_options_header`: RFC 7578 plain parameters, no regex.
- :func:`install`: make ``python_multipart`` (and so Starlette and FastAPI)
  use the two above.
- :func:`parse`: an iterator API for new code.
"""

from __future__ import annotations

from ._bulkwire import MultipartParser, __version__, parse_options_header
from ._errors import FormParserError, MultipartParseError, ParseError
from ._iter import Part, parse

__all__ = [
    "FormParserError",
    "MultipartParseError",
    "MultipartParser",
    "ParseError",
    "Part",
    "__version__",
    "install",
    "uninstall",
    "parse",
    "parse_options_header",
]


# What install() replaced, for uninstall() (and for tests that compare).
_ORIGINALS: dict = {}


def install() -> None:
    """Make python-multipart, and every framework on it, parse with bulkwire.

    Replaces ``python_multipart.MultipartParser`` and
    ``python_multipart.multipart.MultipartParser`` (which python-multipart's
    own ``FormParser`` and Starlette's ``MultiPartParser`` create), and
    Starlette's module-level ``parse_options_header`` (it reads every part's
    Content-Disposition with it). Call it once at start-up, before the first
    request; calling it again does nothing more. python-multipart must be
    installed (Starlette needs it anyway)."""
    import sys

    import python_multipart
    import python_multipart.multipart as pm

    if pm.MultipartParser is not MultipartParser:
        _ORIGINALS["MultipartParser"] = pm.MultipartParser
    python_multipart.MultipartParser = MultipartParser  # type: ignore[misc]
    pm.MultipartParser = MultipartParser  # type: ignore[misc]
    # Starlette binds the name at import; patch it if Starlette is loaded or
    # importable, without importing it for programs that do not use it.
    try:
        import starlette.formparsers as sf
    except ImportError:
        sf = sys.modules.get("starlette.formparsers")
    if sf is not None:
        if sf.parse_options_header is not parse_options_header:
            _ORIGINALS["starlette.parse_options_header"] = sf.parse_options_header
        sf.parse_options_header = parse_options_header  # type: ignore[attr-defined]


def uninstall() -> None:
    """Undo :func:`install`."""
    import sys

    import python_multipart
    import python_multipart.multipart as pm

    if "MultipartParser" in _ORIGINALS:
        python_multipart.MultipartParser = pm.MultipartParser = _ORIGINALS.pop("MultipartParser")
    sf = sys.modules.get("starlette.formparsers")
    if sf is not None and "starlette.parse_options_header" in _ORIGINALS:
        sf.parse_options_header = _ORIGINALS.pop("starlette.parse_options_header")
