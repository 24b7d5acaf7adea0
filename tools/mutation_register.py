"""The register of equivalent mutants (tests/mutation_equivalents.toml), one mutant per entry.

An entry names a function, the exact line(s) a mutant changes (with their indentation) and the
exact replacement, and says why no input to that function can tell the two apart. It must match
exactly one mutant of the current code, and that mutant must survive: an entry that matches no
mutant (the line changed), several (it would excuse more than it names), a killed one (the
tests now notice it), one reached by no test, a suspicious, skipped or timed-out one, or a
function outside the mutated modules fails the run. A reason that relies on code elsewhere
names that code (``depends``: a file and one of its lines, exactly); when the line changes the
entry fails the run until someone re-checks the reason.
"""

from __future__ import annotations

import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mutation_report import (
    KILLED,
    NOT_KILLED,
    UNCHECKED,
    MutateError,
    Outcome,
    mutant_changes,
    unmangle,
)

FIELDS = ("function", "before", "after", "reason")


@dataclass(frozen=True)
class Depends:
    """A line of code elsewhere that an entry's reason relies on."""

    file: str  # relative to the repository root
    line: str  # exactly as written, indentation included


@dataclass(frozen=True)
class Entry:
    """One registered equivalent mutant."""

    function: str
    before: str
    after: str
    reason: str
    depends: tuple[Depends, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.function}: {self.before.strip()!r} -> {self.after.strip()!r}"


def _lines_ok(text: str) -> bool:
    """Every changed line is as written: indented, or a top-level ``def`` (a default argument)."""
    lines = text.split("\n") if text else []
    return all(x[:1] in (" ", "\t") or x.startswith(("def ", "async def ")) for x in lines)


def _depends(raw: object, where: str) -> tuple[Depends, ...]:
    if not isinstance(raw, list) or not raw:
        raise MutateError(f"{where}: depends must be a list of {{file, line}} tables")
    out = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"file", "line"}:
            raise MutateError(f"{where}: each depends item needs exactly file and line")
        if not all(isinstance(v, str) and v.strip() for v in item.values()):
            raise MutateError(f"{where}: depends file and line must be non-empty strings")
        out.append(Depends(item["file"], item["line"]))
    return tuple(out)


def load_register(path: Path) -> tuple[Entry, ...]:
    """The ``[[equivalent]]`` entries, checked for form (not yet against the code)."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise MutateError(f"{path.name}: the equivalent-mutant register is missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise MutateError(f"{path.name}: not valid TOML ({exc})") from None
    extra_top = sorted(set(data) - {"equivalent", "constant"})
    if extra_top:
        raise MutateError(f"{path.name}: unknown table {extra_top[0]}")
    entries = []
    for i, raw in enumerate(data.get("equivalent", []), start=1):
        where = f"{path.name}: equivalent entry {i}"
        # after = "" names a mutant that removes the line (a keyword argument left out).
        fields = _fields(raw, FIELDS, where, may_be_empty=("after",))
        if not (_lines_ok(fields["before"]) and _lines_ok(fields["after"])):
            raise MutateError(
                f"{where}: before and after are the exact lines, with their indentation"
            )
        if fields["before"] == fields["after"]:
            raise MutateError(f"{where}: before and after are the same")
        depends = _depends(raw["depends"], where) if "depends" in raw else ()
        entries.append(Entry(**fields, depends=depends))
    seen = Counter((e.function, e.before, e.after) for e in entries)
    twice = [e for e, n in seen.items() if n > 1]
    if twice:
        raise MutateError(f"{path.name}: {twice[0][0]} is registered twice for one change")
    return tuple(entries)


def _fields(
    raw: dict, names: Sequence[str], where: str, may_be_empty: Sequence[str] = ()
) -> dict[str, str]:
    """An entry's named fields, each a string, non-empty unless named in ``may_be_empty``
    (exactly "", a removed line), and nothing else but ``depends``."""
    fields = {k: raw.get(k) for k in names}
    bad = [
        k
        for k, v in fields.items()
        if not isinstance(v, str) or (not v.strip() and not (k in may_be_empty and v == ""))
    ]
    extra = sorted(set(raw) - set(names) - {"depends"})
    if bad or extra:
        raise MutateError(f"{where} {f'needs {bad[0]}' if bad else f'unknown field {extra[0]}'}")
    return fields  # type: ignore[return-value]


def module_of(function: str, modules: Iterable[str]) -> str | None:
    """The mutated module a dotted function name lies in (the longest that fits), if any."""
    fits = [m for m in modules if function.startswith(m + ".")]
    return max(fits, key=len) if fits else None


def generated_changes(source: str, module: str, path: str) -> dict[str, list[tuple[str, str]]]:
    """Every mutant mutmut makes of one module's source: ``{function: [(before, after), ...]}``.

    The same generator ``make mutate`` runs, in-process and without running any test.
    """
    from mutmut.mutation.file_mutation import mutate_file_contents

    generated = mutate_file_contents(path, source)
    spans = {k: (v.start, v.end) for k, v in generated.line_span_by_function_name.items()}
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for base in spans:  # every function with mutants has an unchanged copy
        if base.endswith("__mutmut_orig"):
            out[f"{module}.{unmangle(base.removesuffix('__mutmut_orig'))}"] = []
    for name, change in mutant_changes(generated.code, spans).items():
        out[f"{module}.{unmangle(name.rpartition('__mutmut_')[0])}"].append(change)
    return dict(out)


def check_register(entries: Sequence[Entry], files: Mapping[str, Path], root: Path) -> list[str]:
    """What in the register does not hold for the current code (empty when all of it does).

    ``files`` maps each mutated module to its source file. Every entry must name a function of
    one of them, match exactly one of its mutants, and every line it depends on must still be
    in its file exactly once.
    """
    problems, cache = [], {}
    for e in entries:
        module = module_of(e.function, files)
        if module is None:
            problems.append(f"{e.label}: not in a mutated module ([tool.mutmut] only_mutate)")
            continue
        if module not in cache:
            path = files[module]
            rel = path.relative_to(root).as_posix()
            cache[module] = generated_changes(path.read_text("utf-8"), module, rel)
        changes = cache[module].get(e.function)
        if changes is None:
            problems.append(f"{e.label}: {e.function} is no longer in the code (or never mutated)")
            continue
        n = changes.count((e.before, e.after))
        if n != 1:
            what = "no mutant: the line changed" if n == 0 else f"{n} mutants: it must name one"
            problems.append(f"{e.label}: matches {what}")
        problems += depends_problems(e.label, e.depends, root)
    return problems


def depends_problems(label: str, depends: Sequence[Depends], root: Path) -> list[str]:
    """A line an entry's reason relies on must still be in its file, exactly once."""
    problems = []
    for d in depends:
        target = root / d.file
        found = target.read_text("utf-8").split("\n").count(d.line) if target.is_file() else 0
        if found != 1:
            problems.append(
                f"{label}: its reason depends on {d.file}: {d.line.strip()!r}, which "
                f"{'changed' if found == 0 else f'occurs {found} times'}: re-check the reason"
            )
    return problems


