"""`needlepoint registry`: every prepared folder, run, pilot, calibration, analysis, comparison
and declaration under an evidence root, grouped by design fingerprint, then model variant.

Each run shows its decision (re-derived from its journal, exactly as `analyze` gives it), its
completeness, its audit and its declaration. Runs that sent the same request bytes are compared
request by request, so two runs of one design can never stand side by side unremarked.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.run.folder import read_run_record
from needlepoint.study.runs import RunEntry, pilot_design_of, read_entry
from needlepoint.study.scan import Found, lenient_field, lenient_json, scan


@dataclass(frozen=True)
class Item:
    """Anything else on the record, under the design it belongs to: an analysis, a comparison,
    a calibration record or a prepared folder no run used."""

    kind: str
    path: str
    design_fingerprint: str
    text: str


@dataclass
class Registry:
    """What `registry` found: runs, the other items, and runs found only in git history."""

    root: Path
    found: Found
    runs: list[RunEntry]
    items: list[Item]
    history: list[RunEntry] = field(default_factory=list)
    history_note: str = ""

    def designs(self) -> list[str]:
        """Every design fingerprint on the record, sorted (unreadable entries last)."""
        keys = {r.design_fingerprint for r in [*self.runs, *self.history]}
        keys |= {i.design_fingerprint for i in self.items}
        return sorted(keys, key=lambda k: (k == "", k))


def collect(root: str | Path, history: bool = False) -> Registry:
    """Read everything under ``root`` (one line per unreadable folder, never a failure); with
    ``history``, also the runs that git history holds and the tree no longer does."""
    base = Path(root)
    found = scan(base)
    pilot_designs = {p: pilot_design_of(base / p) for p in found.pilots}
    runs = []
    for rel in found.runs:
        design = pilot_designs.get(Path(rel).parent.as_posix())
        runs.append(read_entry(base / rel, rel, pilot_design=design, root=base))
    used = {_prepared_of(base / r.path) for r in runs}
    items = [*_analyses(base, found), *_comparisons(base, found), *_calibrations(base, found)]
    items += _unrun(base, found, used)
    reg = Registry(base, found, runs, items)
    if history:
        from needlepoint.study.history import history_runs

        reg.history, reg.history_note = history_runs(base, {r.journal_sha256 for r in runs})
    return reg


def _prepared_of(run_dir: Path) -> Path | None:
    try:
        return (run_dir / read_run_record(run_dir).prepared_dir).resolve()
    except (NeedlepointError, OSError, KeyError, TypeError, ValueError):
        return None


def _analyses(base: Path, found: Found) -> list[Item]:
    out = []
    for rel in found.analyses:
        doc = lenient_json(base / rel / "analysis.json")
        design = lenient_field(doc, "protocol", "design_fingerprint")
        decision = lenient_field(doc, "primary", "decision")
        journal = lenient_field(doc, "run", "journal_sha256")
        robust = lenient_field(doc, "robustness", "verdict")
        text = f"{decision} (journal {str(journal)[:12]}…)" if decision else "unreadable"
        if decision and decision != "not evaluable" and isinstance(robust, str):
            text += f"; {robust[:400]}"
        out.append(Item("analysis", rel, design if isinstance(design, str) else "", text))
    return out


def _comparisons(base: Path, found: Found) -> list[Item]:
    out = []
    for rel in found.comparisons:
        doc = lenient_json(base / rel / "comparison.json")
        runs = lenient_field(doc, "runs")
        design = lenient_field(doc, "design_fingerprint")
        n = len(runs) if isinstance(runs, list) else 0
        decisions = "; ".join(_with_robustness(r) for r in runs or [] if isinstance(r, dict))
        out.append(
            Item(
                "comparison",
                rel,
                design if isinstance(design, str) else "",
                f"{n} runs: {decisions}",
            )
        )
    return out


def _with_robustness(run: dict) -> str:
    """A compared run's decision, and its robustness word with reasons where it has one."""
    decision = str(lenient_field(run, "decision"))
    robust = lenient_field(run, "robustness")
    if decision == "not evaluable" or not isinstance(robust, str):
        return decision
    return f"{decision} ({robust[:400]})"


def _calibrations(base: Path, found: Found) -> list[Item]:
    out = []
    for rel in found.calibrations:
        doc = lenient_json(base / rel)
        design = lenient_field(doc, "design", "design_fingerprint")
        verdict, version = lenient_field(doc, "verdict"), lenient_field(doc, "protocol_version")
        cases = lenient_field(doc, "recommended_cases")
        text = f"{verdict}" + (f": v{version}, {cases} cases" if version is not None else "")
        out.append(Item("calibration", rel, design if isinstance(design, str) else "", text))
    return out


def _unrun(base: Path, found: Found, used: set[Path | None]) -> list[Item]:
    from needlepoint.design.protocol import design_fingerprint

    out = []
    for rel in found.prepared:
        if (base / rel).resolve() in used:
            continue
        protocol = lenient_json(base / rel / "protocol.json")
        try:
            design = design_fingerprint(protocol)
        except (KeyError, TypeError, ValueError):
            design = ""
        version = lenient_field(protocol, "version")
        out.append(Item("prepared", rel, design, f"v{version}, no run"))
    return out


REPRODUCTION = (
    "reproduction (byte-identical requests to the same model and server: a determinism check, "
    "not a replication)"
)
REPLICATION = "replication on the same materials (another server or model)"


def kind_of(a: RunEntry, b: RunEntry) -> str:
    """A reproduction repeats byte-identical requests on the same model and server: it checks
    determinism and says nothing new about the model. A replication needs fresh materials or
    another model or server; two runs of the same bytes elsewhere are one on the same materials.
    """
    same = a.model == b.model and a.server == b.server and a.server != ""
    return REPRODUCTION if same else REPLICATION


def agreement(a: RunEntry, b: RunEntry) -> str | None:
    """Request-by-request agreement of two runs that sent some of the same request bytes,
    labelled a reproduction or a replication (``kind_of``)."""
    if a.problem or b.problem or not a.requests & b.requests:
        return None
    shared = sorted(k for k in a.requests & b.requests if k in a.answers and k in b.answers)
    same = sum(a.answers[k] == b.answers[k] for k in shared)
    line = f"{kind_of(a, b)}: {same} of {len(shared)} shared outcomes identical"
    if not (a.pilot or b.pilot):
        agree = a.decision == b.decision
        line += f"; decisions {'agree' if agree else 'differ'} ({a.decision}; {b.decision})"
    return line


def agreements(runs: list[RunEntry]) -> list[tuple[RunEntry, RunEntry, str]]:
    """Every pair of runs (in listing order) that sent some of the same request bytes."""
    out = []
    for a, b in itertools.combinations(runs, 2):
        line = agreement(a, b)
        if line is not None:
            out.append((a, b, line))
    return out
