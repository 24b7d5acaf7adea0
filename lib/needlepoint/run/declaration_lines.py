"""A declaration chain as a reader sees it: each declaration with its time, and a flag on an
amendment made after outcomes it governs.

An amendment governs what the declarations before it governed. Its record lists the journals on
record when it was written and the declaration each was run under; a journal with outcomes under
an earlier declaration of the chain is a result the amender could have seen.
"""

from __future__ import annotations

import os
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.run.declaration import Declared, JournalHead, chain
from needlepoint.run.records import DeclarationRef


def flagged(entries: list[Declared]) -> dict[str, list[JournalHead]]:
    """Amendments made after outcomes they govern: SHA-256 -> the journals that had outcomes.

    ``entries`` is a chain, oldest first; an amendment governs what the declarations before it
    governed, so an outcome recorded under one of them is an outcome the amender could see.
    """
    out: dict[str, list[JournalHead]] = {}
    for i, entry in enumerate(entries):
        if entry.record.amends is None:
            continue
        governed = entry.record.outcomes_governed({e.sha256 for e in entries[:i]})
        if governed:
            out[entry.sha256] = governed
    return out


def _shown(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()
    except ValueError:  # another drive: no relative path exists
        return path.name


def chain_lines(entries: list[Declared], base: Path, cited: str | None = None) -> list[str]:
    """The chain as Markdown list items, oldest first, each with its time and what it cites.

    Paths are shown relative to ``base`` (a run or an output folder), so the lines carry no
    machine path; ``cited`` marks the declaration a run was started under.
    """
    flags = flagged(entries)
    lines = []
    for entry in entries:
        r = entry.record
        what = "amendment" if r.amends else "declaration"
        clock = " (simulated clock: the time proves nothing)" if r.simulation else ""
        outcomes = sum(h.outcomes for h in r.heads)
        line = (
            f"- {what} `{_shown(entry.path, base)}` (sha256 `{entry.sha256[:12]}…`), made "
            f"{r.time}{clock}: plan `{r.plan.file}` (sha256 `{r.plan.sha256[:12]}…`); on record "
            f"then: {len(r.heads)} journal(s) with {outcomes} outcome(s), "
            f"{len(r.analyses)} analysis(es)"
        )
        if r.amends:
            line += f"; amends `{r.amends.sha256[:12]}…` (made {r.amends.time})"
        if entry.sha256 in flags:
            seen = ", ".join(f"`{h.path}` {h.outcomes}" for h in flags[entry.sha256])
            line += (
                "; **FLAG: made after outcomes it governs** (outcomes under the declaration it "
                f"amends: {seen})"
            )
        if entry.sha256 == cited:
            line += "; **the run was started under this one**"
        lines.append(line)
    return lines


def run_declaration(run_dir: Path) -> DeclarationRef | None:
    """run.json's declaration reference, read leniently (the audit is where it is checked)."""
    from needlepoint.jsonio import read_json

    value = read_json(Path(run_dir) / "run.json")
    ref = value.get("declaration") if isinstance(value, dict) else None
    if not isinstance(ref, dict):
        return None
    path, sha = ref.get("path"), ref.get("sha256")
    if not isinstance(path, str) or not isinstance(sha, str):
        return None
    return DeclarationRef(path, sha)


def run_chain_lines(
    run_dir: Path, base: Path, later: list[Declared] | None = None, shown: str | None = None
) -> list[str]:
    """A run's declaration chain as Markdown lines (none when it was started without one).

    ``later`` adds amendments found elsewhere (the study record searches the evidence root for
    them); the run's own chain is followed back from the file run.json names, whose SHA-256 must
    still be the one recorded.
    """
    ref = run_declaration(run_dir)
    name = shown or Path(run_dir).name
    if ref is None:
        return [f"`{name}` was started without a declaration."]
    head = f"Declaration chain of `{name}` (oldest first):"
    path = Path(run_dir) / ref.path
    try:
        entries = chain(path)
    except NeedlepointError as exc:
        return [head, f"- `{ref.path}` (sha256 `{ref.sha256[:12]}…`): cannot be read: {exc}"]
    if entries[-1].sha256 != ref.sha256:
        return [
            head,
            f"- `{_shown(path, base)}`: **PROBLEM**: SHA-256 `{entries[-1].sha256[:12]}…` "
            f"differs from the `{ref.sha256[:12]}…` the run recorded (changed since)",
        ]
    known = {e.sha256 for e in entries}
    entries += [e for e in later or [] if e.sha256 not in known]
    return [head, *chain_lines(entries, base, cited=ref.sha256)]
