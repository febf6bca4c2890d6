"""pytest plugin (``-p bulkwire_swap``) that runs foreign test suites
(python-multipart's, Starlette's) against bulkwire.

- Before collection (``pytest_configure``) it calls ``bulkwire.install()``,
  so every ``MultipartParser`` the tests import or create is bulkwire's;
  the sentinel test (``test_bulkwire_sentinel.py``) proves it.
- Each test whose expectation encodes a choice that differs from RFC 7578 /
  RFC 2046 or from a security fix is marked, by node id, as a strict xfail
  with its reason (``EXPECTED_DIFFERENCES``); a listed test that passes
  fails the run, and so does a listed id that was not collected.
- At the end it writes a JSON report to ``$BULKWIRE_REPORT`` (outcome of
  every test) for the Rust driver (``crates/bulkwire-py/tests/python.rs``).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

PM = "tests/test_multipart.py::"
FP = "tests/test_formparsers.py::"

OFFSET = (
    "error offset: bulkwire reports the first byte that cannot be valid (the bad byte itself, or the "
    "start of the line that cannot be a boundary), python-multipart the byte where its state machine gave up"
)
DELIMITER = (
    "RFC 2046 5.1.1: CRLF--boundary 'appearing in its entirety' is a delimiter, so a line that starts with it "
    "and goes on with other bytes is malformed, not part data (two parsers must not see different parts)"
)
PREAMBLE = (
    "RFC 2046 5.1.1: bytes before the first delimiter are preamble, skipped (up to the preamble limit), "
    "not an error at byte 0"
)
# node id (or a prefix of parametrized ids) -> reason. The crate README lists them too.
EXPECTED_DIFFERENCES: dict[str, str] = {
    PM + "test_parser_states_remain_enum_members": (
        "bulkwire exposes no python-multipart internal state machine (`.state`); `.done` says the close "
        "delimiter was read"
    ),
    PM + "TestFormParser::test_bad_start_boundary": PREAMBLE + "; and python-multipart's message text",
    PM + "TestFormParser::test_http__namebadinitialboundary": PREAMBLE + " (then: truncated at finalize)",
    PM + "TestFormParser::test_boundary_too_long": (
        "RFC 2046 5.1.1 limits a boundary to 70 characters; python-multipart accepts 256"
    ),
    PM + "TestFormParser::test_http__namealmostmatchboundarywithoutCR": DELIMITER,
    PM + "TestFormParser::test_http__namealmostmatchboundarywithoutLF": DELIMITER,
    PM + "TestFormParser::test_http__namealmostmatchboundarywithoutfinalhyphen": DELIMITER,
    PM + "TestFormParser::test_feed_single_bytes__namealmostmatchboundarywithoutCR": DELIMITER,
    PM + "TestFormParser::test_feed_single_bytes__namealmostmatchboundarywithoutLF": DELIMITER,
    PM + "TestFormParser::test_feed_single_bytes__namealmostmatchboundarywithoutfinalhyphen": DELIMITER,
    PM + "TestFormParser::test_http__nameCRinheadervalue": OFFSET + " (75, the CR, vs 76)",
    PM + "TestFormParser::test_http__namebadendofheaders": OFFSET,
    PM + "TestFormParser::test_max_size_form_parser": (
        "a body cut short by max_size never reaches its close delimiter: finalize() raises (truncated) "
        "instead of accepting a partial form"
    ),
    PM + "TestFormParser::test_max_size_multipart": (
        "a body cut short by max_size never reaches its close delimiter: finalize() raises (truncated) "
        "instead of accepting a partial form"
    ),
    PM + "TestFormParser::test_multipart_parser_data_after_last_boundary": (
        "the epilogue is bounded (64 KiB): 50 MB after the close delimiter is an error, so a client "
        "cannot keep a worker reading an endless tail"
    ),
    PM + "TestFormParser::test_multipart_parser_preamble_before_first_boundary__brnrnrnrnrnrnrnrnrnrn": (
        "the preamble is bounded (64 KiB): 10 MB of CR/LF before the first delimiter is an error "
        "(CVE-2024-53981's shape), in linear time"
    ),
    FP + "test_missing_name_parameter_on_content_disposition[asyncio-app1-expectation1]": (
        "`Content-Disposition: form-data; =\"field0\"` is a malformed parameter: bulkwire rejects the part "
        "as a parse error (400 'Invalid multipart data.') before Starlette looks for its name (400 with "
        "Starlette's own message)"
    ),
}


def short(nodeid: str) -> str:
    """Parametrized ids embed whole bodies (one is 10 MB): keep them readable."""
    if len(nodeid) <= 160:
        return nodeid
    return nodeid[:160] + "...#" + hashlib.sha1(nodeid.encode()).hexdigest()[:8]


def difference(nodeid: str) -> tuple[str, str] | None:
    for key, reason in EXPECTED_DIFFERENCES.items():
        if nodeid == key or (nodeid.startswith(key) and not key.endswith("]")):
            return key, reason
    return None


def pytest_configure(config: pytest.Config) -> None:
    import bulkwire

    bulkwire.install()
    config._bulkwire_results = {}  # type: ignore[attr-defined]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    seen = set()
    for item in items:
        d = difference(item.nodeid)
        if d is not None:
            seen.add(d[0])
            item.add_marker(pytest.mark.xfail(reason="bulkwire differs: " + d[1], strict=True))
    ran = {str(a).split("::")[0] for a in config.args}
    stale = [k for k in EXPECTED_DIFFERENCES if k not in seen and k.split("::")[0] in ran]
    if stale and not config.getoption("keyword"):
        raise pytest.UsageError("expected differences not collected (stale list): %s" % stale)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    rep = outcome.get_result()
    results = item.config._bulkwire_results  # type: ignore[attr-defined]
    if rep.when == "call" or (rep.when == "setup" and not rep.passed):
        if hasattr(rep, "wasxfail"):
            state = "xfailed" if rep.skipped else "xpassed"
        else:
            state = rep.outcome  # passed / failed / skipped
        if rep.when == "setup" and rep.failed:
            state = "error"
        results[short(item.nodeid)] = state
    elif rep.when == "teardown" and rep.failed:
        results[short(item.nodeid)] = "error"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("BULKWIRE_REPORT")
    if not path:
        return
    results = session.config._bulkwire_results  # type: ignore[attr-defined]
    with open(path, "w") as fh:
        json.dump(
            {
                "exitstatus": int(exitstatus),
                "results": results,
                "expected_differences": {
                    short(i.nodeid): d[1] for i in session.items if (d := difference(i.nodeid)) is not None
                },
            },
            fh,
            indent=1,
        )
