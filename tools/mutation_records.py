"""The results files under docs/mutation/, and how each of their entries is found in the code now.

A results file records one measurement (one module's mutants on one commit) and, within it, each
function or rule constant measured, by its name within its module and the SHA-256 of its
normalised source (tools/mutation_keys.py). The file's name and the module it names say only
where the measurement was made: an entry counts wherever a function of that name and hash is in
the core now, so a merge of modules keeps what was measured.

Each function (or constant) of the core now is matched to the newest entry with its name and
hash. One with no such entry needs measuring: *changed* when an entry of its name that counts
for nothing exists (its code as it was), *new* when none does. An entry whose name is nowhere in the
core is *gone*. A file none of whose entries counts or says what changed is *unused*:
``make mutate`` deletes those when it writes a file.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from mutation_keys import Current
from mutation_report import MutateError

DOC = Path("docs") / "mutation.md"
VERSION = 2  # 1: one entry per module, keyed by the module's path and its file's hash


def record_head(fmt: str, module: str, source: Path, commit: str) -> dict:
    """What every results file opens with: its format, the module measured and its source hash,
    the commit measured and when (shards and constants alike)."""
    return {
        "format": fmt,
        "version": VERSION,
        "module": module,
        "file": f"lib/{module.replace('.', '/')}.py",
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "commit": commit,
        "measured": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def write_json(path: Path, record: dict) -> Path:
    """A results file as committed: sorted keys, UTF-8, one newline at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text(text, "utf-8")
    return path


def read_results(
    root: Path, folder: Path, fmt: str, items: str, check: Callable[[dict], str | None]
) -> dict[Path, dict]:
    """The results files of one ``folder`` by path (relative to ``root``), each checked: of
    format ``fmt`` and this version, its ``items`` (functions or constants) each with a name, a
    hash and a mutant count, and ``check`` (its totals are the sum of its entries) holds."""
    out = {}
    for path in sorted((root / folder).glob("*.json")):
        rel = path.relative_to(root)
        record = json.loads(path.read_text("utf-8"))
        if record.get("format") != fmt or record.get("version") != VERSION:
            raise MutateError(f"{rel}: not a version {VERSION} {fmt} file")
        entries = record.get(items)
        if not isinstance(entries, dict) or not entries:
            raise MutateError(f"{rel}: no {items}")
        for name, e in entries.items():
            ok = isinstance(e, dict) and isinstance(e.get("mutants"), int) and e["mutants"] > 0
            if not ok or len(str(e.get("sha256", ""))) != 64:
                raise MutateError(f"{rel}: {name} needs its sha256 and a count of mutants")
        if problem := check(record):
            raise MutateError(f"{rel}: {problem}")
        out[rel] = record
    return out


@dataclass(frozen=True)
class Recorded:
    """One entry of a results file: a function or constant as it was measured."""

    path: Path  # the results file, relative to the root
    record: dict  # the whole file
    name: str
    entry: dict

    @property
    def label(self) -> str:
        return f"{self.record['module'].removeprefix('needlepoint.')}.{self.name}"

    @property
    def order(self) -> tuple[str, str, str]:
        return self.record["measured"], self.record["commit"], self.path.as_posix()


@dataclass
class Resolution:
    """Where each entry of the results files stands against the core now."""

    counted: dict[Current, Recorded] = field(default_factory=dict)
    changed: list[Current] = field(default_factory=list)
    new: list[Current] = field(default_factory=list)
    gone: list[Recorded] = field(default_factory=list)
    unused: list[Path] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.changed and not self.new

    def by_module(self) -> dict[str, list[tuple[Current, Recorded]]]:
        out: dict[str, list[tuple[Current, Recorded]]] = defaultdict(list)
        for c, r in self.counted.items():
            out[c.module].append((c, r))
        return out

    def attributed(self, modules: Sequence[str]) -> dict[Path, str]:
        """Each measurement that counts, and the module whose row shows its whole-measurement
        numbers (its time, its timeouts): where most of its counted mutants are now."""
        weight: dict[Path, dict[str, int]] = defaultdict(lambda: dict.fromkeys(modules, 0))
        for c, r in self.counted.items():
            weight[r.path][c.module] += c.mutants
        return {p: max(modules, key=lambda m: (w[m], -modules.index(m))) for p, w in weight.items()}

    def left_out(self, noun: str) -> list[str]:
        """The lines under a table naming what its sum leaves out, and why."""
        lines = []
        if self.changed:
            names = ", ".join(c.label for c in self.changed)
            lines.append(
                f"Changed since measured, so left out until measured again "
                f"({len(self.changed)} {noun}): {names}."
            )
        if self.new:
            names = ", ".join(c.label for c in self.new)
            lines.append(f"Not measured yet, so left out ({len(self.new)} {noun}): {names}.")
        if self.gone:
            # Once each: a function measured twice (a file per commit) is one function gone.
            labels = list(dict.fromkeys(r.label for r in self.gone))
            names = ", ".join(labels)
            lines.append(f"Measured but no longer in the core ({len(labels)}): {names}.")
        if self.unused:
            names = ", ".join(p.as_posix() for p in self.unused)
            lines.append(
                f"Results files that count nothing now (make mutate deletes them): {names}."
            )
        return [x for line in lines for x in ("", line)]


