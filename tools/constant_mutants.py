"""The mutants of the core's module-level rule constants, which mutmut never makes.

mutmut mutates function bodies only, so a loosened ``CODE_RE`` or a trim set one character short
would pass unnoticed. Here every literal inside a constant's value is changed in turn: a number
by one either way, a string by ``XX`` on both ends, a regular expression by each quantifier,
character range and anchor, a tuple, list, set or dict by dropping each element. A mutant is
named by the constant and its whole value as written before and after, so the register
(``[[constant]]`` in tests/mutation_equivalents.toml) can name exactly one.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ConstantMutant:
    """One changed constant: where its value is in the file, and the value before and after."""

    constant: str  # dotted: needlepoint.run.scoring.CODE_RE
    path: Path
    start: int  # byte offsets of the value in the file
    end: int
    before: str
    after: str
    change: str  # what changed, in short: "0x21 -> 34", "drops 'bad_format'"

    @property
    def module(self) -> str:
        return self.constant.rpartition(".")[0]

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.after.encode("utf-8") + source[self.end :]


def rule_constants(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    """Module-level ``NAME = value`` with an upper-case name (not a dunder): the rule constants."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        name = target.id if isinstance(target, ast.Name) else ""
        if name.lstrip("_").isupper() and not name.startswith("__"):
            out.append((name, value))
    return out


def regex_variants(pattern: str) -> list[str]:
    """Each quantifier loosened or tightened by one, each range end moved, each anchor dropped."""
    out = []
    for m in re.finditer(r"\{(\d+)(?:,(\d+))?\}", pattern):
        a = int(m[1])
        if m[2] is None:
            bounds = [(a - 1, a), (a, a + 1)]
        else:
            b = int(m[2])
            bounds = [(a - 1, b), (a + 1, b), (a, b - 1), (a, b + 1)]
        for lo, hi in bounds:
            if 0 <= lo <= hi:
                out.append(f"{pattern[: m.start()]}{{{lo},{hi}}}{pattern[m.end() :]}")
    for klass in re.finditer(r"\[([^\]]+)\]", pattern):
        for r in re.finditer(r"([^\\])-([^\\\]])", klass[1]):
            at = klass.start(1) + r.start()
            lo, hi = ord(r[1]), ord(r[2])
            for new_lo, new_hi in ((lo - 1, hi), (lo + 1, hi), (lo, hi - 1), (lo, hi + 1)):
                if 0 <= new_lo <= new_hi:
                    moved = f"{chr(new_lo)}-{chr(new_hi)}"
                    out.append(pattern[:at] + moved + pattern[at + 3 :])
    if pattern.startswith("^"):
        out.append(pattern[1:])
    if pattern.endswith("$"):
        out.append(pattern[:-1])
    alternatives = pattern.split("|")
    if len(alternatives) > 1 and "(" not in pattern:
        out += [
            "|".join(alternatives[:i] + alternatives[i + 1 :]) for i in range(len(alternatives))
        ]
    return out


class _Source:
    """Byte offsets of AST nodes (their columns are UTF-8 byte offsets)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        for line in data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.starts[node.lineno - 1] + node.col_offset
        return start, self.starts[node.end_lineno - 1] + node.end_col_offset

    def text(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.data[a:b].decode("utf-8")


def _literal_changes(
    src: _Source, node: ast.AST, regexes: set[int]
) -> list[tuple[ast.AST, str, str]]:
    """``(node, replacement text, what changed)`` for a literal or display in a constant's value."""
    if isinstance(node, ast.Constant):
        v = node.value
        old = src.text(node)
        if isinstance(v, bool):
            new = [repr(not v)]
        elif isinstance(v, int | float):
            new = [repr(v + 1), repr(v - 1)]
        elif isinstance(v, str) and id(node) in regexes:
            new = [repr(p) for p in regex_variants(v)]
        elif isinstance(v, str | bytes):
            mark = "XX" if isinstance(v, str) else b"XX"
            new = [repr(mark + v + mark)]
        else:
            new = []
        return [(node, text, f"{old} -> {text}") for text in new]
    items: list[tuple[ast.AST, str, str]] = []
    if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
        texts = [src.text(e) for e in node.elts]
        for i in range(len(texts)):
            rest = texts[:i] + texts[i + 1 :]
            if isinstance(node, ast.Tuple):
                inner = ", ".join(rest) + ("," if len(rest) == 1 else "")
                items.append((node, f"({inner})", f"drops {texts[i]}"))
            elif isinstance(node, ast.List):
                items.append((node, f"[{', '.join(rest)}]", f"drops {texts[i]}"))
            else:
                new = f"{{{', '.join(rest)}}}" if rest else "set()"
                items.append((node, new, f"drops {texts[i]}"))
    if isinstance(node, ast.Dict) and node.keys:
        pairs = [
            f"{src.text(k)}: {src.text(v)}" if k is not None else f"**{src.text(v)}"
            for k, v in zip(node.keys, node.values, strict=True)
        ]
        for i in range(len(pairs)):
            items.append(
                (node, "{" + ", ".join(pairs[:i] + pairs[i + 1 :]) + "}", f"drops {pairs[i]}")
            )
    return items


def constant_mutants(path: Path, module: str) -> list[ConstantMutant]:
    """Every mutant of every rule constant of one module, without duplicates."""
    data = path.read_bytes()
    src = _Source(data)
    tree = ast.parse(data)
    out: list[ConstantMutant] = []
    for name, value in rule_constants(tree):
        start, end = src.span(value)
        before = src.text(value)
        # f-string parts have no reliable positions; their placeholders' values are mutated.
        skip = {id(n) for j in ast.walk(value) if isinstance(j, ast.JoinedStr) for n in ast.walk(j)}
        regexes = {
            id(c.args[0])
            for c in ast.walk(value)
            if isinstance(c, ast.Call)
            and ast.unparse(c.func) in ("re.compile", "compile")
            and c.args
        }
        seen, made = {before}, []
        for node in ast.walk(value):
            if id(node) in skip:
                continue
            for target, text, change in _literal_changes(src, node, regexes):
                a, b = src.span(target)
                after = (data[start:a] + text.encode("utf-8") + data[b:end]).decode("utf-8")
                if after not in seen:
                    seen.add(after)
                    made.append((change, len(data[start:a].decode("utf-8")), after))
        # The same change of the same literal at two places is told apart by where it is.
        twice = {c for c, n in Counter(c for c, _, _ in made).items() if n > 1}
        for change, at, after in made:
            label = f"{change} (at {at})" if change in twice else change
            out.append(ConstantMutant(f"{module}.{name}", path, start, end, before, after, label))
    return out