def match_outcomes(
    entries: Sequence[Entry], outcomes: Sequence[Outcome]
) -> tuple[dict[str, Entry], list[str]]:
    """``(excused mutants by key, problems)`` for the entries whose function was in the run."""
    index: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        index[(o.function, o.before, o.after)].append(o)
    in_run = {o.function for o in outcomes}
    excused, problems = {}, []
    for e in entries:
        if e.function not in in_run:
            continue
        found = index[(e.function, e.before, e.after)]
        if len(found) != 1:
            what = "no mutant: the line changed" if not found else f"{len(found)} mutants"
            problems.append(f"{e.label}: matches {what}")
            continue
        o = found[0]
        if o.status == "survived":
            excused[o.key] = e
        elif o.status in KILLED:
            problems.append(f"{e.label}: #{o.number} is {KILLED[o.status]}: remove the entry")
        elif o.status not in UNCHECKED:
            problems.append(
                f"{e.label}: #{o.number} is {NOT_KILLED.get(o.status, o.status)}: "
                "only a mutant that ran its tests and survived can be excused"
            )
    return excused, problems


@dataclass(frozen=True)
class ConstantEntry:
    """One registered equivalent constant mutant: the constant and the change, as listed."""

    constant: str
    change: str
    reason: str
    depends: tuple[Depends, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.constant}: {self.change}"


@dataclass(frozen=True)
class ConstantRegister:
    entries: tuple[ConstantEntry, ...]
    root: Path

    def match(
        self, verdicts: Sequence, modules: Sequence[str], partial: bool = False
    ) -> tuple[list[str], set]:
        """``(problems, excused mutants)``: each entry must name one surviving mutant (after a
        stopped run, ``partial``: an entry whose mutant was not reached is not a problem)."""
        problems, excused = [], set()
        for e in self.entries:
            module = e.constant.rpartition(".")[0]
            if module not in modules:
                continue
            found = [
                v
                for v in verdicts
                if (v.mutant.constant, v.mutant.change) == (e.constant, e.change)
            ]
            if partial and not found:
                continue
            if len(found) != 1:
                problems.append(f"{e.label}: matches {len(found)} constant mutants, not one")
            elif found[0].status == "survived":
                excused.add(found[0].mutant)
            else:
                problems.append(f"{e.label}: the mutant is {found[0].status}: remove the entry")
            problems += depends_problems(e.label, e.depends, self.root)
        return problems, excused


def load_constant_register(path: Path, modules: Iterable[str] = ()) -> ConstantRegister:
    """The ``[[constant]]`` entries; ``modules`` (when given) are the only ones they may name."""
    load_register(path)  # the same file: refuse it whole when any part is malformed
    data = tomllib.loads(path.read_text("utf-8"))
    modules = set(modules)
    entries = []
    for i, raw in enumerate(data.get("constant", []), start=1):
        where = f"{path.name}: constant entry {i}"
        fields = _fields(raw, ("constant", "change", "reason"), where)
        if modules and fields["constant"].rpartition(".")[0] not in modules:
            raise MutateError(f"{where}: {fields['constant']} is not in a mutated module")
        depends = _depends(raw["depends"], where) if "depends" in raw else ()
        entries.append(ConstantEntry(**fields, depends=depends))
    return ConstantRegister(tuple(entries), path.parents[1])
