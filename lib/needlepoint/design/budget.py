"""``needlepoint dry-run``: the plan and its budget, from the prepared folder alone, no network."""

from __future__ import annotations

import json
from pathlib import Path

from needlepoint.design.prepared import Prepared, load_prepared
from needlepoint.design.profiles import budget_field, text_chars


def dry_run(path: str | Path, plan: bool = False) -> tuple[bool, list[str]]:
    """``needlepoint dry-run``: verify first, then the budget (and with ``plan`` every row).

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
    if plan:
        return True, [*budget_lines(path), "", *plan_lines(path)]
    n = len(load_prepared(path).plan)
    return True, [*budget_lines(path), f"plan: {n} rows in plan.csv (--plan lists them here)"]


def _chars(prepared: Prepared, seq: int) -> int:
    return text_chars(json.loads(prepared.bodies[seq]))


def plan_lines(path: str | Path) -> list[str]:
    """The plan, one row per request in execution order, with its characters sent."""
    prepared = load_prepared(path)
    lines = ["seq  block pair case length sim  cond order    chars"]
    for row in prepared.plan:
        lines.append(
            f"{row.seq:<4} {row.block:<5} {row.pair:<4} {row.case:<4} {row.length:<6} "
            f"{row.similarity:<4} {row.condition:<4} {row.order:<8} {_chars(prepared, row.seq)}"
        )
    return lines


def budget_lines(path: str | Path) -> list[str]:
    """The budget, computed from the folder alone with no network."""
    prepared = load_prepared(path)
    total_chars = sum(_chars(prepared, r.seq) for r in prepared.plan)
    total_bytes = sum(len(prepared.bodies[r.seq]) for r in prepared.plan)
    body = json.loads(prepared.bodies[prepared.plan[0].seq]) if prepared.plan else {}
    gap = prepared.protocol["runner"]["min_gap_s"]
    budget = budget_field(prepared.protocol)
    n = len(prepared.plan)
    return [
        f"requests: {n} ({len({r.block for r in prepared.plan})} blocks, "
        f"{len({r.pair for r in prepared.plan})} pairs)",
        f"characters sent ({'prompt' if 'prompt' in body else 'message content'}): {total_chars}",
        f"request bytes sent: {total_bytes}",
        f"{budget} per request: {prepared.protocol[budget]} "
        f"(at most {n * prepared.protocol[budget]} completion tokens)",
        f"minimum spacing: {gap} s after each completion, so at least {(n - 1) * gap} s of waiting",
        "network: none (dry run)",
    ]


def prepared_lines(path: str | Path, shown: str) -> list[str]:
    """What `prepare` made: requests, lengths in records and characters, fingerprints, next.

    ``shown`` is the folder as the user named it, for the commands to copy.
    """
    from needlepoint.design.identity import design_fingerprint
    from needlepoint.design.profiles import body_profile

    p = load_prepared(path)
    proto = p.protocol
    chars: dict[int, set[int]] = {}
    for r in p.plan:
        chars.setdefault(r.length, set()).add(_chars(p, r.seq))
    sizes = ", ".join(
        f"{n} records = {min(c):,}" + (f"-{max(c):,}" if len(c) > 1 else "") + " characters"
        for n, c in sorted(chars.items())
    )
    n, model = len(p.plan), proto.get("model")
    run = f"needlepoint run {shown} --allow {n} --run-dir run"
    return [
        f"prepared {shown}: {n} requests of {proto.get('protocol_id')} v{proto.get('version')} "
        f"for {model} (body profile {body_profile(proto)})",
        f"  {len({r.case for r in p.plan})} cases x lengths {', '.join(map(str, sorted(chars)))} "
        f"records x similarity {'/'.join(proto.get('similarities', []))} x conditions "
        f"{', '.join(proto.get('conditions', []))}; {len({r.block for r in p.plan})} blocks, "
        f"{len({r.pair for r in p.plan})} pairs",
        f"  request length: {sizes}",
        f"  protocol fingerprint {p.fingerprint}",
        f"  design fingerprint   {design_fingerprint(proto)}",
        "next:",
        f"  needlepoint dry-run {shown}                       # the budget",
        f"  {run} --simulate position     # offline: a simulation",
        f"  needlepoint check-endpoint {shown} --base-url URL --api-key-env VAR   # live: first",
        f"  {run} --base-url URL --model {model} --api-key-env VAR",
    ]
