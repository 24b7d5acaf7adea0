"""One results file per measured shard (a core module), and the table in docs/mutation.md.

A shard's file is written only when every mutant of the module has a verdict measured on one
committed state of the code and tests, and the register holds for it: it records that commit,
the date, the mutmut version, the verdict counts and time of the whole run of the module, and
each function it measured by name and source hash (tools/mutation_keys.py) with its mutant
count, every survivor and every excused mutant with its reason. The table adds up, for each
module of the core now, the functions found there by name and hash (tools/mutation_records.py),
wherever they were measured; it never presents a sum as complete unless every function of the
core counts, and it names each one that needs measuring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from mutation_keys import Current, core_functions, function_keys
from mutation_records import (
    DOC,
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
from mutation_report import KILLED, Outcome, Result, counts_line, score

RESULTS = Path("docs") / "mutation"
FORMAT = "needlepoint-mutation-shard"
BEGIN = (
    "<!-- shard table: written by tools/mutate.py --summary from docs/mutation/; do not edit -->"
)
END = "<!-- end of the shard table -->"


def shard_record(
    module: str,
    source: Path,
    outcomes: Sequence[Outcome],
    result: Result,
    commit: str,
    seconds: float,
) -> dict:
    """Everything a reader needs to trust one shard's score, as a JSON-ready dict."""
    import mutmut

    version = getattr(mutmut, "__version__", None) or _dist_version("mutmut")
    keys = function_keys(source.read_text("utf-8"))
    functions: dict[str, dict] = {}
    for o in outcomes:
        name = o.function.removeprefix(module + ".")
        entry = functions.setdefault(name, {"sha256": keys[name], "mutants": 0})
        entry["mutants"] += 1
        entry.setdefault("survivors", [])
        entry.setdefault("excused", [])
    for items in result.survivors.values():
        for o in items:
            functions[o.function.removeprefix(module + ".")]["survivors"].append(_mutant(o))
    for o, e in sorted(result.equivalent, key=_order):
        excused = _mutant(o) | {"reason": e.reason}
        functions[o.function.removeprefix(module + ".")]["excused"].append(excused)
    return {
        **record_head(FORMAT, module, source, commit),
        "mutmut": version,
        "mutants": len(outcomes),
        "verdicts": dict(sorted(Counter(o.status for o in outcomes).items())),
        "equivalent": len(result.equivalent),
        "counted": result.counted,
        "killed": result.killed,
        "timed_out": result.by_status.get("timeout", 0),
        "mutant_seconds": round(seconds, 1),
        "functions": dict(sorted(functions.items())),
        "counts": counts_line(result, "tests/mutation_equivalents.toml"),
    }


def _order(pair: tuple[Outcome, object]) -> tuple[str, int]:
    return pair[0].function, pair[0].number


def _mutant(o: Outcome) -> dict:
    return {"number": o.number, "status": o.status, "before": o.before, "after": o.after}


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def check_shard(record: dict) -> str | None:
    """What is wrong with a shard file's totals: each must be the sum over its functions."""
    functions = record["functions"].values()
    mutants = sum(f["mutants"] for f in functions)
    excused = sum(len(f.get("excused", [])) for f in functions)
    survivors = sum(len(f.get("survivors", [])) for f in functions)
    for f in functions:
        if any("reason" not in e for e in f.get("excused", [])):
            return "an excused mutant without its reason"
    totals = (record["mutants"], record["equivalent"], record["counted"], record["killed"])
    if totals != (mutants, excused, mutants - excused, mutants - excused - survivors):
        return "its totals are not the sum over its functions"
    if sum(record["verdicts"].values()) != mutants or record["timed_out"] > record["killed"]:
        return "its verdicts are not its mutants"
    return None


def read_records(root: Path) -> dict[Path, dict]:
    """The committed shard results files by path."""
    return read_results(root, RESULTS, FORMAT, "functions", check_shard)


def killed(r: Recorded) -> int:
    return r.entry["mutants"] - len(r.entry.get("excused", [])) - len(r.entry.get("survivors", []))


