"""What SmolLM2's wrong answers were, as docs/local-model.md states it (twice: its own account and the one moved from the README), re-counted
from the committed run's journal (each answer's text against its own request's records)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from needlepoint.run.results import derive

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "evidence" / "20261130-local-smollm2" / "run"
CODE = re.compile(r"\b[A-Z]{2}-[0-9]{4}\b")


def _kind(text: str, answer: dict) -> str:
    codes = set(CODE.findall(text))
    if codes:
        if codes & set(answer["codes_present"]) - {answer["expected"]}:
            return "another record's code"
        return "own code" if answer["expected"] in codes else "a code in no record"
    if re.search(r"[A-Z]+-\d+", text):
        return "malformed code"
    return "bare number" if re.search(r"\d", text) else "no code"


def test_the_bad_format_answers_are_counted_as_the_docs_say() -> None:
    from needlepoint.design.prepared import load_prepared

    results = derive(RUN)
    key = load_prepared(results.prepared_dir).answer_key
    rows = [r for r in results.rows if r["kind"] == "bad_format"]
    counts = Counter(_kind(r["response_text"], key[int(r["seq"])]) for r in rows)
    assert len(rows) == 84
    assert counts == {
        "bare number": 34,
        "another record's code": 31,
        "a code in no record": 8,
        "malformed code": 6,
        "no code": 5,
    }
    assert sum(r["kind"] == "extra_text" for r in results.rows) == 5
    docs = (ROOT / "docs" / "local-model.md").read_text("utf-8")
    for text in (docs,):
        assert "34" in text and "31" in text and "typically a number" not in text.replace(
            'not "typically a number"', ""
        )
