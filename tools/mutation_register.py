"""The register of equivalent mutants (tests/mutation_equivalents.toml), one mutant per entry.

An entry names a function as it is named in its module (``split_think``, ``JavaRandom.nextInt``:
not by the module's path, so that a merge of modules moves no entry), the exact line(s) a
mutant changes (with their indentation) and the exact replacement, and says why no input to
that function can tell the two apart. It must match exactly one mutant of the current core,
wherever the function is now, and that mutant must survive: an entry that matches no mutant
(the line changed), several (it would excuse more than it names), a killed one (the tests now
notice it), one reached by no test, a suspicious, skipped or timed-out one, or a function in no
mutated module fails the run. A reason that relies on code elsewhere names that code
(``depends``: a file and one of its lines, exactly); when the line changes the entry fails the
run until someone re-checks the reason. A file merged away is looked for nowhere but in the
library: the line must then be in exactly one of its files.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from constant_mutants import ConstantMutant, constant_mutants
from mutation_keys import definitions, generated_changes
from mutation_report import KILLED, NOT_KILLED, UNCHECKED, MutateError, Outcome

FIELDS = ("function", "before", "after", "reason")
# A function as its module names it: function, or Class.method; a constant: NAME.
LOCAL_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?")


@dataclass(frozen=True)
class Depends:
    """A line of code elsewhere that an entry's reason relies on."""

    file: str  # relative to the repository root
    line: str  # exactly as written, indentation included


@dataclass(frozen=True)
class Entry:
    """One registered equivalent mutant (``function``: its name within its module; once the
    entry is found in the code, the module's dotted path before it)."""

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
        if not LOCAL_NAME.fullmatch(fields["function"]):
            raise MutateError(
                f"{where}: name the function as its module does (function or Class.method), "
                "not by the module's path"
            )
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


def _defined(files: Mapping[str, Path]) -> dict[str, list[str]]:
    """The modules each function name is defined in (parsed, not generated: cheap)."""
    out: dict[str, list[str]] = defaultdict(list)
    for module, path in files.items():
        for name in definitions(ast.parse(path.read_text("utf-8"))):
            out[name].append(module)
    return out


def resolve_register(
    entries: Sequence[Entry], files: Mapping[str, Path], root: Path
) -> tuple[tuple[Entry, ...], list[str]]:
    """``(the entries found in the code, what in the register does not hold)``.

    ``files`` maps each mutated module to its source file. Every entry must name a function of
    one of them and match exactly one of its mutants (among all the functions of that name in
    the core, should several modules have one); every line it depends on must still be in its
    file exactly once. A found entry's function is the full dotted name of where it is now.
    """
    problems, found, defined = [], [], _defined(files)
    for e in entries:
        modules = defined.get(e.function, [])
        hits: list[str] = []
        for module in modules:
            path = files[module]
            rel = path.relative_to(root).as_posix()
            changes = generated_changes(path.read_text("utf-8"), module, rel)
            hits += [module] * changes.get(f"{module}.{e.function}", []).count((e.before, e.after))
        if not modules:
            problems.append(
                f"{e.label}: {e.function} is in no mutated module ([tool.mutmut] only_mutate)"
            )
            continue
        if len(hits) != 1:
            what = "no mutant: the line changed" if not hits else f"{len(hits)} mutants"
            problems.append(f"{e.label}: matches {what}" + (": it must name one" if hits else ""))
        else:
            found.append(replace(e, function=f"{hits[0]}.{e.function}"))
        problems += depends_problems(e.label, e.depends, root)
    return tuple(found), problems


def check_register(entries: Sequence[Entry], files: Mapping[str, Path], root: Path) -> list[str]:
    """What in the register does not hold for the current code (empty when all of it does)."""
    return resolve_register(entries, files, root)[1]


def depends_problems(label: str, depends: Sequence[Depends], root: Path) -> list[str]:
    """A line an entry's reason relies on must still be in its file, exactly once."""
    problems = []
    for d in depends:
        target = root / d.file
        if target.is_file():
            found = target.read_text("utf-8").split("\n").count(d.line)
        else:  # merged into another module: the line, anywhere in the library, once
            library = sorted((root / "lib").rglob("*.py"))
            found = sum(p.read_text("utf-8").split("\n").count(d.line) for p in library)
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
    """One registered equivalent constant mutant: the constant (its name in its module, and the
    module it is found in now) and the change, as listed."""

    constant: str
    change: str
    reason: str
    depends: tuple[Depends, ...] = ()
    module: str = ""

    @property
    def label(self) -> str:
        return f"{self.module}.{self.constant}: {self.change}"

    def names(self, mutant: ConstantMutant) -> bool:
        """Whether this entry names ``mutant``."""
        own = (mutant.module, mutant.constant.rpartition(".")[2], mutant.change)
        return own == (self.module, self.constant, self.change)


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
            if e.module not in modules:
                continue
            found = [v for v in verdicts if e.names(v.mutant)]
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

    def reason(self, mutant: ConstantMutant) -> str:
        """The reason of the entry that excuses ``mutant``."""
        return next(e.reason for e in self.entries if e.names(mutant))


def load_constant_register(path: Path, files: Mapping[str, Path]) -> ConstantRegister:
    """The ``[[constant]]`` entries, each found in the one mutated module (of ``files``) that
    has a rule constant of its name (or, should several, the one that has its change)."""
    load_register(path)  # the same file: refuse it whole when any part is malformed
    data = tomllib.loads(path.read_text("utf-8"))
    made = {module: constant_mutants(p, module) for module, p in files.items()}
    entries = []
    for i, raw in enumerate(data.get("constant", []), start=1):
        where = f"{path.name}: constant entry {i}"
        fields = _fields(raw, ("constant", "change", "reason"), where)
        name = fields["constant"]
        if "." in name:
            raise MutateError(f"{where}: name the constant as its module does, not by its path")
        have = [m for m, ms in made.items() if any(x.constant == f"{m}.{name}" for x in ms)]
        if len(have) > 1:
            change = fields["change"]
            have = [
                m
                for m in have
                if any(x.change == change for x in made[m] if x.constant == f"{m}.{name}")
            ]
        if len(have) != 1:
            what = "no mutated module" if not have else f"{len(have)} mutated modules"
            raise MutateError(f"{where}: {name} is a rule constant of {what}")
        depends = _depends(raw["depends"], where) if "depends" in raw else ()
        entries.append(ConstantEntry(**fields, depends=depends, module=have[0]))
    return ConstantRegister(tuple(entries), path.parents[1])
