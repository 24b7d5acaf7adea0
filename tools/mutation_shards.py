"""One results file per shard (a core module), and the table in docs/mutation.md adding them up.

A shard's file is written only when every mutant of the module has a verdict measured on one
committed state of the code and tests, and the register holds for it: it records that commit,
the date, the population, the verdict counts, every survivor and every excused mutant with its
reason. The summary never presents a sum as complete unless every core module has a file; it
names the modules it leaves out.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from mutation_report import KILLED, MutateError, Outcome, Result, counts_line

RESULTS = Path("docs") / "mutation"
DOC = Path("docs") / "mutation.md"
FORMAT = "needlepoint-mutation-shard"
BEGIN = (
    "<!-- shard table: written by tools/mutate.py --summary from docs/mutation/; do not edit -->"
)
END = "<!-- end of the shard table -->"


def record_head(fmt: str, module: str, source: Path, commit: str) -> dict:
    """What every results file opens with: its format, the module and its source hash, the
    commit measured and when (shards and constants alike)."""
    return {
        "format": fmt,
        "version": 1,
        "module": module,
        "file": f"lib/{module.replace('.', '/')}.py",
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "commit": commit,
        "measured": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


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
    timed_out = result.by_status.get("timeout", 0)
    return {
        **record_head(FORMAT, module, source, commit),
        "mutmut": version,
        "mutants": len(outcomes),
        "verdicts": dict(sorted(Counter(o.status for o in outcomes).items())),
        "equivalent": len(result.equivalent),
        "counted": result.counted,
        "killed": result.killed,
        "timed_out": timed_out,
        "mutant_seconds": round(seconds, 1),
        "survivors": [_mutant(o) for items in result.survivors.values() for o in items],
        "excused": [
            _mutant(o) | {"reason": e.reason} for o, e in sorted(result.equivalent, key=_order)
        ],
        "counts": counts_line(result, "tests/mutation_equivalents.toml"),
    }


def _order(pair: tuple[Outcome, object]) -> tuple[str, int]:
    return pair[0].function, pair[0].number


def _mutant(o: Outcome) -> dict:
    return {
        "function": o.function,
        "number": o.number,
        "status": o.status,
        "before": o.before,
        "after": o.after,
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def write_json(path: Path, record: dict) -> Path:
    """A results file as committed: sorted keys, UTF-8, one newline at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text(text, "utf-8")
    return path


def write_record(root: Path, record: dict) -> Path:
    return write_json(root / RESULTS / f"{record['module']}.json", record)


def read_results(
    root: Path, folder: Path, fmt: str, modules: Sequence[str], what: str
) -> dict[str, dict]:
    """The results files of one ``folder`` by module; one for a module not in the core, or
    not of format ``fmt``, is refused."""
    out = {}
    for path in sorted((root / folder).glob("*.json")):
        record = json.loads(path.read_text("utf-8"))
        if record.get("format") != fmt or record.get("module") != path.stem:
            raise MutateError(f"{path.relative_to(root)}: not {what}")
        if path.stem not in modules:
            raise MutateError(f"{path.relative_to(root)}: {path.stem} is not a core module")
        out[path.stem] = record
    return out


def read_records(root: Path, modules: Sequence[str]) -> dict[str, dict]:
    """The committed shard results files by module."""
    return read_results(root, RESULTS, FORMAT, modules, "a shard results file")


def sum_label(records: Mapping[str, dict], modules: Sequence[str], noun: str) -> tuple[str, list]:
    """The total row's label, and the lines naming what the sum leaves out (none when whole)."""
    left_out = [m.removeprefix("needlepoint.") for m in modules if m not in records]
    if not left_out:
        return f"all {len(modules)} {noun}", []
    label = f"{len(modules) - len(left_out)} of {len(modules)} {noun} (partial)"
    return label, ["", f"Not measured yet, so left out of the sum: {', '.join(left_out)}."]


def put_table(root: Path, begin: str, end: str, text: str, what: str) -> None:
    """Put ``text`` into docs/mutation.md between its two marker lines."""
    doc = root / DOC
    old = doc.read_text("utf-8")
    if old.count(begin) != 1 or old.count(end) != 1:
        raise MutateError(f"{DOC}: needs {what}'s two marker lines once each")
    before, rest = old.split(begin)
    _, after = rest.split(end)
    doc.write_text(f"{before}{begin}\n{text}\n{end}{after}", "utf-8")


def changed_since(root: Path, records: Mapping[str, dict]) -> list[str]:
    """The modules whose source is no longer what their results file was measured on."""
    return [
        m
        for m, r in records.items()
        if hashlib.sha256((root / r["file"]).read_bytes()).hexdigest() != r["source_sha256"]
    ]


def _pct(killed: int, counted: int) -> str:
    return f"{100 * killed / counted:.1f}%" if counted else "-"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def table(records: Mapping[str, dict], modules: Sequence[str]) -> str:
    """The markdown table of the shards, their sum, and what the sum leaves out."""
    head = (
        "| Shard (module) | Commit | Date | Mutants | Equivalent | Killed (timed out) "
        "| Not killed | Score | Mutant time |"
    )
    rows = [head, "|" + "---|" * 9]
    total = Counter()
    for m in modules:
        if m not in records:
            continue
        r = records[m]
        missed = r["counted"] - r["killed"]
        rows.append(
            f"| `{m.removeprefix('needlepoint.')}` | `{r['commit'][:10]}` | {r['measured'][:10]} "
            f"| {r['mutants']} | {r['equivalent']} | {r['killed']} ({r['timed_out']}) | {missed} "
            f"| {_pct(r['killed'], r['counted'])} | {_minutes(r['mutant_seconds'])} |"
        )
        total.update({k: r[k] for k in ("mutants", "equivalent", "killed", "counted")})
        total.update({"timed_out": r["timed_out"], "seconds": r["mutant_seconds"]})
    label, left_out = sum_label(records, modules, "shards")
    rows.append(
        f"| **{label}** | | | {total['mutants']} | {total['equivalent']} "
        f"| {total['killed']} ({total['timed_out']}) | {total['counted'] - total['killed']} "
        f"| **{_pct(total['killed'], total['counted'])}** | {_minutes(total['seconds'])} |"
    )
    return "\n".join(rows + left_out)


def summary(root: Path, modules: Sequence[str], write: bool) -> str:
    """The shard table; with ``write``, also put into docs/mutation.md between its markers."""
    records = read_records(root, modules)
    text = table(records, modules)
    # Written into the doc too, so the table never shows a changed module's old score unmarked
    # (a test then fails until `make mutate-summary` is run after a core change).
    if stale := changed_since(root, records):
        text += "\n\nChanged since measured (run these shards again): " + ", ".join(stale)
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
    """Write the results file of every module in ``outcomes`` that may have one; say why not."""
    from mutation_report import score

    lines = []
    for module in sorted({o.module for o in outcomes}):
        mine = [o for o in outcomes if o.module == module]
        name = module.removeprefix("needlepoint.")
        why = (
            "not every mutant has a verdict on the code staged now"
            if not complete[module]
            else "uncommitted changes to code or tests"
            if not clean
            else "the register fails"
            if any(p.startswith(module + ".") for p in problems)
            else ""
        )
        if why:
            lines.append(f"{name}: no results file ({why})")
            continue
        result = score(mine, {k: v for k, v in excused.items() if k.startswith(module + ".")})
        record = shard_record(module, files[module], mine, result, commit, seconds[module])
        path = write_record(root, record)
        lines.append(f"{name}: {result.score_line()} -> {path.relative_to(root)}")
    return lines


__all__ = ["KILLED", "record_shards", "summary", "table"]
