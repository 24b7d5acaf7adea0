"""The papermill pipeline: parameter routing, refusals, and a failing cell that is named."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from needlepoint.cli import main
from needlepoint.errors import NeedlepointError
from needlepoint.notebook import pipeline

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _notebook(path: Path, cells: list[str], tags: dict[int, list[str]] | None = None) -> Path:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "needlepoint",
        "display_name": "needlepoint",
        "language": "python",
    }
    nb.cells = [new_code_cell(c) for c in cells]
    for i, t in (tags or {}).items():
        nb.cells[i].metadata["tags"] = t
    nbformat.write(nb, path)
    return path


def test_parameters_route_to_the_notebooks_that_declare_them(tmp_path: Path) -> None:
    a = _notebook(tmp_path / "a.ipynb", ["x = 1\ny = 'a'"], {0: ["parameters"]})
    b = _notebook(tmp_path / "b.ipynb", ["x = 2"], {0: ["parameters"]})
    routed = pipeline.plan_parameters([a, b], {"y": "z", "x": 5})
    assert routed == [(a, {"y": "z", "x": 5}), (b, {"x": 5})]
    with pytest.raises(NeedlepointError, match="no notebook has a parameter named 'nope'"):
        pipeline.plan_parameters([a, b], {"nope": 1})


def test_parse_value() -> None:
    assert pipeline.parse_value("12") == 12
    assert pipeline.parse_value("null") is None
    assert pipeline.parse_value("position") == "position"


def test_every_notebook_has_a_literal_parameters_cell_and_no_outputs() -> None:
    for name in pipeline.NOTEBOOKS:
        path = NOTEBOOKS / f"{name}.ipynb"
        if not path.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].cell_type == "markdown", name
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1, name
        for statement in ast.parse(params[0].source).body:
            assert isinstance(statement, ast.Assign), f"{name}: parameters hold assignments only"
            ast.literal_eval(statement.value)  # raises unless the value is a literal
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), name
        assert nb.metadata["kernelspec"]["name"] == "needlepoint"


def test_bad_label_and_existing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "--label", "Bad Label", "--evidence-root", str(tmp_path)]) == 2
    assert "lower-case letters" in capsys.readouterr().err
    (tmp_path / "20260101-x").mkdir()
    (tmp_path / "20260101-x" / "keep.txt").write_text("keep")
    code = main(
        ["pipeline", "--label", "x", "--date", "20260101", "--evidence-root", str(tmp_path)]
    )
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert (tmp_path / "20260101-x" / "keep.txt").read_text() == "keep"


def test_failed_cell_stops_and_keeps_the_partial_notebook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _notebook(
        nbdir / "01-design.ipynb",
        ["n = 1", "print('before')", "1 / 0", "print('never')"],
        {0: ["parameters"]},
    )
    _notebook(nbdir / "02-freeze.ipynb", ["print('not reached')"])
    with pytest.raises(pipeline.PipelineFailed) as exc:
        pipeline.run_pipeline(
            "t",
            {},
            evidence_root=tmp_path / "ev",
            notebooks_dir=nbdir,
            date="20260101",
            only=["01-design", "02-freeze"],
        )
    message = str(exc.value)
    assert "01-design.ipynb failed in cell" in message and "ZeroDivisionError" in message
    kept = tmp_path / "ev" / "20260101-t" / "01-design.ipynb"
    assert kept.exists() and "before" in kept.read_text()
    assert not (tmp_path / "ev" / "20260101-t" / "02-freeze.ipynb").exists()


def test_html_links_one_shared_stylesheet_and_loads_nothing_else(tmp_path: Path) -> None:
    a = _notebook(tmp_path / "a.ipynb", ["x = 1"])
    b = _notebook(tmp_path / "b.ipynb", ["y = 2"])
    pages = [pipeline.render_html(a).read_text(), pipeline.render_html(b).read_text()]
    sheets = sorted(tmp_path.glob("notebook-*.css"))
    assert len(sheets) == 1 and sheets[0].stat().st_size > 10_000
    for page in pages:
        head = page[: page.index("</head>")]
        assert f'<link rel="stylesheet" href="{sheets[0].name}">' in head
        assert "<style" not in head
        # no CDN script (require.js, MathJax), no module script that file:// would refuse
        assert "<script" not in page and "https://" not in head
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix not in (".ipynb", ".html")) == [
        sheets[0].name
    ]


def test_html_has_a_content_security_policy_that_forbids_scripts_and_network(
    tmp_path: Path,
) -> None:
    """Issue 39, class 4: a memo line or file name that became markup still cannot run a
    script or load from the network: the policy is the head's first element."""
    from needlepoint.notebook.evidence import CSP

    page = pipeline.render_html(_notebook(tmp_path / "a.ipynb", ["x = 1"])).read_text()
    head = page[page.index("<head>") + len("<head>") : page.index("</head>")]
    first, second = head.splitlines()[:2]
    assert first == '<meta charset="utf-8"/>'
    assert second == f'<meta http-equiv="Content-Security-Policy" content="{CSP}"/>'
    assert "<link" not in head.split(second)[0]  # nothing loads before the policy
    rules = dict(r.strip().split(" ", 1) for r in CSP.split(";"))
    assert rules["default-src"] == "'none'" and rules["script-src"] == "'none'"
    for kind in ("img-src", "style-src", "font-src"):
        assert "http" not in rules[kind] and "*" not in rules[kind]