def recorded(records: Mapping[Path, dict], items: str) -> list[Recorded]:
    return [Recorded(p, r, n, e) for p, r in records.items() for n, e in r[items].items()]


def resolve(current: Sequence[Current], records: Mapping[Path, dict], items: str) -> Resolution:
    """Match each function (or constant) of the core to the newest entry with its name and hash.

    An entry counts once: where two functions of the core share a name and a hash, each takes
    only an entry measured in its own module. An entry whose mutant count is not the function's
    now (another mutmut, say) does not count: the function is measured again.
    """
    entries = recorded(records, items)
    by_key: dict[tuple[str, str], list[Recorded]] = defaultdict(list)
    for r in entries:
        by_key[r.name, r.entry["sha256"]].append(r)
    twins: dict[tuple[str, str], int] = defaultdict(int)
    for c in current:
        twins[c.name, c.sha256] += 1
    out = Resolution()
    for c in current:
        fits = [
            r
            for r in by_key.get((c.name, c.sha256), [])
            if r.entry["mutants"] == c.mutants
            and (twins[c.name, c.sha256] == 1 or r.record["module"] == c.module)
        ]
        if fits:
            out.counted[c] = max(fits, key=lambda r: r.order)
    # An entry of a function's name that counts for nothing is what it was before it changed
    # (one whose key counts, here or where it moved, says nothing of another of that name).
    counting = {(c.name, c.sha256) for c in out.counted}
    earlier = [r for r in entries if (r.name, r.entry["sha256"]) not in counting]
    missing = [c for c in current if c not in out.counted]
    out.changed = [c for c in missing if c.name in {r.name for r in earlier}]
    out.new = [c for c in missing if c not in out.changed]
    out.gone = [r for r in entries if r.name not in {c.name for c in current}]
    changed = {c.name for c in out.changed}
    used = {r.path for r in out.counted.values()} | {r.path for r in earlier if r.name in changed}
    out.unused = [p for p in records if p not in used]
    return out


def put_table(root: Path, begin: str, end: str, text: str, what: str) -> None:
    """Put ``text`` into docs/mutation.md between its two marker lines."""
    doc = root / DOC
    old = doc.read_text("utf-8")
    if old.count(begin) != 1 or old.count(end) != 1:
        raise MutateError(f"{DOC}: needs {what}'s two marker lines once each")
    before, rest = old.split(begin)
    _, after = rest.split(end)
    doc.write_text(f"{before}{begin}\n{text}\n{end}{after}", "utf-8")


def measured_in(rows: Sequence[Recorded]) -> tuple[str, str]:
    """A row's commit and date columns: the oldest measurement it counts, and how many more."""
    records = {r.path: r.record for r in rows}
    oldest = min(records.values(), key=lambda r: (r["measured"], r["commit"]))
    more = f" +{len(records) - 1}" if len(records) > 1 else ""
    return f"`{oldest['commit'][:10]}`{more}", oldest["measured"][:10]


def sum_label(complete: Sequence[str], modules: Sequence[str], noun: str) -> str:
    """The total row's label: all of the core, or how much of it is complete."""
    if len(complete) == len(modules):
        return f"all {len(modules)} {noun}"
    return f"{len(complete)} of {len(modules)} {noun} complete (partial)"


def prune(root: Path, unused: Sequence[Path]) -> list[str]:
    """Delete the results files that count nothing now; one line each."""
    lines = []
    for rel in unused:
        (root / rel).unlink()
        lines.append(f"deleted {rel.as_posix()}: each of its entries is measured again or gone")
    return lines


def keep_aside(root: Path, path: Path, names: set[str], items: str) -> list[str]:
    """Before a new file for a module is written at ``path``: an old file there that measured
    entries the new one does not (they moved to other modules) is kept under another name, so
    that those entries still count."""
    if not path.is_file():
        return []
    old = json.loads(path.read_text("utf-8"))
    if set(old.get(items, {})) <= names:
        return []
    aside = path.with_name(f"{path.stem}@{old['commit'][:10]}.json")
    path.rename(aside)
    return [f"kept {aside.relative_to(root).as_posix()}: entries measured there moved elsewhere"]
