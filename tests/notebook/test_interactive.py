"""Interactive use: notebooks run in `notebooks/` (as Jupyter runs them) write only under work/.

Jupyter starts a notebook's kernel in the notebook's own folder. The test executes copies of
02-freeze and 03-run there, in order, each in its own kernel, and checks that every output
landed under the git-ignored `work/` folder and that 03 read what 02 wrote there. It copies the
sources only: a `work/` left in the checkout by the README's interactive route is not copied.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from needlepoint.notebook import paths
from needlepoint.notebook.pipeline import kernel_config, quiet_manager_class

ROOT = Path(__file__).resolve().parents[2]


def test_notebooks_run_in_the_sources_folder_write_under_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(paths.ENV, raising=False)
    folder = tmp_path / "notebooks"
    # what git tracks there: the notebooks and the marker, never an interactive work/ folder
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns(paths.WORK_DIR))
    before = sorted(p.name for p in folder.iterdir())
    assert paths.SOURCES_MARKER in before and paths.WORK_DIR not in before
    for name in ("02-freeze", "03-run"):
        nb = nbformat.read(folder / f"{name}.ipynb", as_version=4)
        where = {"metadata": {"path": str(folder)}}  # the kernel's cwd, as Jupyter sets it
        NotebookClient(
            nb,
            kernel_name="needlepoint",
            resources=where,
            config=kernel_config(),  # encrypted channels, as Jupyter Lab's: no TCP warning
            kernel_manager_class=quiet_manager_class(),
        ).execute()
    assert sorted(p.name for p in folder.iterdir()) == sorted([*before, paths.WORK_DIR])
    work = folder / paths.WORK_DIR
    assert sorted(p.name for p in work.iterdir()) == ["declarations", "prepared", "run"]
    assert (work / "prepared" / "manifest.json").is_file()
    assert (work / "declarations" / "run-declaration.json").is_file()  # 03 declared first
    assert (work / "run" / "results.csv").is_file()  # 03 found 02's prepared folder under work/
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert f"/notebooks/{paths.WORK_DIR}/" in ignored
