"""``needlepoint dry-run``: the plan and its budget, from the prepared folder alone, no network."""

from __future__ import annotations

import json
from pathlib import Path

from needlepoint.design.prepared import load_prepared
from needlepoint.design.profiles import budget_field, text_chars


def dry_run(path: str | Path) -> tuple[bool, list[str]]:
    """``needlepoint dry-run``: verify first, then the plan and budget.

    A budget computed from materials that are not the protocol's would price the wrong run, so
    a folder that fails verify gets the reasons instead of a plan (and the command exits 1).
    """
    from needlepoint.design.verify import verify_prepared

    report = verify_prepared(path)
    if not report.ok:
        lines = [f"MISMATCH {problem}" for problem in report.problems]
        lines.append(
            f"dry-run FAILED: {path} fails verify ({len(report.problems)} problems), so its "
            "plan and budget are not the protocol's; prepare a fresh folder"
        )
        return False, lines
    return True, dry_run_lines(path)


def dry_run_lines(path: str | Path) -> list[str]:
    """The plan and a budget summary, computed from the folder alone with no network."""
    prepared = load_prepared(path)
    lines = ["seq  block pair case length sim  cond order    chars"]
    total_chars = total_bytes = 0
    for row in prepared.plan:
        body = json.loads(prepared.bodies[row.seq])
        chars = text_chars(body)
        total_chars += chars
        total_bytes += len(prepared.bodies[row.seq])
        lines.append(
            f"{row.seq:<4} {row.block:<5} {row.pair:<4} {row.case:<4} {row.length:<6} "
            f"{row.similarity:<4} {row.condition:<4} {row.order:<8} {chars}"
        )
    gap = prepared.protocol["runner"]["min_gap_s"]
    budget = budget_field(prepared.protocol)
    n = len(prepared.plan)
    lines += [
        "",
        f"requests: {n} ({len({r.block for r in prepared.plan})} blocks, "
        f"{len({r.pair for r in prepared.plan})} pairs)",
        f"characters sent ({'prompt' if 'prompt' in body else 'message content'}): {total_chars}",
        f"request bytes sent: {total_bytes}",
        f"{budget} per request: {prepared.protocol[budget]} "
        f"(at most {n * prepared.protocol[budget]} completion tokens)",
        f"minimum spacing: {gap} s after each completion, so at least {(n - 1) * gap} s of waiting",
        "network: none (dry run)",
    ]
    return lines
