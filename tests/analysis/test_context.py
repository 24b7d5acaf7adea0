"""The run's context at each function's own interface: which wrong answers name a near name,
which source a prompt size comes from (and every reason a token-count file is passed over), and
the endpoint, dates and sessions a journal gives.

The prepared folder here is a stand-in holding only what context reads (root, fingerprint, plan,
bodies), so each rule is checked on numbers small enough to work out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from needlepoint.analysis.context import (
    CHARACTERS,
    TOKENIZER,
    USAGE,
    length_sizes,
    near_kind,
    run_context,
)

FINGERPRINT = "f" * 64
# Two lengths, two requests each; the bodies' texts are 3 + 4 and 10 + 20 characters long.
PLAN = {1: 60, 2: 60, 3: 240, 4: 240}
BODIES = {
    1: {"messages": [{"role": "system", "content": "abc"}, {"role": "user", "content": "defg"}]},
    2: {"prompt": "abc"},
    3: {"prompt": "x" * 10},
    4: {"messages": [{"role": "user", "content": "y" * 20}]},
}
GOOD = [
    {"seq": 1, "length": 60, "prompt_tokens": 10},
    {"seq": 2, "length": 60, "prompt_tokens": 30},
    {"seq": 3, "length": 240, "prompt_tokens": 101},
    {"seq": 4, "length": 240, "prompt_tokens": 100},
]


def prepared(root: Path) -> Any:
    """What length_sizes reads of a prepared folder, and nothing else."""
    plan = [SimpleNamespace(seq=s, length=n) for s, n in PLAN.items()]
    bodies = {s: json.dumps(b).encode() for s, b in BODIES.items()}
    return SimpleNamespace(root=root, fingerprint=FINGERPRINT, plan=plan, bodies=bodies)


def outcomes(tokens: dict[int, int | None]) -> list[Any]:
    """Outcomes in a deliberately unsorted order (240 first), with the given prompt tokens."""
    return [SimpleNamespace(length=PLAN[s], prompt_tokens=tokens.get(s)) for s in (4, 3, 2, 1)]


USAGE_TOKENS = {1: 900, 2: 902, 3: 2700, 4: 2701}


def counts_file(root: Path, data: Any) -> None:
    (root / "token_counts.json").write_text(json.dumps(data), "utf-8")


def sizes(root: Path, tokens: dict[int, int | None] = USAGE_TOKENS) -> list[tuple]:
    return [
        (s.length, s.unit, s.source, s.requests, s.minimum, s.median, s.maximum)
        for s in length_sizes(prepared(root), outcomes(tokens))
    ]


BY_USAGE = [
    (60, "tokens", USAGE, 2, 900, 901.0, 902),
    (240, "tokens", USAGE, 2, 2700, 2700.5, 2701),
]


def test_token_counts_of_these_materials_give_each_lengths_size(tmp_path: Path) -> None:
    counts_file(tmp_path, {"prepared_fingerprint": FINGERPRINT, "requests": GOOD})
    assert sizes(tmp_path) == [
        (60, "tokens", TOKENIZER, 2, 10, 20.0, 30),
        (240, "tokens", TOKENIZER, 2, 100, 100.5, 101),
    ]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"prepared_fingerprint": "0" * 64, "requests": GOOD}, "other materials"),
        ({"requests": GOOD}, "no fingerprint"),
        ({"prepared_fingerprint": FINGERPRINT}, "no requests"),
        ({"prepared_fingerprint": FINGERPRINT, "requests": GOOD[:2]}, "a length missing"),
        (
            {"prepared_fingerprint": FINGERPRINT, "requests": [*GOOD[:3], GOOD[3] | {"seq": 9}]},
            "a seq not in the plan",
        ),
        (
            {
                "prepared_fingerprint": FINGERPRINT,
                "requests": [*GOOD[:3], GOOD[3] | {"length": 60}],
            },
            "a seq under another length",
        ),
        (
            {
                "prepared_fingerprint": FINGERPRINT,
                "requests": [*GOOD[:3], GOOD[3] | {"prompt_tokens": True}],
            },
            "a count that is a bool",
        ),
        (
            {
                "prepared_fingerprint": FINGERPRINT,
                "requests": [*GOOD[:3], GOOD[3] | {"prompt_tokens": 100.0}],
            },
            "a count that is a float",
        ),
        (
            {"prepared_fingerprint": FINGERPRINT, "requests": [*GOOD[:3], {"seq": 4}]},
            "a request without its length",
        ),
        ({"prepared_fingerprint": FINGERPRINT, "requests": "many"}, "requests not a list"),
        ([GOOD], "not an object"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_token_counts_not_whole_or_not_ours_fall_back_to_usage(
    tmp_path: Path, data: Any, why: str
) -> None:
    counts_file(tmp_path, data)
    assert sizes(tmp_path) == BY_USAGE, why


def test_an_unreadable_token_count_file_falls_back_to_usage(tmp_path: Path) -> None:
    (tmp_path / "token_counts.json").write_bytes(b"\xff not json")
    assert sizes(tmp_path) == BY_USAGE
    (tmp_path / "token_counts.json").unlink()
    (tmp_path / "token_counts.json").mkdir()  # not a file at all
    assert sizes(tmp_path) == BY_USAGE


def test_a_token_count_file_is_read_up_to_64_mib_and_not_beyond(tmp_path: Path) -> None:
    text = json.dumps({"prepared_fingerprint": FINGERPRINT, "requests": GOOD}).encode()
    limit = 64 * 1024 * 1024  # written out: the rule, not the code's own constant
    (tmp_path / "token_counts.json").write_bytes(text + b" " * (limit - len(text)))
    assert sizes(tmp_path)[0][2] == TOKENIZER
    (tmp_path / "token_counts.json").write_bytes(text + b" " * (limit + 1 - len(text)))
    assert sizes(tmp_path) == BY_USAGE


def test_usage_is_used_only_when_every_length_has_some(tmp_path: Path) -> None:
    # One request of a length without usage still leaves usage; a length without any does not.
    assert sizes(tmp_path, USAGE_TOKENS | {2: None}) == [
        (60, "tokens", USAGE, 1, 900, 900.0, 900),
        (240, "tokens", USAGE, 2, 2700, 2700.5, 2701),
    ]
    assert sizes(tmp_path, USAGE_TOKENS | {3: None, 4: None}) == [
        (60, "characters", CHARACTERS, 2, 3, 5.0, 7),
        (240, "characters", CHARACTERS, 2, 10, 15.0, 20),
    ]


def test_a_usage_of_zero_tokens_is_a_count(tmp_path: Path) -> None:
    assert sizes(tmp_path, USAGE_TOKENS | {1: 0, 2: 0}) == [
        (60, "tokens", USAGE, 2, 0, 0.0, 0),
        BY_USAGE[1],
    ]


ANSWER = {"near_codes": ["AB-1234", "CD-5678"], "near_kinds": ["swap", "qualifier"]}


@pytest.mark.parametrize(
    ("status", "text", "answer", "kind"),
    [
        ("error", "CD-5678", ANSWER, "qualifier"),
        ("error", " \tAB-1234\n", ANSWER, "swap"),  # trimmed as the scorer trims
        ("error", "EF-9012", ANSWER, None),  # a code, but not a near name's
        ("error", "CD-5678 and more", ANSWER, None),
        ("correct", "CD-5678", ANSWER, None),  # only a wrong answer is given a kind
        ("unknown", "CD-5678", ANSWER, None),
        ("error", "CD-5678", {"near_codes": ["CD-5678"], "near_kinds": []}, None),
        ("error", "CD-5678", {}, None),
    ],
)
def test_a_wrong_answer_has_the_kind_of_the_near_name_it_gives(
    status: str, text: str, answer: dict, kind: str | None
) -> None:
    assert near_kind({"status": status, "response_text": text}, answer) == kind


def test_a_runs_dates_are_its_first_and_last_record_days(tmp_path: Path) -> None:
    records = [
        {"type": "session", "time": "2026-12-02T00:00:01Z"},
        {"type": "attempt", "time": "2026-11-30T23:59:59Z"},
        {"type": "outcome", "time": 1764633600},  # not a string: no date is read from it
        {"type": "outcome"},
        {"type": "session", "time": "2026-12-01T12:00:00Z"},
    ]
    c = run_context(prepared(tmp_path), outcomes(USAGE_TOKENS), records, "https://h.example/v1")
    assert (c.endpoint_host, c.first_date, c.last_date, c.sessions) == (
        "h.example",
        "2026-11-30",
        "2026-12-02",
        2,
    )
    assert [s.source for s in c.lengths] == [USAGE, USAGE]


def test_a_results_table_has_no_dates_and_no_sessions(tmp_path: Path) -> None:
    c = run_context(prepared(tmp_path), outcomes(USAGE_TOKENS), None)
    assert (c.endpoint_host, c.first_date, c.last_date, c.sessions) == (None, None, None, None)


def test_the_host_is_named_without_user_port_path_or_case(tmp_path: Path) -> None:
    url = "https://user:secret@API.Example.COM:8443/v1?key=secret"
    c = run_context(prepared(tmp_path), outcomes(USAGE_TOKENS), [], url)
    assert (c.endpoint_host, c.sessions, c.first_date) == ("api.example.com", 0, None)
