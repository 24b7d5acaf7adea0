"""notebooks/06-contamination.ipynb is committed clean and parameterised as papermill expects."""

from __future__ import annotations

import ast
import json
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "06-contamination.ipynb"


def load() -> dict:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def test_kernel_and_clean_source() -> None:
    nb = load()
    assert nb["metadata"]["kernelspec"] == {
        "name": "needlepoint",
        "display_name": "needlepoint",
        "language": "python",
    }
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert nb["cells"][0]["cell_type"] == "markdown"


def test_parameters_cell_holds_relative_literals_only() -> None:
    cells = [c for c in load()["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(cells) == 1
    tree = ast.parse("".join(cells[0]["source"]))
    values = {}
    for node in tree.body:
        assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        values[node.targets[0].id] = node.value.value
    assert set(values) == {"workspace", "out_dir"}
    assert all(not Path(v).is_absolute() and ".." not in Path(v).parts for v in values.values())


def test_code_cells_call_the_library_without_clocks() -> None:
    source = "".join("".join(c["source"]) for c in load()["cells"] if c["cell_type"] == "code")
    for forbidden in ("datetime", "time.", "now(", "resolve(", "abspath", "getcwd"):
        assert forbidden not in source
    assert "build_synthetic_workspace" in source and "build_report" in source
