"""Regenerate the committed evidence's notebooks, HTML pages and derived files with this code.

    .venv/bin/python tools/regenerate_evidence.py                  # every folder in evidence/
    .venv/bin/python tools/regenerate_evidence.py evidence/FOLDER  # one folder

What each committed folder gets:

- ``20261130-simulated-reference``: the whole offline pipeline is run again into a scratch
  folder (``needlepoint pipeline --label simulated-reference --date 20261130``) and replaces the
  folder's files; `make test` then reproduces it byte for byte (nbval + evidence-diff).
- every other folder with executed notebooks: the analysis and comparison notebooks, which
  read the folder's runs, are executed again from ``notebooks/`` with the parameters papermill
  recorded in them, in their folder, so each page shows what this code derives from those runs
  (the analysis format of its ``summary.md``, the grid of its comparison). Every other page is
  rendered again from its executed notebook (which drops progress-bar redraws); the freeze and
  run notebooks could not be executed again anyway (one would prepare over a frozen folder,
  the other send requests).
- a local comparison folder (``local-compare.json``): its README.md is written again from its
  comparison, runs and audits, as `needlepoint local-compare` writes it.

Nothing is sent anywhere; the live runs' journals are only read.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence"
REFERENCE = "20261130-simulated-reference"
# Notebooks that read a folder's runs and derive its analysis and comparison: executed again,
# so their pages show what this code derives (the others' data stay as committed).
RE_EXECUTED = ("04-analysis", "07-compare")


def regenerate_reference(folder: Path) -> None:
    """Run the offline pipeline into ``folder`` again, as it was made: the committed copy is
    moved aside first and put back if the pipeline fails."""
    from needlepoint.notebook.pipeline import run_pipeline

    label, date = folder.name[9:], folder.name[:8]
    with tempfile.TemporaryDirectory() as scratch:
        aside = Path(scratch) / folder.name
        shutil.move(folder, aside)
        try:
            # relative paths, from the repository root: papermill records them in each notebook
            run_pipeline(label, {}, evidence_root=folder.parent.relative_to(ROOT), date=date)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.move(aside, folder)
            raise


def source_of(notebook: Path) -> str:
    """The notebook of ``notebooks/`` an executed one was made from (papermill records it)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    recorded = nb.metadata.get("papermill", {}).get("input_path") or notebook.name
    return Path(str(recorded)).stem


def regenerate_folder(folder: Path, say) -> None:
    """Execute again what may be executed, render the rest again, rewrite a local README."""
    import nbformat

    from needlepoint.notebook.evidence import render_html
    from needlepoint.notebook.pipeline import ensure_kernel, execute_notebook, notebooks_folder

    sources = notebooks_folder(Path("notebooks"))
    folder = folder.relative_to(ROOT)  # papermill records the paths it is given: relative ones
    for notebook in sorted(folder.glob("*.ipynb")):
        source = source_of(notebook)
        if source in RE_EXECUTED:
            nb = nbformat.read(notebook, as_version=4)
            params = dict(nb.metadata.get("papermill", {}).get("parameters") or {})
            ensure_kernel()
            execute_notebook(sources / f"{source}.ipynb", notebook, params, folder)
            say(f"{folder.name}/{notebook.name}: executed again ({source}, {params or 'defaults'})")
        else:
            render_html(notebook)
            say(f"{folder.name}/{notebook.name}: page rendered again")
    rewrite_local_readme(folder.resolve(), say)


def rewrite_local_readme(folder: Path, say) -> None:
    """A local comparison's README.md, from its comparison, runs and audits."""
    from needlepoint.jsonio import read_json
    from needlepoint.local.compare import MARKER, Entrant, Layout, readme_sections, readme_text
    from needlepoint.run.audit import audit_run

    layout = Layout(folder)
    if not (folder / MARKER).is_file() or not layout.comparison.is_dir():
        return
    marker = read_json(folder / MARKER)
    entrants = [Entrant(m["key"], m["body_profile"]) for m in marker["models"]]
    audits = {e.key: audit_run(layout.run(e)).lines() for e in entrants}
    text = readme_text(layout, entrants, audits, readme_sections(layout, entrants, EVIDENCE))
    (folder / "README.md").write_text(text, encoding="utf-8")
    say(f"{folder.name}/README.md: written again")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help="default: every folder in evidence/")
    args = ap.parse_args(argv)
    folders = [p.resolve() for p in args.folders] or sorted(
        p for p in EVIDENCE.iterdir() if p.is_dir()
    )
    os.chdir(ROOT)
    for folder in folders:
        if folder.name == REFERENCE:
            regenerate_reference(folder)
            print(f"{folder.name}: the offline pipeline run again")
        elif any(folder.glob("*.ipynb")) or (folder / "local-compare.json").is_file():
            regenerate_folder(folder, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
