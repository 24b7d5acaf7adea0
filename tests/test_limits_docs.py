"""docs/runner.md's Limits and failure kinds against the code, so no number drifts unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from needlepoint.analysis import power
from needlepoint.analysis.inputs import RESULTS_FIELD_LIMIT
from needlepoint.contamination.context import MAX_DEPTH as WALK_DEPTH
from needlepoint.contamination.context import MAX_ENTRIES, MAX_TEXT_BYTES
from needlepoint.design import schema
from needlepoint.jsonio import MAX_JSON_DEPTH
from needlepoint.run import interpret
from needlepoint.run.options import DEFAULT_TIMEOUT_S, MIN_KEY_LENGTH
from needlepoint.run.scoring import PROTOCOL_FAILURE_KINDS, TRANSPORT_KINDS
from needlepoint.run.sweep import MAX_RUNS
from needlepoint.run.transport import MAX_BODY_BYTES, PIECE

DOC = (Path(__file__).resolve().parent.parent / "docs" / "runner.md").read_text("utf-8")
MIB, GIB = 1 << 20, 1 << 30


def limits_rows() -> dict[str, str]:
    """The Limits section's table rows, ``what -> limit`` (both tables)."""
    section = DOC[DOC.index("## Limits") : DOC.index("## Exit statuses")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells[1]
    return rows


ROWS = limits_rows()


@pytest.mark.parametrize(
    ("what", "limit"),
    [
        (
            "a response body, decoded or raw, across every `Content-Encoding`",
            f"{MAX_BODY_BYTES // MIB} MiB ({MAX_BODY_BYTES:,} bytes)",
        ),
        ("decoding step", f"{PIECE // 1024} KiB out of `zlib` per call"),
        ("JSON values in a response body", f"{interpret.MAX_JSON_VALUES:,} (estimated"),
        ("nesting of a response body", f"{interpret.MAX_DEPTH} levels"),
        ("`usage` token counts", "integers from 0 to 2^53 − 1"),
        ("connect timeout", "at most 15 s"),
        ("read, write and pool timeouts", f"(default {DEFAULT_TIMEOUT_S:g} s)"),
        ("key length", f"at least {MIN_KEY_LENGTH} characters"),
        ("a `results.csv` cell read back by `analyze --results`", f"{RESULTS_FIELD_LIMIT // MIB}"),
        ("runs in `SWEEP.json`", f"{MAX_RUNS};"),
        ("`cases`", f"{schema.MAX_CASES:,}"),
        ("each of `lengths`", f"{schema.MAX_LENGTH:,} records"),
        ("number of `lengths`", f"{schema.MAX_LENGTHS}"),
        ("`orders`", f"{schema.MAX_ORDERS}"),
        ("requests (`cases × len(lengths) × 2 × 4`)", f"{schema.MAX_REQUESTS:,}"),
        (
            "estimated `requests.jsonl` plus `answer_key.jsonl`",
            f"{schema.MAX_PREPARED_BYTES // MIB}",
        ),
        ("`places × sites × qualifiers`", f"{schema.MAX_NAME_SPACE:,}"),
        ("words per pool", f"{schema.MAX_POOL:,}"),
        ("each template", f"{schema.MAX_TEMPLATE_CHARS:,} characters"),
        ("`max_tokens`, `max_completion_tokens`", "2^31 − 1"),
        ("`analysis.bootstrap_resamples`", f"{schema.MAX_RESAMPLES:,}"),
        (
            "Monte Carlo bootstrap memory (`resamples × cases × 12` bytes)",
            f"{schema.MAX_BOOTSTRAP_BYTES // GIB} GiB",
        ),
    ],
)
def test_each_documented_limit_is_the_codes(what: str, limit: str) -> None:
    assert limit in ROWS[what], (what, ROWS[what])


def test_the_token_limits_are_the_documented_powers() -> None:
    assert (interpret.MAX_TOKENS, schema.MAX_TOKENS) == (2**53, 2**31 - 1)


def test_the_strict_json_rule_names_the_depth() -> None:
    row = ROWS[next(k for k in ROWS if k.startswith("`run.json`"))]
    assert f"nesting of at most {MAX_JSON_DEPTH} levels" in row


def test_power_and_contamination_limits_in_prose() -> None:
    assert f"{power.MAX_POWER_CASES:,} cases per design" in DOC
    assert f"{power.MAX_SIMULATIONS:,} simulated runs per point" in DOC
    assert f"estimated peak of at most {power.MAX_POWER_BYTES // GIB} GiB" in DOC
    assert f"{MAX_ENTRIES:,} entries and descends no more than {WALK_DEPTH} folders" in DOC
    assert f"no context file over {MAX_TEXT_BYTES // MIB} MiB" in DOC


def test_every_failure_kind_is_documented() -> None:
    for kind in PROTOCOL_FAILURE_KINDS:
        assert f"`{kind}`" in DOC, kind
    for kind in TRANSPORT_KINDS.values():
        assert f"`{kind}`" in DOC, kind


def test_the_size_failure_names_the_limit_as_documented() -> None:
    from needlepoint.run.transport import BodyReader

    reader = BodyReader(MAX_BODY_BYTES)
    assert f"limit of {MAX_BODY_BYTES} bytes" in reader.detail()
    assert re.search(r"`body_too_large` \| the limit, the bytes received", DOC)