def _pct(killed: int, counted: int) -> str:
    return f"{100 * killed / counted:.1f}%" if counted else "-"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def table(resolution: Resolution, modules: Sequence[str]) -> str:
    """The markdown table of the core's modules, their sum, and what the sum leaves out.

    A row counts the functions found in that module now, wherever they were measured. The time
    and timeouts of a measurement are recorded for it as a whole, so they are shown in the row
    holding most of its counted mutants.
    """
    head = (
        "| Module | Commit | Date | Mutants | Equivalent | Killed (timed out) "
        "| Not killed | Score | Mutant time |"
    )
    rows = [head, "|" + "---|" * 9]
    rows_of = resolution.by_module()
    shown = resolution.attributed(list(modules))
    waiting = {c.module for c in resolution.changed + resolution.new}
    total = Counter()
    for m in modules:
        if m not in rows_of:
            continue
        counted = [r for _, r in rows_of[m]]
        own = [r for p, r in {r.path: r.record for r in counted}.items() if shown[p] == m]
        n = Counter(
            mutants=sum(r.entry["mutants"] for r in counted),
            equivalent=sum(len(r.entry.get("excused", [])) for r in counted),
            killed=sum(killed(r) for r in counted),
            timed_out=sum(r["timed_out"] for r in own),
            seconds=sum(r["mutant_seconds"] for r in own),
        )
        n["counted"] = n["mutants"] - n["equivalent"]
        commit, date = measured_in(counted)
        name = f"`{m.removeprefix('needlepoint.')}`" + (" (partial)" if m in waiting else "")
        rows.append(
            f"| {name} | {commit} | {date} | {n['mutants']} | {n['equivalent']} "
            f"| {n['killed']} ({n['timed_out']}) | {n['counted'] - n['killed']} "
            f"| {_pct(n['killed'], n['counted'])} | {_minutes(n['seconds'])} |"
        )
        total.update(n)
    complete = [m for m in modules if m not in waiting]
    label = sum_label(complete, modules, "modules")
    rows.append(
        f"| **{label}** | | | {total['mutants']} | {total['equivalent']} "
        f"| {total['killed']} ({total['timed_out']}) | {total['counted'] - total['killed']} "
        f"| **{_pct(total['killed'], total['counted'])}** | {_minutes(total['seconds'])} |"
    )
    functions = len(resolution.counted)
    if resolution.complete:
        rows += [
            "",
            f"Complete over the core at {_pct(total['killed'], total['counted'])}: "
            f"{total['killed']} of {total['counted']} mutants killed (not counting "
            f"{total['equivalent']} equivalent), in {functions} functions of {len(modules)} "
            "modules.",
        ]
    else:
        waiting_n = len(resolution.changed) + len(resolution.new)
        rows += [
            "",
            f"Not complete: {waiting_n} functions of the core need measuring, listed below "
            f"({functions} counted).",
        ]
    return "\n".join(rows + resolution.left_out("functions"))


def resolution(root: Path, files: Mapping[str, Path]) -> Resolution:
    """The core's functions now, against the committed shard files."""
    current: list[Current] = core_functions(files, root)
    return resolve(current, read_records(root), "functions")


def summary(root: Path, files: Mapping[str, Path], write: bool) -> str:
    """The shard table; with ``write``, also put into docs/mutation.md between its markers.

    Written into the doc too, so the table never shows a changed function's old score unmarked
    (a test then fails until `make mutate-summary` is run after a change to the core).
    """
    text = table(resolution(root, files), list(files))
    if write:
        put_table(root, BEGIN, END, text, "the shard table")
    return text


def record_shards(
    root: Path,
    files: Mapping[str, Path],
    outcomes: Sequence[Outcome],
    excused: Mapping[str, object],
    problems: Sequence[str],
    complete: Mapping[str, bool],
    seconds: Mapping[str, float],
    commit: str,
    clean: bool,
) -> list[str]:
    """Write a results file for every module in ``outcomes`` with a function measured whole;
    say why not. ``complete`` and ``seconds`` are by function (``o.function``).

    A module whose every function has a verdict for each of its mutants on this code gets
    ``MODULE.json``; one where only some have (a run limited to some functions, such as
    ``--needed``) gets ``MODULE@COMMIT.json`` holding those functions only, beside the module's
    other files, whose functions still count. Then the results files that no longer count
    anything (their functions are measured again, or gone) are deleted.
    """
    lines, wrote = [], False
    for module in sorted({o.module for o in outcomes}):
        mine = [o for o in outcomes if o.module == module]
        whole = {o.function for o in mine}
        done = {f for f in whole if complete[f]}
        name = module.removeprefix("needlepoint.")
        why = (
            "not every mutant of any function has a verdict on the code staged now"
            if not done
            else "uncommitted changes to code or tests"
            if not clean
            else "the register fails"
            if any(p.startswith(module + ".") for p in problems)
            else ""
        )
        if why:
            lines.append(f"{name}: no results file ({why})")
            continue
        mine = [o for o in mine if o.function in done]
        mine_excused = {k: v for k, v in excused.items() if k.startswith(module + ".")}
        result = score(mine, {o.key: mine_excused[o.key] for o in mine if o.key in mine_excused})
        spent = sum(seconds[f] for f in done)
        record = shard_record(module, files[module], mine, result, commit, spent)
        if done == whole:
            path = root / RESULTS / f"{module}.json"
            lines += keep_aside(root, path, set(record["functions"]), "functions")
        else:
            path = _free(root / RESULTS / f"{module}@{commit[:10]}.json")
            skipped = len(whole) - len(done)
            lines.append(f"{name}: {skipped} functions not measured whole, left to other files")
        write_json(path, record)
        wrote = True
        lines.append(f"{name}: {result.score_line()} -> {path.relative_to(root)}")
    if wrote:
        lines += prune(root, resolution(root, files).unused)
    return lines


def _free(path: Path) -> Path:
    """``path``, or the first of ``STEM-2.json``, ``STEM-3.json``, ... not taken: a results file
    is never overwritten by another measurement."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}.json")
    return candidate


def needed(root: Path, files: Mapping[str, Path]) -> list[str]:
    """The functions the summary leaves out (changed since measured, or never measured), as
    mutmut globs: ``--needed`` measures only these."""
    res = resolution(root, files)
    out = []
    for c in res.changed + res.new:
        klass, _, method = c.name.rpartition(".")
        local = f"x\u01c1{klass}\u01c1{method}" if klass else f"x_{c.name}"
        out.append(f"{c.module}.{local}__mutmut_*")
    return sorted(out)


__all__ = ["DOC", "KILLED", "needed", "record_shards", "summary", "table"]
