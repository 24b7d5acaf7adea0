"""Reading mutmut's verdicts for ``make mutate``: each mutant's change, the score, the survivors.

Kept apart from tools/mutate.py (which stages and runs mutmut) so that the counting rules can be
tested without running a single mutant. A mutant's change is read from the file mutmut generates
(every function copied once unchanged and once per mutant, with an index of where each copy
lies): the lines of the mutant that differ from the unchanged copy, exactly as written, with
their indentation. The register of equivalent mutants (tools/mutation_register.py) names mutants
by those lines.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# mutmut statuses (mutmut.stats.status_by_exit_code) and what they mean for the score.
# A timeout (the mutant made a test loop) and a crash (killed by a signal) fail the tests too.
KILLED = {"killed": "killed", "timeout": "timed out", "segfault": "crashed"}
KILLED["caught by type check"] = "caught by the type check"
NOT_KILLED = {"survived": "survived", "no tests": "reached by no test"}
NOT_KILLED |= {"suspicious": "suspicious", "skipped": "skipped"}
UNCHECKED = ("not checked", "check was interrupted by user")
ORIG = "__mutmut_orig"


class MutateError(Exception):
    """Bad input or a failed run: one line for the user, exit 2."""


@dataclass(frozen=True)
class Outcome:
    """One mutant: where it is, what mutmut said, and the line(s) it changes."""

    key: str  # mutmut's name, e.g. needlepoint.run.scoring.x_classify__mutmut_12
    function: str  # e.g. needlepoint.run.scoring.classify, or ...java_random.JavaRandom.nextInt
    number: int
    status: str
    before: str  # the changed lines of the original, exactly as written, joined by newlines
    after: str  # the same lines in the mutant

    @classmethod
    def of(cls, key: str, status: str, change: tuple[str, str] = ("", "")) -> Outcome:
        function, number = function_of(key)
        return cls(key, function, number, status, *change)

    @property
    def module(self) -> str:
        return self.key.rpartition(".")[0]


def function_of(key: str) -> tuple[str, int]:
    """``(dotted function name, mutant number)`` from a mutmut key."""
    mangled, sep, number = key.partition("__mutmut_")
    module, _, local = mangled.rpartition(".")
    if not sep or not number.isdigit() or not module:
        raise MutateError(f"not a mutmut mutant name: {key!r}")
    return f"{module}.{unmangle(local, key)}", int(number)


def unmangle(local: str, key: str = "") -> str:
    """``Class.method`` or ``function`` from mutmut's ``xǁClassǁmethod`` or ``x_function``."""
    if local.startswith("xǁ") and local.count("ǁ") == 2:
        _, klass, name = local.split("ǁ")
        return f"{klass}.{name}"
    if local.startswith("x_"):
        return local[2:]
    raise MutateError(f"not a mutmut mutant name: {key or local!r}")


def mutant_changes(code: str, spans: Mapping[str, tuple[int, int]]) -> dict[str, tuple[str, str]]:
    """``{local mutant name: (before, after)}`` for every mutant in one generated file.

    ``spans`` gives the first and last line (1-based) of each generated function, as mutmut's
    ``.spans`` index does. The generated names are put back to the function's own name, so
    only the mutated lines differ (a default argument's mutant changes the ``def`` line); they
    are kept exactly, indentation included.
    """
    lines = code.splitlines()
    out = {}
    for name, (start, end) in spans.items():
        base, sep, number = name.rpartition("__mutmut_")
        if not sep or not number.isdigit():
            continue
        orig = spans.get(base + ORIG)
        if orig is None:
            raise MutateError(f"the generated file has no unchanged copy of {base}")
        own = unmangle(base.rpartition(".")[2]).rpartition(".")[2]
        a = [x.replace(base + ORIG, own) for x in lines[orig[0] - 1 : orig[1]]]
        b = [x.replace(name, own) for x in lines[start - 1 : end]]
        before, after = [], []
        ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in ops:
            if tag != "equal":
                before += a[i1:i2]
                after += b[j1:j2]
        out[name] = ("\n".join(before), "\n".join(after))
    return out


@dataclass
class Result:
    """The score and everything printed around it."""

    killed: int = 0
    counted: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    survivors: dict[str, list[Outcome]] = field(default_factory=dict)
    equivalent: list[tuple[Outcome, object]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # register entries that fail the run
    unchecked: int = 0

    @property
    def complete(self) -> bool:
        return self.unchecked == 0

    def score_line(self) -> str:
        if not self.counted:
            return "killed 0 of 0 (no mutants in the selection)"
        return f"killed {self.killed} of {self.counted} ({100 * self.killed / self.counted:.1f}%)"


def score(outcomes: Sequence[Outcome], excused: Mapping[str, object]) -> Result:
    """Count kills among the mutants not excused; survivors grouped by function.

    ``excused`` maps a surviving mutant's key to the register entry that names it
    (tools/mutation_register.py decides which, and refuses anything else).
    """
    r = Result()
    survivors: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.status in UNCHECKED:
            r.unchecked += 1
            continue
        if o.status not in KILLED and o.status not in NOT_KILLED:
            raise MutateError(f"{o.key}: unknown mutmut status {o.status!r}")
        if o.key in excused:
            if o.status != "survived":  # the register checks this too; never count it twice
                raise MutateError(f"{o.key}: only a surviving mutant can be excused")
            r.equivalent.append((o, excused[o.key]))
            continue
        r.by_status[o.status] = r.by_status.get(o.status, 0) + 1
        r.counted += 1
        if o.status in KILLED:
            r.killed += 1
        else:
            survivors[o.function].append(o)
    r.survivors = {f: sorted(v, key=lambda o: o.number) for f, v in sorted(survivors.items())}
    return r


def _change(o: Outcome) -> str:
    before = o.before.replace("\n", " ⏎ ").strip() or "(nothing)"
    after = o.after.replace("\n", " ⏎ ").strip() or "(removed)"
    return f"{before}\n        -> {after}"


def counts_line(r: Result, register_name: str) -> str:
    """``1 killed, 2 survived; 3 registered as equivalent (...) and not counted.``"""
    labels = (KILLED | NOT_KILLED).items()
    parts = [f"{n} {label}" for s, label in labels if (n := r.by_status.get(s))]
    return (
        f"{', '.join(parts) or 'no mutants'}; {len(r.equivalent)} registered as equivalent "
        f"({register_name}) and not counted."
    )


def render(r: Result, register_name: str) -> str:
    """Survivors by function, register problems, the breakdown, and the score line last."""
    out = []
    if r.survivors:
        out.append("Surviving mutants, by function (each would change a rule unnoticed):")
        for function, items in r.survivors.items():
            out.append(f"  {function} ({len(items)})")
            for o in items:
                status = "" if o.status == "survived" else f" [{NOT_KILLED[o.status]}]"
                out.append(f"    #{o.number}{status}  {_change(o)}")
    out += [f"Register ({register_name}): {p}" for p in r.problems]
    if r.unchecked:
        out.append(f"{r.unchecked} mutants were never checked: the run was interrupted.")
    out.append(counts_line(r, register_name))
    out.append(r.score_line())
    return "\n".join(out)
