"""Verify a prepared folder: regenerate it from its own ``protocol.json`` and compare every byte;
then ``dry-run``'s plan and budget, which only a verified folder gets.

A difference is named by file, seq and field. A changed generating source is only a warning:
what matters is whether the materials regenerate identically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.design.generate import generate
from needlepoint.design.prepared import (
    MANIFEST_FORMAT,
    Prepared,
    load_prepared,
    load_protocol_file,
    prepared_root,
    source_fingerprints,
)
from needlepoint.design.profiles import body_profile, budget_field, text_chars
from needlepoint.design.protocol import design_fingerprint
from needlepoint.design.schema import DATA_FILES, PLAN_COLUMNS
from needlepoint.jsonio import read_json, sha256_hex
from needlepoint.safeio import read_limited


@dataclass
class VerifyReport:
    """What verify found: problems fail it, warnings do not."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_compared: int = 0
    bytes_compared: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _first_difference(a: Any, b: Any, where: str) -> str:
    """Dotted path of the first field where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}".lstrip(".")
            if a[key] != b[key]:
                return _first_difference(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
        return f"{where} (length {len(a)} vs {len(b)})"
    elif isinstance(a, str) and isinstance(b, str) and "\n" in a + b:
        la, lb = a.split("\n"), b.split("\n")
        line = next((i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y), None)
        line = min(len(la), len(lb)) if line is None else line
        return f"{where} line {line + 1}"
    return where.lstrip(".") or "value"


def _describe_file_difference(name: str, expected: bytes, actual: bytes) -> list[str]:
    exp_lines, act_lines = expected.split(b"\n"), actual.split(b"\n")
    out = []
    for i, (e, a) in enumerate(zip(exp_lines, act_lines, strict=False)):
        if e == a:
            continue
        if name.endswith(".jsonl"):
            try:
                ev, av = json.loads(e), json.loads(a)
            except (ValueError, RecursionError):
                out.append(f"{name} line {i + 1}: not the expected JSON line")
            else:
                seq = ev.get("seq") if isinstance(ev, dict) else None
                out.append(f"{name} seq {seq}: {_first_difference(ev, av, '')} differs")
        elif name == "plan.csv":
            header = PLAN_COLUMNS
            ev, av = e.decode(errors="replace").split(","), a.decode(errors="replace").split(",")
            col = next((c for c, x, y in zip(header, ev, av, strict=False) if x != y), "row")
            out.append(f"plan.csv seq {ev[0]}: {col} differs")
        else:
            out.append(f"{name} line {i + 1} differs")
        if len(out) >= 5:
            break
    if not out:
        out.append(f"{name}: {len(act_lines) - 1} lines where {len(exp_lines) - 1} expected")
    return out


def verify_prepared(path: str | Path) -> VerifyReport:
    """Regenerate the set from protocol.json and compare every byte with the folder."""
    root = prepared_root(path)
    report = VerifyReport()
    protocol = load_protocol_file(root)
    files = generate(protocol)
    for name in DATA_FILES:
        target = root / name
        if not target.is_file():
            report.problems.append(f"{name}: missing")
            continue
        # A file far larger than the regenerated one is not read: it cannot be it.
        limit = 2 * len(files[name]) + (1 << 20)
        size = target.stat().st_size
        if size > limit:
            report.problems.append(f"{name}: {size} bytes, regenerated {len(files[name])}")
            continue
        actual = read_limited(target, limit)
        report.files_compared += 1
        report.bytes_compared += len(actual)
        if actual != files[name]:
            report.problems += _describe_file_difference(name, files[name], actual)
    _check_manifest(root, files, report)
    _check_design_fingerprint(root, protocol, report)
    return report


def _check_design_fingerprint(root: Path, protocol: dict[str, Any], report: VerifyReport) -> None:
    """The manifest's design fingerprint must be the one protocol.json's design fields give."""
    manifest = read_json(root / "manifest.json") if (root / "manifest.json").is_file() else None
    if not isinstance(manifest, dict):
        return
    recorded = manifest.get("design_fingerprint")
    if recorded is None:
        report.warnings.append(
            "manifest.json has no design_fingerprint (prepared before it existed); "
            f"the design fingerprint of protocol.json is {design_fingerprint(protocol)}"
        )
    elif recorded != design_fingerprint(protocol):
        report.problems.append(
            "manifest.json: design_fingerprint is not the SHA-256 of protocol.json's design fields"
        )


def _check_manifest(root: Path, files: dict[str, bytes], report: VerifyReport) -> None:
    if not (root / "manifest.json").is_file():
        report.problems.append("manifest.json: missing")
        return
    manifest = read_json(root / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        report.problems.append("manifest.json: unsupported format")
        return
    recorded = manifest.get("files")
    if not isinstance(recorded, dict):
        report.problems.append("manifest.json: field files: expected an object")
        return
    for name in DATA_FILES:
        if recorded.get(name) != sha256_hex(files[name]):
            report.problems.append(f"manifest.json: hash of {name} does not match")
    _compare_sources(manifest.get("sources"), report)
    if manifest.get("package_version") != needlepoint.__version__:
        report.warnings.append(
            f"prepared with needlepoint {manifest.get('package_version')}, "
            f"now {needlepoint.__version__}"
        )


def _compare_sources(recorded: Any, report: VerifyReport) -> None:
    """Warn about changed generating sources; the materials' bytes are what verify proves.

    A folder prepared under an earlier module layout (before the stage packages, sources such
    as ``needlepoint/freeze.py``) names modules that no longer exist: its sources cannot be
    compared file by file, so verify says so once instead of calling every module changed.
    """
    still = " (materials still identical)" if not report.problems else ""
    current = source_fingerprints()
    recorded = recorded if isinstance(recorded, dict) else {}
    if not recorded or set(recorded) - set(current):
        names = ", ".join(sorted(recorded)) or "none"
        report.warnings.append(
            f"manifest.json records generating sources of another module layout ({names}); "
            f"they are not compared file by file{still}"
        )
        return
    added = sorted(set(current) - set(recorded))
    if added:  # modules split out since: nothing recorded to compare them with
        report.warnings.append(
            f"source {', '.join(added)} did not exist at preparation; not compared{still}"
        )
    for module, digest in sorted(recorded.items()):
        if current[module] != digest:
            report.warnings.append(f"source {module} changed since preparation{still}")


# --- dry-run: the plan and its budget, from the folder alone, no network -----------------------


def dry_run(path: str | Path, plan: bool = False) -> tuple[bool, list[str]]:
    """``needlepoint dry-run``: verify first, then the budget (and with ``plan`` every row).

    A budget computed from materials that are not the protocol's would price the wrong run, so
    a folder that fails verify gets the reasons instead of a plan (and the command exits 1).
    """
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
