"""What a ``make mutate-constants`` run leaves: its report, a results file per module, the table.

A module's file, docs/mutation/constants/MODULE.json, is written when a run that was not
interrupted gave every constant mutant of the module a verdict, on one committed state of the
code and tests (the files that can change a verdict, as for the shards: everything but docs/,
tools/, tests/tools/ and the register), and the register holds for it. It records that commit,
the date, the module's source hash, the counts, and each rule constant measured by name and the
hash of its value (tools/mutation_keys.py) with its mutant count, every survivor and every
excused mutant with its reason. *killed* counts timed-out mutants too, as in the shard files:
mutants = killed + survived + excused. A module with no rule constant has no mutant and so no
file. The table in docs/mutation.md adds up, for each module of the core now, the constants
found there by name and hash, wherever they were measured, as the shard table does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from constant_mutants import ConstantMutant
from mutation_keys import constant_keys, core_constants
from mutation_records import (
    Recorded,
    Resolution,
    keep_aside,
    measured_in,
    prune,
    put_table,
    read_results,
    record_head,
    resolve,
    sum_label,
    write_json,
)
from mutation_shards import RESULTS as SHARDS

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
    keys = constant_keys(source.read_bytes())
    constants: dict[str, dict] = {}
    for v in verdicts:
        name = v.mutant.constant.removeprefix(module + ".")
        entry = constants.setdefault(
            name, {"sha256": keys[name], "mutants": 0, "survivors": [], "excused": []}
        )
        entry["mutants"] += 1
        if v in missed:
            entry["survivors"].append({"change": v.mutant.change, "status": v.status})
        elif v in excused:
            entry["excused"].append({"change": v.mutant.change, "reason": reasons[v.mutant]})
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
        "constants": dict(sorted(constants.items())),
    }


def check_constants(record: dict) -> str | None:
    """What is wrong with a constants file's counts: each must be the sum over its constants."""
    entries = record["constants"].values()
    mutants = sum(e["mutants"] for e in entries)
    excused = sum(len(e.get("excused", [])) for e in entries)
    survived = sum(len(e.get("survivors", [])) for e in entries)
    if any("reason" not in x for e in entries for x in e.get("excused", [])):
        return "an excused mutant without its reason"
    c = record["counts"]
    if (c["mutants"], c["excused"], c["survived"]) != (mutants, excused, survived):
        return "its counts are not the sum over its constants"
    if c["killed"] != mutants - excused - survived or c["timed_out"] > c["killed"]:
        return "its killed count is not its mutants less the others"
    if sum(record["verdicts"].values()) != mutants:
        return "its verdicts are not its mutants"
    return None


def read_records(root: Path) -> dict[Path, dict]:
    """The committed constants results files by path."""
    return read_results(root, RESULTS, FORMAT, "constants", check_constants)


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
    run: HEAD, and whether the files that can change a verdict were as committed). Then delete
    the constants files that no longer count anything."""
    if not (before[1] and after[1]):
        return ["no constants results files: uncommitted changes to code or tests"]
    if before[0] != after[0]:
        return ["no constants results files: a commit was made during the run"]
    reasons = {m: register.reason(m) for m in excused}
    order = {m: i for i, m in enumerate(mutants)}
    failing = {p.partition(":")[0].rpartition(".")[0] for p in problems}
    lines, wrote = [], False
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
        path = root / RESULTS / f"{module}.json"
        lines += keep_aside(root, path, set(record["constants"]), "constants")
        write_json(path, record)
        wrote = True
        c = record["counts"]
        lines.append(
            f"{name}: killed {c['killed']} of {c['mutants'] - c['excused']} constant mutants "
            f"({c['excused']} excused) -> {path.relative_to(root)}"
        )
    if wrote:
        lines += prune(root, resolution(root, files).unused)
    return lines


def _killed(r: Recorded) -> int:
    e = r.entry
    return e["mutants"] - len(e.get("excused", [])) - len(e.get("survivors", []))


def table(resolution: Resolution, modules: Sequence[str], none: Sequence[str]) -> str:
    """The markdown table of the constants measured, by module of the core now, their sum, and
    what the sum leaves out (``modules``: those with rule constants; ``none``: those without)."""
    head = "| Module | Commit | Date | Mutants | Excused | Killed (timed out) | Not killed |"
    rows, total = [head, "|" + "---|" * 7], Counter()
    rows_of = resolution.by_module()
    shown = resolution.attributed(list(modules))
    waiting = {c.module for c in resolution.changed + resolution.new}
    for m in modules:
        if m not in rows_of:
            continue
        counted = [r for _, r in rows_of[m]]
        own = [r for p, r in {r.path: r.record for r in counted}.items() if shown[p] == m]
        n = Counter(
            mutants=sum(r.entry["mutants"] for r in counted),
            excused=sum(len(r.entry.get("excused", [])) for r in counted),
            killed=sum(_killed(r) for r in counted),
            survived=sum(len(r.entry.get("survivors", [])) for r in counted),
            timed_out=sum(r["counts"]["timed_out"] for r in own),
        )
        commit, date = measured_in(counted)
        name = f"`{m.removeprefix('needlepoint.')}`" + (" (partial)" if m in waiting else "")
        rows.append(
            f"| {name} | {commit} | {date} | {n['mutants']} | {n['excused']} "
            f"| {n['killed']} ({n['timed_out']}) | {n['survived']} |"
        )
        total.update(n)
    complete = [m for m in modules if m not in waiting]
    label = sum_label(complete, modules, "modules")
    rows.append(
        f"| **{label}** | | | {total['mutants']} | {total['excused']} "
        f"| {total['killed']} ({total['timed_out']}) | {total['survived']} |"
    )
    left_out = resolution.left_out("constants")
    if none:
        short = ", ".join(m.removeprefix("needlepoint.") for m in none)
        left_out += ["", f"No rule constant, so nothing to measure: {short}."]
    return "\n".join(rows + left_out)


def resolution(root: Path, files: Mapping[str, Path]) -> Resolution:
    """The core's rule constants now, against the committed constants files."""
    return resolve(core_constants(files), read_records(root), "constants")


def summary(root: Path, files: Mapping[str, Path], write: bool) -> str:
    """The constants table; with ``write``, also put into docs/mutation.md between its markers.

    Written into the doc too: a reader of the table must see which rows no longer describe the
    code (a test then fails until `make mutate-summary` is run after a change to the core).
    """
    found = resolution(root, files)
    with_constants = {c.module for c in core_constants(files)}
    modules = [m for m in files if m in with_constants]
    text = table(found, modules, [m for m in files if m not in with_constants])
    if write:
        put_table(root, BEGIN, END, text, "the constants table")
    return text
