"""Where notebooks read and write, so that running them never writes where it should not.

Notebooks name their folders with relative paths (``prepared``, ``run``...). Under
``needlepoint pipeline`` these resolve against the working directory, the evidence folder. Two
cases redirect them under a root instead:

- ``NEEDLEPOINT_OUTPUT_ROOT`` set: writes go under that root, and reads prefer what this
  execution wrote there, falling back to the committed copy (re-executing committed evidence
  without overwriting it).
- the working directory holds ``SOURCES_MARKER``, as the repository's ``notebooks/`` does:
  Jupyter runs a notebook in its own folder, so interactive runs there read and write under
  ``WORK_DIR`` (``notebooks/work/``, which git ignores) instead of beside the sources.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "NEEDLEPOINT_OUTPUT_ROOT"
SOURCES_MARKER = ".needlepoint-sources"
WORK_DIR = "work"


def _root() -> tuple[Path, bool] | None:
    """The redirection root, and whether reads may fall back to the unredirected path."""
    value = os.environ.get(ENV)
    if value:
        return Path(value), True
    if Path(SOURCES_MARKER).is_file():
        # nothing beside the sources is an input: reading there would only mislead
        return Path(WORK_DIR), False
    return None


def write_path(rel: str | os.PathLike[str]) -> Path:
    """The path to write a relative output to (redirected under the root when set)."""
    path, root = Path(rel), _root()
    if path.is_absolute() or root is None:
        return path
    return root[0] / path


def read_path(rel: str | os.PathLike[str]) -> Path:
    """The path to read a relative input from: this execution's output first, then the copy."""
    path, root = Path(rel), _root()
    if path.is_absolute() or root is None:
        return path
    redirected = root[0] / path
    return redirected if redirected.exists() or not root[1] else path
