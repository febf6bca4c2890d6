"""Proves that the foreign suite in this pytest run exercised bulkwire:
every name through which the tests reach a MultipartParser is bulkwire's,
and a parser reached through python-multipart behaves as bulkwire's."""

from __future__ import annotations

import sys

import pytest

import bulkwire


def test_parser_is_swapped() -> None:
    import python_multipart
    import python_multipart.multipart as pm
    from python_multipart.exceptions import MultipartParseError

    assert python_multipart.MultipartParser is bulkwire.MultipartParser
    assert pm.MultipartParser is bulkwire.MultipartParser
    # python-multipart's FormParser creates its parser through the module
    # global, so its multipart path runs on bulkwire too.
    fp = pm.FormParser("multipart/form-data", None, None, boundary=b"b")
    assert type(fp.parser) is bulkwire.MultipartParser
    # The test modules imported the name at collection, after the swap.
    for name in ("tests.test_multipart", "tests.test_formparsers"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "MultipartParser"):
            assert mod.MultipartParser is bulkwire.MultipartParser, name
    # Behaviour only bulkwire has: a truncated body is an error at finalize,
    # raised as python-multipart's own exception class.
    p = python_multipart.MultipartParser(b"b")
    p.write(b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx")
    with pytest.raises(MultipartParseError):
        p.finalize()


def test_starlette_is_swapped() -> None:
    import starlette.formparsers as sf

    assert sf.multipart.MultipartParser is bulkwire.MultipartParser
    assert sf.parse_options_header is bulkwire.parse_options_header