def test_html_title_names_the_notebook_and_its_folder(tmp_path: Path) -> None:
    from nbformat.v4 import new_markdown_cell

    folder = tmp_path / "20261130-offline-x"
    folder.mkdir()
    path = _notebook(folder / "04-analysis.ipynb", ["x = 1"])
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, new_markdown_cell("intro\n# 04 · Analysis\ntext"))
    nbformat.write(nb, path)
    page = pipeline.render_html(path).read_text()
    assert "<title>04 · Analysis — 20261130-offline-x</title>" in page
    bare = pipeline.render_html(_notebook(folder / "05-power.ipynb", ["x = 1"])).read_text()
    assert "<title>05-power — 20261130-offline-x</title>" in bare


def test_html_points_a_markdown_output_s_figures_at_their_folder(tmp_path: Path) -> None:
    """summary.md names its figures beside itself; the page finds them under analysis_dir."""
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "fig.png").write_bytes(b"png")
    (tmp_path / "here.png").write_bytes(b"png")
    path = _notebook(
        tmp_path / "04-analysis.ipynb",
        [
            'analysis_dir = "analysis"\nother = "elsewhere"',
            "from IPython.display import Markdown\n"
            "Markdown('![a](fig.png) ![b](here.png) ![c](gone.png) '\n"
            "         '![d](data:image/png;base64,AA==)')",
        ],
        {0: ["parameters"]},
    )
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, kernel_name="needlepoint", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    nbformat.write(nb, path)
    page = pipeline.render_html(path).read_text()
    assert 'src="analysis/fig.png"' in page  # rebased: it is in the parameter's folder
    assert 'src="here.png"' in page and 'src="gone.png"' in page  # resolves / nowhere: as is
    assert 'src="data:image/png;base64,AA=="' in page


WARNING = "running over TCP without encryption"


def test_the_kernel_runs_encrypted_and_does_not_warn(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import papermill

    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    source = _notebook(nbdir / "01-design.ipynb", ["print('ran')"])
    # the kernel writes the warning to the terminal itself: capfd sees it, as a user would
    papermill.execute_notebook(
        str(source), str(tmp_path / "plain.ipynb"), kernel_name="needlepoint", progress_bar=False
    )
    assert WARNING in capfd.readouterr().err  # the capture would see it
    out = pipeline.run_pipeline(
        "t", {}, evidence_root=tmp_path / "ev", notebooks_dir=nbdir, only=["01-design"]
    )
    assert WARNING not in capfd.readouterr().err
    assert "ran" in (out / "01-design.ipynb").read_text()


@pytest.mark.parametrize(
    ("date", "message"),
    [
        ("../../escaped", "expected YYYYMMDD"),
        ("2026/11/30", "expected YYYYMMDD"),
        ("20261331", "not a calendar date"),
        ("20261130/..", "expected YYYYMMDD"),
    ],
)
def test_a_date_that_could_leave_the_evidence_root_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], date: str, message: str
) -> None:
    argv = ["pipeline", "--label", "x", "--date", date, "--evidence-root", str(tmp_path / "ev")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "ev").exists() and list(tmp_path.iterdir()) == []


def test_evidence_folder_stays_inside_its_root(tmp_path: Path) -> None:
    out = pipeline.evidence_folder(tmp_path, "offline-1", "20261130")
    assert out == tmp_path / "20261130-offline-1"
    with pytest.raises(NeedlepointError, match="label"):
        pipeline.evidence_folder(tmp_path, "../x", "20261130")


def test_the_notebooks_are_found_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside the repository the pipeline finds the repository's notebooks (editable install)."""
    monkeypatch.chdir(tmp_path)
    assert pipeline.notebooks_folder(None) == NOTEBOOKS.resolve()
    (tmp_path / "notebooks").mkdir()
    _notebook(tmp_path / "notebooks" / "01-design.ipynb", ["x = 1"])
    assert pipeline.notebooks_folder(None) == Path("notebooks")  # here first
    assert pipeline.notebooks_folder(str(NOTEBOOKS)) == NOTEBOOKS


def test_no_notebooks_anywhere_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import needlepoint

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(needlepoint, "__file__", str(tmp_path / "site" / "a" / "needlepoint.py"))
    with pytest.raises(NeedlepointError, match=r"run from the repository root, or give --notebo"):
        pipeline.notebooks_folder(None)
    assert main(["pipeline", "--label", "x", "--notebooks", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == (
        f"needlepoint pipeline: error: --notebooks {tmp_path / 'nope'}: no such folder\n"
    )
    assert list(tmp_path.iterdir()) == []  # nothing created, not even runs/


def test_the_default_evidence_root_is_the_ignored_runs_folder() -> None:
    from needlepoint.cli.app import build_parser

    args = build_parser().parse_args(["pipeline", "--label", "x"])
    assert args.evidence_root == pipeline.DEFAULT_ROOT == "runs"
    ignored = (NOTEBOOKS.parent / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "/runs/" in ignored


def test_html_drops_progress_bar_redraws_and_keeps_the_rest(tmp_path: Path) -> None:
    """A bar redraws its line with \\r: a page shows none of it, the run's summary stays."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "needlepoint", "display_name": "needlepoint"}
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text=f"\rrun {i}/3 |██| seq={i}")
        for i in range(4)
    ] + [
        nbformat.v4.new_output("stream", name="stderr", text="\n"),
        nbformat.v4.new_output("stream", name="stdout", text="stopped: complete\n"),
        nbformat.v4.new_output("stream", name="stderr", text="warning: kept\rx\nplain kept\n"),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), cell]
    path = tmp_path / "03-run.ipynb"
    nbformat.write(nb, path)
    before = path.read_bytes()
    page = pipeline.render_html(path).read_text("utf-8")
    assert "seq=" not in page and "██" not in page and "warning: kept" not in page
    assert "stopped: complete" in page and "plain kept" in page
    assert path.read_bytes() == before  # the evidence notebook itself is untouched
