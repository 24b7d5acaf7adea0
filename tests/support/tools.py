"""Load the scripts under tools/ (plain scripts, not a package) as modules, for their tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/ -> the repository


def load_tool(name: str):
    """Import tools/NAME.py once, with tools/ importable for its sibling modules."""
    if name in sys.modules:
        return sys.modules[name]
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
