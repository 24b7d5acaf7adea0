"""Synthetic results tables with chosen outcomes, consistent with a real prepared folder.

An outcome spec is ``"correct"``, ``"error:<kind>"``, ``"failure:<kind>"`` or ``"unexecuted"``.
Response texts are built so that the project's scorer gives back exactly the chosen status and
kind, so the tables pass the analysis's own validation.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needlepoint.analysis.inputs import RESULT_COLUMNS
from needlepoint.design.prepared import PlanRow, Prepared

JOURNAL = "ab" * 32
Spec = Callable[[PlanRow], str]


def _text(kind: str, key: dict[str, Any]) -> str:
    expected = key["expected"]
    near = key["near_codes"][0]
    other = next(c for c in key["codes_present"] if c not in key["near_codes"] and c != expected)
    absent = next(f"ZZ-{i:04d}" for i in range(10000) if f"ZZ-{i:04d}" not in key["codes_present"])
    base = kind.removeprefix("code_when_absent:")
    return {
        "near_distractor_code": near,
        "other_present_code": other,
        "absent_code": absent,
        "false_unknown": "UNKNOWN",
        "extra_text": f"The code is {expected}.",
        "bad_format": "I cannot tell.",
    }[base]


def row_for(plan: PlanRow, key: dict[str, Any], spec: str, simulation: bool, journal: str):
    """One results.csv row (all strings) for a plan row and an outcome spec."""
    row = {c: str(getattr(plan, c)) for c in RESULT_COLUMNS[:9]}
    status, _, kind = spec.partition(":")
    status = {"failure": "protocol_failure"}.get(status, status)
    executed = status != "unexecuted"
    text = ""
    if status == "correct":
        text = " " + key["expected"] + "\t"  # Java trim removes the space and the tab
    elif status == "error":
        text = _text(kind, key)
    indeterminate = kind.startswith("indeterminate") or kind == "connect_error"
    row |= {
        "status": status,
        "kind": kind,
        "response_text": text,
        "http_status": ""
        if not executed or indeterminate
        else "500"
        if kind == "http_status"
        else "200",
        "latency_s": f"{1 + plan.seq / 100:.2f}" if executed and not indeterminate else "",
        "prompt_tokens": str(900 + plan.length * 10) if status in ("correct", "error") else "",
        "completion_tokens": "4" if status in ("correct", "error") else "",
        "reasoning_tokens": "",
        "cost": f"{0.00001 * plan.seq:.6f}" if status in ("correct", "error") else "",
        "simulation": "true" if simulation else "false",
        "journal_sha256": journal,
    }
    return row


def make_rows(
    prepared: Prepared,
    spec: Spec | dict[int, str] | None = None,
    simulation: bool = True,
    journal: str = JOURNAL,
) -> list[dict[str, str]]:
    """Rows for every planned seq; ``spec`` maps a plan row (or a seq) to its outcome."""
    if spec is None:
        spec = {}
    get = (lambda p: spec.get(p.seq, "correct")) if isinstance(spec, dict) else spec
    return [
        row_for(p, prepared.answer_key[p.seq], get(p), simulation, journal) for p in prepared.plan
    ]


def middle_loss(cases: dict[str, tuple[str, ...]], base: str = "correct") -> Spec:
    """High-similarity middle answered wrong (a near code) for the listed case × length keys.

    ``cases`` maps a case label to the similarities whose M is wrong, e.g.
    ``{"S1": ("high",)}``; keys may also be ``"S1/60"`` to pick one length.
    """

    def spec(p: PlanRow) -> str:
        for key, sims in cases.items():
            case, _, length = key.partition("/")
            same = p.case == case and (not length or int(length) == p.length)
            if same and p.condition == "M" and p.similarity in sims:
                return "error:near_distractor_code"
        return base

    return spec


def write_csv(path: str | Path, rows: list[dict[str, str]], columns=RESULT_COLUMNS) -> Path:
    """Write rows as a results.csv (UTF-8, LF, header row)."""
    p = Path(path)
    with p.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in columns})
    return p


def make_prepared(tmp_path_factory: Any) -> Prepared:
    """A freshly prepared reference-protocol folder (about 0.3 s)."""
    from needlepoint.design.prepared import load_prepared, prepare

    root = tmp_path_factory.mktemp("prepared") / "prepared"
    prepare(root)
    return load_prepared(root)


def make_input(
    prepared: Prepared,
    spec: Spec | dict[int, str] | None = None,
    simulation: bool = True,
    journal: str = JOURNAL,
) -> Any:
    """A validated AnalysisInput built from synthetic rows, without touching the disk."""
    from needlepoint.analysis.inputs import AnalysisInput, validate_rows

    rows = make_rows(prepared, spec, simulation, journal)
    outcomes, sim, jr = validate_rows(list(enumerate(rows, start=2)), prepared, "synthetic.csv")
    return AnalysisInput(prepared.protocol, prepared.fingerprint, outcomes, sim, jr, "synthetic")
