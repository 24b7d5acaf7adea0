"""Reading mutmut's verdicts for ``make mutate``: the score, the survivors, the register.

Kept apart from tools/mutate.py (which stages and runs mutmut) so that the counting rules can
be tested without running a single mutant. A registered equivalent mutant is named by its
function and the exact line it changes, not by mutmut's number: numbers shift whenever a
function gains a mutant, and a changed line makes the entry stale instead of silently
excusing a different mutant.
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# mutmut statuses (mutmut.stats.status_by_exit_code) and what they mean for the score.
# A timeout (the mutant made a test loop) and a crash (killed by a signal) fail the tests too.
KILLED = {"killed": "killed", "timeout": "timed out", "segfault": "crashed"}
KILLED["caught by type check"] = "caught by the type check"
NOT_KILLED = {"survived": "survived", "no tests": "reached by no test"}
NOT_KILLED |= {"suspicious": "suspicious", "skipped": "skipped"}
UNCHECKED = ("not checked", "check was interrupted by user")


class MutateError(Exception):
    """Bad input or a failed run: one line for the user, exit 2."""


@dataclass(frozen=True)
class Outcome:
    """One mutant: where it is, what mutmut said, and the line(s) it changes."""

    key: str  # mutmut's name, e.g. needlepoint.run.scoring.x_classify__mutmut_12
    function: str  # e.g. needlepoint.run.scoring.classify, or ...java_random.JavaRandom.nextInt
    number: int
    status: str
    before: str
    after: str

    @classmethod
    def of(cls, key: str, status: str, diff: str = "") -> Outcome:
        function, number = function_of(key)
        before, after = changed_lines(diff)
        return cls(key, function, number, status, before, after)


def function_of(key: str) -> tuple[str, int]:
    """``(dotted function name, mutant number)`` from a mutmut key."""
    mangled, sep, number = key.partition("__mutmut_")
    module, _, local = mangled.rpartition(".")
    if not sep or not number.isdigit() or not module:
        raise MutateError(f"not a mutmut mutant name: {key!r}")
    if local.startswith("xǁ") and local.count("ǁ") == 2:
        _, klass, name = local.split("ǁ")
        return f"{module}.{klass}.{name}", int(number)
    if local.startswith("x_"):
        return f"{module}.{local[2:]}", int(number)
    raise MutateError(f"not a mutmut mutant name: {key!r}")


def changed_lines(diff: str) -> tuple[str, str]:
    """The removed and the added lines of a unified diff, each stripped, one per line."""
    before, after = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            before.append(line[1:].strip())
        elif line.startswith("+"):
            after.append(line[1:].strip())
    return "\n".join(before), "\n".join(after)


@dataclass(frozen=True)
class Entry:
    """One registered equivalent mutant."""

    function: str
    before: str
    after: str
    reason: str

    def matches(self, o: Outcome) -> bool:
        return (o.function, o.before, o.after) == (self.function, self.before, self.after)


def load_register(path: Path) -> tuple[Entry, ...]:
    """The ``[[equivalent]]`` entries of the register; each needs all four fields."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise MutateError(f"{path.name}: the equivalent-mutant register is missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise MutateError(f"{path.name}: not valid TOML ({exc})") from None
    entries = []
    for i, raw in enumerate(data.get("equivalent", []), start=1):
        fields = {k: raw.get(k) for k in ("function", "before", "after", "reason")}
        bad = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
        extra = sorted(set(raw) - set(fields))
        if bad or extra:
            what = f"needs {', '.join(bad)}" if bad else f"unknown field {extra[0]}"
            raise MutateError(f"{path.name}: equivalent entry {i} {what}")
        entries.append(Entry(**{k: v.strip() for k, v in fields.items()}))
    seen = set()
    for e in entries:
        if (e.function, e.before, e.after) in seen:
            raise MutateError(f"{path.name}: {e.function} is registered twice for one change")
        seen.add((e.function, e.before, e.after))
    return tuple(entries)


@dataclass
class Result:
    """The score and everything printed around it."""

    killed: int = 0
    counted: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    survivors: dict[str, list[Outcome]] = field(default_factory=dict)
    equivalent: list[tuple[Outcome, Entry]] = field(default_factory=list)
    stale: list[Entry] = field(default_factory=list)
    unchecked: int = 0

    @property
    def complete(self) -> bool:
        return self.unchecked == 0

    def score_line(self) -> str:
        if not self.counted:
            return "killed 0 of 0 (no mutants in the selection)"
        return f"killed {self.killed} of {self.counted} ({100 * self.killed / self.counted:.1f}%)"


def score(outcomes: list[Outcome], register: tuple[Entry, ...]) -> Result:
    """Count kills among the non-equivalent mutants; survivors grouped by function."""
    r = Result()
    survivors: dict[str, list[Outcome]] = defaultdict(list)
    used: set[Entry] = set()
    for o in outcomes:
        if o.status in UNCHECKED:
            r.unchecked += 1
            continue
        if o.status not in KILLED and o.status not in NOT_KILLED:
            raise MutateError(f"{o.key}: unknown mutmut status {o.status!r}")
        # Only a mutant the tests miss can be excused; a killed one counts, register or not.
        candidates = register if o.status in NOT_KILLED else ()
        entry = next((e for e in candidates if e.matches(o)), None)
        if entry is not None:
            used.add(entry)
            r.equivalent.append((o, entry))
            continue
        r.by_status[o.status] = r.by_status.get(o.status, 0) + 1
        r.counted += 1
        if o.status in KILLED:
            r.killed += 1
        else:
            survivors[o.function].append(o)
    # An entry whose function is in the selection but which excused nothing names a line that
    # changed, or a mutant the tests now kill: either way it must go.
    in_scope = {o.function for o in outcomes}
    r.stale = [e for e in register if e not in used and e.function in in_scope]
    r.survivors = {f: sorted(v, key=lambda o: o.number) for f, v in sorted(survivors.items())}
    return r


def _change(o: Outcome) -> str:
    before = o.before.replace("\n", " ⏎ ") or "(nothing)"
    after = o.after.replace("\n", " ⏎ ") or "(removed)"
    return f"{before}\n        -> {after}"


def render(r: Result, register_name: str) -> str:
    """Survivors by function, the breakdown, and the score line last."""
    out = []
    if r.survivors:
        out.append("Surviving mutants, by function (each would change a rule unnoticed):")
        for function, items in r.survivors.items():
            out.append(f"  {function} ({len(items)})")
            for o in items:
                status = "" if o.status == "survived" else f" [{NOT_KILLED[o.status]}]"
                out.append(f"    #{o.number}{status}  {_change(o)}")
    for e in r.stale:
        out.append(
            f"Stale register entry ({register_name}): {e.function}: {e.before!r} -> {e.after!r} "
            "matches no surviving mutant; the line changed or the tests now kill it: remove it."
        )
    if r.unchecked:
        out.append(f"{r.unchecked} mutants were never checked: the run was interrupted.")
    labels = (KILLED | NOT_KILLED).items()
    parts = [f"{n} {label}" for s, label in labels if (n := r.by_status.get(s))]
    out.append(
        f"{', '.join(parts) or 'no mutants'}; {len(r.equivalent)} registered as equivalent "
        f"({register_name}) and not counted."
    )
    out.append(r.score_line())
    return "\n".join(out)
