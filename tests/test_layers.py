"""The package tree is the data path: imports point only downward, and no module is too long.

A module holds one concept, sized by that concept: above 600 lines it warns (is it two
concepts?), above 800 it fails.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy
import that points upward is still a dependency that points the wrong way.
"""

from __future__ import annotations

import ast
import graphlib
import warnings
from pathlib import Path

import pytest

import needlepoint

LIB = Path(needlepoint.__file__).parent
# The data path, from the bottom up. A package may import from its own rank and below.
# ``contamination`` stands beside the path: it needs only the shared base.
RANKS = {
    "": 0,  # errors, jsonio: the shared base
    "design": 1,
    "contamination": 1,
    "run": 2,
    "analysis": 3,
    "interop": 3,  # another harness's task and log: the design and run stages
    "compare": 4,
    "pilot": 5,
    "study": 6,
    "notebook": 7,
    "local": 8,
    "cli": 9,
}
# Stable public import paths that re-export from a stage; the library itself never uses them.
# (``needlepoint.rand`` is no longer one: the generator and the audit share it from the base.)
SHIMS = {"needlepoint.scoring"}
ENTRY = {"needlepoint.__main__"}
WARN_LINES = 600  # above this a module may be two concepts: a warning, to look at it
MAX_LINES = 800  # above this it is: split it by concept


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB).with_suffix("")
        parts = ["needlepoint", *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every needlepoint module a file imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from needlepoint.run import folder` imports the module needlepoint.run.folder
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in MODULES}
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in RANKS) else ""


def test_every_package_has_a_rank() -> None:
    packages = {_package(m) for m in MODULES if m not in SHIMS | ENTRY}
    assert packages <= set(RANKS), packages - set(RANKS)


@pytest.mark.parametrize("module", sorted(set(MODULES) - SHIMS - ENTRY))
def test_imports_point_down_the_data_path(module: str) -> None:
    rank = RANKS[_package(module)]
    upward = sorted(
        imp
        for imp in _imports(MODULES[module])
        if imp not in SHIMS and _package(imp) != "" and RANKS[_package(imp)] > rank
    )
    assert not upward, f"{module} imports from a later stage: {upward}"
    shims = sorted(_imports(MODULES[module]) & SHIMS)
    assert not shims, f"{module} uses the public shim {shims}; import the stage module"


def test_contamination_needs_only_the_shared_base() -> None:
    for module in (m for m in MODULES if _package(m) == "contamination"):
        other = {_package(i) for i in _imports(MODULES[module])} - {"", "contamination"}
        assert not other, f"{module} imports {other}"


def test_no_import_cycles_between_modules() -> None:
    graph = {
        m: {i for i in _imports(p) if i != m and i in MODULES and not i.endswith(m)}
        for m, p in MODULES.items()
    }
    # A package's __init__ re-exporting its own module is not a cycle of behaviour.
    for m in graph:
        graph[m] = {i for i in graph[m] if not m.startswith(i + ".")}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_exceeds_800_lines(module: str) -> None:
    lines = MODULES[module].read_text("utf-8").count("\n")
    where = MODULES[module].relative_to(LIB)
    assert lines <= MAX_LINES, f"{where}: {lines} lines, above {MAX_LINES}: split it by concept"
    if lines > WARN_LINES:
        warnings.warn(
            f"{where}: {lines} lines, above {WARN_LINES}: is it one concept?",
            UserWarning,
            stacklevel=1,
        )


def test_no_test_server_ships_in_the_library() -> None:
    for path in MODULES.values():
        text = path.read_text("utf-8")
        assert "HTTPServer" not in text, f"{path.relative_to(LIB)} holds a server"
