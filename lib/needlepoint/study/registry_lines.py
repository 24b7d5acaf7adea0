"""The registry as text: designs, their model variants and runs, agreements, the rest.

Every line depends only on the files (and, with ``--history``, the git history): no times of
the listing itself and no absolute paths, so two listings of one record are the same text.
"""

from __future__ import annotations

from needlepoint.study.registry import Registry, agreements
from needlepoint.study.runs import RunEntry


def run_line(r: RunEntry, where: str = "") -> str:
    """One run: path, version, completeness, decision, audit and declaration."""
    kind = "pilot" if r.pilot else "run"
    sim = " (SIMULATION)" if r.simulation else ""
    if r.source:
        sim += f" (executed by {r.source}, imported)"
    if r.problem:
        return f"{kind} {where}{r.path}: unreadable: {r.problem}"
    cases = ""
    if r.complete_cases is not None:
        cases = f", {r.complete_cases} of {r.planned_cases} cases complete"
    return (
        f"{kind} {where}{r.path}{sim}: v{r.version}, {r.attempted} of {r.planned} attempted"
        f"{cases}; {r.verdict()}; audit {r.audit}; declaration: {r.declaration}"
    )


def registry_lines(reg: Registry) -> list[str]:
    """The whole listing, grouped by design fingerprint, then model variant."""
    out = [
        f"registry of {reg.root.as_posix()}: {reg.found.counts()}",
        "(each decision re-derived from its journal as `analyze` gives it; nothing is written)",
    ]
    if reg.history_note:
        out.append(reg.history_note)
    for design in reg.designs():
        runs = [r for r in reg.runs if r.design_fingerprint == design]
        old = [r for r in reg.history if r.design_fingerprint == design]
        items = [i for i in reg.items if i.design_fingerprint == design]
        title = f"design {design[:12]}…" if design else "design unknown (unreadable folders)"
        title += _versions([*runs, *old])
        out += ["", title]
        for variant in sorted({r.variant for r in [*runs, *old] if not r.problem}):
            group = [r for r in runs if r.variant == variant and not r.problem]
            group_old = [r for r in old if r.variant == variant and not r.problem]
            out.append(f"  {variant}")
            out += [f"    {run_line(r)}" for r in group]
            out += [f"    {run_line(r, 'IN HISTORY ONLY ')}" for r in group_old]
            for a, b, line in agreements([*group, *group_old]):
                out.append(f"    same request bytes, {a.path} and {b.path}: {line}")
        out += [f"  {run_line(r)}" for r in [*runs, *old] if r.problem]
        out += [f"  {i.kind} {i.path}: {i.text}" for i in items]
    if reg.found.declarations:
        out += ["", "declarations"]
        out += [f"  {line}" for line in declaration_lines(reg)]
    return out


def _versions(runs: list[RunEntry]) -> str:
    """`` (context-position-similar v4, v5; pilots v2)``: the versions run, pilots apart."""
    ids = sorted({r.protocol_id for r in runs if r.protocol_id})
    if not ids:
        return ""
    main = sorted({r.version for r in runs if r.version is not None and not r.pilot})
    pilots = sorted({r.version for r in runs if r.version is not None and r.pilot})
    text = f" ({', '.join(ids)}"
    text += f" {', '.join(f'v{v}' for v in main)}" if main else ""
    text += f"; pilots {', '.join(f'v{v}' for v in pilots)}" if pilots else ""
    return text + ")"


def declaration_lines(reg: Registry) -> list[str]:
    """Each declaration with its time, what it amends, flags, and the runs started under it."""
    from needlepoint.errors import NeedlepointError
    from needlepoint.run.declaration import chain, flagged

    out = []
    for rel in reg.found.declarations:
        try:
            entries = chain(reg.root / rel)
        except NeedlepointError as exc:
            out.append(f"{rel}: unreadable: {exc}")
            continue
        last = entries[-1]
        r = last.record
        cited = [x.path for x in reg.runs if x.declaration_sha256 == last.sha256]
        line = f"{rel} (sha256 {last.sha256[:12]}…): made {r.time}"
        if r.simulation:
            line += " (simulated clock)"
        if r.amends:
            line += f", amends {r.amends.sha256[:12]}…"
        governed = flagged(entries).get(last.sha256)
        if governed:
            seen = ", ".join(f"{h.path} {h.outcomes}" for h in governed)
            line += f"; FLAG: made after outcomes it governs ({seen})"
        line += f"; runs started under it: {', '.join(cited) if cited else 'none'}"
        out.append(line)
    return out
