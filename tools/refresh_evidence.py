"""Re-derive the committed evidence that the analysis writes, after a change to what it says.

    python tools/refresh_evidence.py            # every folder below
    python tools/refresh_evidence.py --only declared-study local-compare

Each folder is re-made with the project's own commands and functions, exactly as its test in
``tests/evidence/`` (or ``tests/analysis/test_record.py``) re-derives it, in a scratch copy laid
out as the original, so the relative paths the files record are the same; then the files that
the analysis, the comparison and the README generator write are copied back. Journals, runs,
prepared folders, pilots and calibrations are never touched: they are the record.

- ``simulated-reference``: `needlepoint pipeline --evidence-root evidence --label
  simulated-reference --date 20261130`, run from the repository with the committed folder set
  aside; every file it writes comes back except each ``provenance.jsonl`` (its time and commit;
  `evidence-diff` does not compare it).
- ``local-smollm2``: analysis.json and summary.md of the notebook analysis (``04-analysis``).
- ``declared-study``: `needlepoint analyze main/run --out main/analysis` in the study folder
  as it was (its prepared folder, run and declarations), then ``tools/study_readme.py``.
- ``local-compare``, ``reference-qwen``: each run's analysis, the comparison and README.md, as
  `needlepoint local-compare` writes them, from the committed journals.

The executed notebooks (.ipynb and .html) of the model folders are not re-executed here: they
need the models. Their data files are what changes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence"
FOLDERS = {
    "simulated-reference": "20261130-simulated-reference",
    "local-smollm2": "20261130-local-smollm2",
    "declared-study": "20261201-declared-study",
    "local-compare": "20261201-local-compare",
    "reference-qwen": "20261204-reference-qwen",
}


@contextmanager
def _cwd(path: Path):
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _notebook_content(path: Path) -> object:
    """An executed notebook without its metadata (times, durations, paths): sources, outputs."""
    import json

    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(c.get("source"), c.get("outputs")) for c in cells]


def _same(src: Path, dst: Path) -> bool:
    """Equal bytes; for an executed notebook, equal sources and outputs (its metadata holds the
    times of the run, which change every time and say nothing)."""
    if not dst.exists():
        return False
    if src.suffix == ".ipynb":
        return _notebook_content(src) == _notebook_content(dst)
    return src.read_bytes() == dst.read_bytes()


def _copy_back(made: Path, committed: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Every file under ``made`` into ``committed`` (same relative path), but ``skip`` names
    and the files that did not change."""
    out = []
    for src in sorted(made.rglob("*")):
        if not src.is_file() or src.name in skip:
            continue
        rel = src.relative_to(made)
        dst = committed / rel
        if not _same(src, dst):
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            out.append(rel.as_posix())
    return out


def simulated_reference(scratch: Path) -> list[str]:
    """The pipeline into ``evidence/`` itself, as the committed folder was made (the notebooks
    record their paths relative to the repository): the committed folder waits in ``scratch``
    meanwhile, and its ``provenance.jsonl`` files are put back."""
    committed = EVIDENCE / FOLDERS["simulated-reference"]
    kept = scratch / "committed"
    shutil.move(committed, kept)
    cmd = [
        sys.executable, "-m", "needlepoint", "pipeline", "--evidence-root", "evidence",
        "--label", "simulated-reference", "--date", "20261130",
    ]  # fmt: skip
    try:
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    except BaseException:
        shutil.rmtree(committed, ignore_errors=True)
        shutil.move(kept, committed)
        raise
    made = scratch / "made"
    shutil.move(committed, made)
    shutil.move(kept, committed)
    return _copy_back(made, committed, skip=("provenance.jsonl",))


def local_smollm2(scratch: Path) -> list[str]:
    from needlepoint.analysis.document import build_document
    from needlepoint.analysis.inputs import from_run
    from needlepoint.analysis.record import to_json
    from needlepoint.analysis.report import record_lines, summary_markdown

    root = EVIDENCE / FOLDERS["local-smollm2"]
    doc = build_document(from_run(root / "run", root / "prepared"))
    record = record_lines([root / "run"], root / "analysis", shown=["run"])
    made = scratch / "analysis"
    made.mkdir()
    (made / "analysis.json").write_bytes(to_json(doc))
    (made / "summary.md").write_text(summary_markdown(doc, record), encoding="utf-8")
    return _copy_back(made, root / "analysis")


def declared_study(scratch: Path) -> list[str]:
    from needlepoint.cli.app import main

    study = EVIDENCE / FOLDERS["declared-study"]
    copy = scratch / "evidence" / study.name
    for part in ("main/prepared", "main/run", "declarations"):
        shutil.copytree(study / part, copy / part)
    with _cwd(copy):
        if main(["analyze", "main/run", "--out", "main/analysis"]) != 0:
            raise SystemExit("declared-study: analyze failed")
    changed = _copy_back(copy / "main" / "analysis", study / "main" / "analysis")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "study_readme.py"), str(study)], check=True, cwd=ROOT
    )
    return [*changed, "README.md (generated blocks)"]


def local_comparison(scratch: Path, name: str) -> list[str]:
    from needlepoint.analysis.document import analyze_run
    from needlepoint.compare.document import compare_runs
    from needlepoint.jsonio import read_json
    from needlepoint.local.compare import MARKER, Entrant, Layout, readme_sections, readme_text
    from needlepoint.run.audit import audit_run

    committed = Layout(EVIDENCE / FOLDERS[name])
    marker = read_json(committed.root / MARKER)
    entrants = [Entrant(m["key"], m["body_profile"]) for m in marker["models"]]
    fresh = Layout(scratch / committed.root.name)
    fresh.root.mkdir()
    shutil.copy2(committed.root / MARKER, fresh.root / MARKER)
    for part in ("prepared", "runs"):
        shutil.copytree(committed.root / part, fresh.root / part)
    for path in sorted(committed.root.iterdir()):  # the notebooks, which README.md lists
        if path.is_file() and path.name != "README.md":
            shutil.copy2(path, fresh.root / path.name)
    for e in entrants:
        analyze_run(fresh.run(e), fresh.analysis(e))
    compare_runs([fresh.run(e) for e in entrants], fresh.comparison)
    audits = {e.key: audit_run(fresh.run(e)).lines() for e in entrants}
    readme = readme_text(fresh, entrants, audits, readme_sections(fresh, entrants, EVIDENCE))
    (fresh.root / "README.md").write_text(readme, encoding="utf-8")
    changed = []
    for part in ("analysis", "comparison"):
        changed += [f"{part}/{p}" for p in _copy_back(fresh.root / part, committed.root / part)]
    readme_path = committed.root / "README.md"
    if readme_path.read_text(encoding="utf-8") != readme:
        readme_path.write_text(readme, encoding="utf-8")
        changed.append("README.md")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(FOLDERS), help="these folders only")
    args = ap.parse_args(argv)
    makers = {
        "simulated-reference": simulated_reference,
        "local-smollm2": local_smollm2,
        "declared-study": declared_study,
        "local-compare": lambda s: local_comparison(s, "local-compare"),
        "reference-qwen": lambda s: local_comparison(s, "reference-qwen"),
    }
    for key in args.only or list(FOLDERS):
        with tempfile.TemporaryDirectory(prefix=f"refresh-{key}-") as tmp:
            changed = makers[key](Path(tmp))
        shown = ", ".join(changed) if changed else "nothing changed"
        print(f"{FOLDERS[key]}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
