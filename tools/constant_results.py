"""What a ``make mutate-constants`` run leaves: its report, a results file per module, the table.

A module's file, docs/mutation/constants/MODULE.json, is written when a run that was not
interrupted gave every constant mutant of the module a verdict, on one committed state of the
code and tests (the files that can change a verdict, as for the shards: everything but docs/,
tools/, tests/tools/ and the register), and the register holds for it. It records that commit,
the date, the module's source hash, the counts, every survivor and every excused mutant with its
reason. *killed* counts timed-out mutants too, as in the shard files: mutants = killed +
survived + excused. A module with no rule constant has no mutant and so no file. The table in
docs/mutation.md adds the files up and names the modules it leaves out, as the shard table does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from constant_mutants import ConstantMutant, constant_mutants
from mutation_shards import RESULTS as SHARDS
from mutation_shards import (
    changed_since,
    put_table,
    read_results,
    record_head,
    sum_label,
    write_json,
)

RESULTS = SHARDS / "constants"
FORMAT = "needlepoint-mutation-constants"
BEGIN = (
    "<!-- constants table: written by tools/mutate.py --summary from docs/mutation/constants/; "
    "do not edit -->"
)
END = "<!-- end of the constants table -->"
KILLED = ("killed", "timed out")


def report(verdicts: Sequence, excused: set, problems: list[str], register: str) -> int:
    """Every constant with its count; survivors shown with the value they would have."""
    by_constant: dict[str, list] = {}
    for v in verdicts:
        by_constant.setdefault(v.mutant.constant, []).append(v)
    for constant, items in sorted(by_constant.items()):
        missed = [v for v in items if v.status not in KILLED and v.mutant not in excused]
        print(f"{constant}: {len(items)} mutants, {len(items) - len(missed)} killed or excused")
        for v in missed:
            print(f"    [{v.status}] {v.mutant.change}")
    for p in problems:
        print(f"Register ({register}): {p}")
    survivors = sum(v.status not in KILLED for v in verdicts) - len(excused)
    killed = len(verdicts) - survivors - len(excused)
    print(
        f"constants: killed {killed} of {len(verdicts) - len(excused)} constant mutants "
        f"({len(excused)} registered as equivalent)"
    )
    return 2 if problems else 1 if survivors else 0


def constants_record(
    module: str,
    source: Path,
    verdicts: Sequence,
    reasons: Mapping[ConstantMutant, str],
    commit: str,
) -> dict:
    """One module's constants results, as a JSON-ready dict (``verdicts`` in the mutants' order)."""
    excused = [v for v in verdicts if v.mutant in reasons]
    missed = [v for v in verdicts if v.status not in KILLED and v.mutant not in reasons]
    return {
        **record_head(FORMAT, module, source, commit),
        "verdicts": dict(sorted(Counter(v.status for v in verdicts).items())),
        "counts": {
            "mutants": len(verdicts),
            "killed": len(verdicts) - len(missed) - len(excused),
            "timed_out": sum(v.status == "timed out" for v in verdicts),
            "survived": len(missed),
            "excused": len(excused),
        },
        "survivors": [_named(v.mutant) | {"status": v.status} for v in missed],
        "excused": [_named(v.mutant) | {"reason": reasons[v.mutant]} for v in excused],
    }


def _named(m: ConstantMutant) -> dict:
    return {"constant": m.constant, "change": m.change}


def record_constants(
    root: Path,
    files: Mapping[str, Path],
    mutants: Sequence[ConstantMutant],
    verdicts: Sequence,
    register: object,
    excused: set,
    problems: Sequence[str],
    before: tuple[str, bool],
    after: tuple[str, bool],
) -> list[str]:
    """Write the file of every module whose mutants all have a verdict; one line each, or one
    line for the run when it did not measure one committed state (``before`` and ``after`` the
    run: HEAD, and whether the files that can change a verdict were as committed)."""
    if not (before[1] and after[1]):
        return ["no constants results files: uncommitted changes to code or tests"]
    if before[0] != after[0]:
        return ["no constants results files: a commit was made during the run"]
    entries = {(e.constant, e.change): e.reason for e in register.entries}
    reasons = {m: entries[m.constant, m.change] for m in excused}
    order = {m: i for i, m in enumerate(mutants)}
    failing = {p.partition(":")[0].rpartition(".")[0] for p in problems}
    lines = []
    for module in [m for m in files if any(x.module == m for x in mutants)]:
        mine = sorted(
            (v for v in verdicts if v.mutant.module == module), key=lambda v: order[v.mutant]
        )
        name = module.removeprefix("needlepoint.")
        if Counter(v.mutant for v in mine) != Counter(m for m in mutants if m.module == module):
            lines.append(f"{name}: no constants file (not every mutant has a verdict in this run)")
            continue
        if module in failing:
            lines.append(f"{name}: no constants file (the register fails)")
            continue
        record = constants_record(module, files[module], mine, reasons, before[0])
        path = write_json(root / RESULTS / f"{module}.json", record)
        c = record["counts"]
        lines.append(
            f"{name}: killed {c['killed']} of {c['mutants'] - c['excused']} constant mutants "
            f"({c['excused']} excused) -> {path.relative_to(root)}"
        )
    return lines


def table(records: Mapping[str, dict], modules: Sequence[str], none: Sequence[str]) -> str:
    """The markdown table of the constants files, their sum, and what the sum leaves out
    (``modules``: those with rule constants; ``none``: those without, so without a file)."""
    head = "| Module | Commit | Date | Mutants | Excused | Killed (timed out) | Not killed |"
    rows, total = [head, "|" + "---|" * 7], Counter()
    for m in modules:
        if m not in records:
            continue
        r, c = records[m], records[m]["counts"]
        rows.append(
            f"| `{m.removeprefix('needlepoint.')}` | `{r['commit'][:10]}` | {r['measured'][:10]} "
            f"| {c['mutants']} | {c['excused']} | {c['killed']} ({c['timed_out']}) "
            f"| {c['survived']} |"
        )
        total.update(c)
    label, left_out = sum_label(records, modules, "modules")
    rows.append(
        f"| **{label}** | | | {total['mutants']} | {total['excused']} "
        f"| {total['killed']} ({total['timed_out']}) | {total['survived']} |"
    )
    if none:
        short = ", ".join(m.removeprefix("needlepoint.") for m in none)
        left_out += ["", f"No rule constant, so nothing to measure: {short}."]
    return "\n".join(rows + left_out)


def summary(root: Path, files: Mapping[str, Path], write: bool) -> str:
    """The constants table; with ``write``, also put into docs/mutation.md between its markers."""
    records = read_results(root, RESULTS, FORMAT, list(files), "a constants results file")
    modules = [m for m, p in files.items() if m in records or constant_mutants(p, m)]
    text = table(records, modules, [m for m in files if m not in modules])
    # Written into the doc too: a reader of the table must see which rows no longer describe
    # the code (a test then fails until `make mutate-summary` is run after a core change).
    if stale := changed_since(root, records):
        text += "\n\nChanged since measured (run their constants again): " + ", ".join(stale)
    if write:
        put_table(root, BEGIN, END, text, "the constants table")
    return text
