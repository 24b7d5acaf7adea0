"""What a mutation result is keyed by: a function or a rule constant, not the module it is in.

A function is named as in its module (``split_think``, ``JavaRandom.nextInt``) and identified by
the SHA-256 of its normalised source; a rule constant by its name and the SHA-256 of its value.
So a function moved unchanged into another module (a merge) keeps its measurement, and one whose
code changed shows as needing a re-measure. The normalised source is the code as Python reads it
(``ast.unparse``): a comment, the layout or a docstring can change no mutant (mutmut never mutates
a triple-quoted string, and comments and layout are not code), so they change no key. A
``# pragma: no mutate`` comment does change the mutants, so such lines are kept in the key.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from constant_mutants import constant_mutants, rule_constants
from mutation_report import MutateError, mutant_changes, unmangle

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def definitions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions mutmut can mutate, by name within their module: top-level functions and the
    methods of top-level classes (``Class.method``), as mutmut names them."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, _DEFS):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            out |= {f"{node.name}.{m.name}": m for m in node.body if isinstance(m, _DEFS)}
    return out


def _is_docstring(node: ast.stmt, source: str) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        return False
    if not isinstance(node.value.value, str):
        return False
    text = (ast.get_source_segment(source, node) or "").lstrip("rRuU")
    return text.startswith(('"""', "'''"))  # mutmut mutates a one-quote string even here


def normalised(node: ast.AST, source: str) -> str:
    """A function's code as Python reads it, without its docstrings, plus any no-mutate pragma."""
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        if isinstance(n, (*_DEFS, ast.ClassDef)) and n.body and _is_docstring(n.body[0], source):
            n.body = n.body[1:] or [ast.Pass()]
    lines = (ast.get_source_segment(source, node, padded=True) or "").splitlines()
    pragmas = [x.strip() for x in lines if "pragma: no mutate" in x]
    return "\n".join([ast.unparse(node), *pragmas])


def function_keys(source: str) -> dict[str, str]:
    """``{name within the module: SHA-256 of its normalised source}`` for every function."""
    tree = ast.parse(source)
    return {name: _sha(normalised(node, source)) for name, node in definitions(tree).items()}


def constant_keys(source: str | bytes) -> dict[str, str]:
    """``{constant name: SHA-256 of its value(s) as Python reads them}`` for each rule constant."""
    values: dict[str, list[str]] = defaultdict(list)
    for name, value in rule_constants(ast.parse(source)):
        values[name].append(ast.unparse(value))  # a name assigned twice: both values
    return {name: _sha("\n".join(v)) for name, v in values.items()}


@functools.cache
def generated_changes(source: str, module: str, path: str) -> dict[str, list[tuple[str, str]]]:
    """Every mutant mutmut makes of one module's source: ``{function: [(before, after), ...]}``.

    The same generator ``make mutate`` runs, in-process and without running any test (and once
    per source text: the register and both summaries ask for the same modules).
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


@dataclass(frozen=True)
class Current:
    """One function or rule constant of the core as it is now, with its key and mutant count."""

    module: str  # where it is now: needlepoint.run.scoring
    name: str  # within the module: classify, JavaRandom.nextInt, CODE_RE
    sha256: str
    mutants: int

    @property
    def label(self) -> str:
        return f"{self.module.removeprefix('needlepoint.')}.{self.name}"


def core_functions(files: Mapping[str, Path], root: Path) -> list[Current]:
    """Every function of the core that has mutants, in only_mutate's order, then the file's."""
    out = []
    for module, path in files.items():
        source = path.read_text("utf-8")
        keys = function_keys(source)
        rel = path.relative_to(root).as_posix()
        for full, changes in generated_changes(source, module, rel).items():
            name = full.removeprefix(module + ".")
            if name not in keys:
                raise MutateError(f"{rel}: mutmut mutates {name}, which is not a function there")
            if changes:
                out.append(Current(module, name, keys[name], len(changes)))
    return out


def core_constants(files: Mapping[str, Path]) -> list[Current]:
    """Every rule constant of the core that has mutants (tools/constant_mutants.py)."""
    out = []
    for module, path in files.items():
        keys = constant_keys(path.read_bytes())
        counts = Counter(m.constant for m in constant_mutants(path, module))
        for full, n in counts.items():
            name = full.removeprefix(module + ".")
            out.append(Current(module, name, keys[name], n))
    return out
