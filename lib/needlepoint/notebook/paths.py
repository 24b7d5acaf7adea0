"""Where notebooks read and write, so re-executing committed evidence never overwrites it.

Notebooks name their folders with relative paths (``prepared``, ``run``...). Normally these
resolve against the working directory, the evidence folder. With ``NEEDLEPOINT_OUTPUT_ROOT``
set (nbval in the test command sets it), writes go under that root instead, and reads prefer
what this execution wrote there, falling back to the committed copy.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "NEEDLEPOINT_OUTPUT_ROOT"


def _root() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def write_path(rel: str | os.PathLike[str]) -> Path:
    """The path to write a relative output to (redirected under the root when set)."""
    path, root = Path(rel), _root()
    if path.is_absolute() or root is None:
        return path
    return root / path


def read_path(rel: str | os.PathLike[str]) -> Path:
    """The path to read a relative input from: this execution's output first, then the copy."""
    path, root = Path(rel), _root()
    if path.is_absolute() or root is None:
        return path
    redirected = root / path
    return redirected if redirected.exists() else path
