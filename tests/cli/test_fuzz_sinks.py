"""Hostile names and lines, third round: what reaches a terminal or a page stays inert.

File names, folder names and memo lines are anyone's. Each sink has one helper
(``needlepoint.safetext``): a terminal gets one escaped line per value, Markdown gets text that
cannot become markup or close its code span. Each test names the issue-39 class it guards.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.contamination import context_file, reference
from support.fuzz import SMALL, bad_outcome, run_cli

# What a terminal would act on: C0 controls but the line end and tab, DEL, C1, bidi controls.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
HOSTILE_NAME = "x\nFAKE\x1b[2J\u202e`"


def _inert(text: str) -> None:
    assert UNSAFE.search(text) is None, repr(text)


# Class 3: an error line quotes the name raw.
@pytest.mark.parametrize("command", ["verify", "audit", "audit-run", "results"])
def test_an_error_naming_a_hostile_path_is_one_inert_line(command: str, tmp_path: Path) -> None:
    code, out, err = run_cli([command, str(tmp_path / "x\nFAKE\x1b[2J")])
    assert code == 2 and bad_outcome([command], code, out, err) is None, repr(err)
    assert len(err.splitlines()) == 1 and "FAKE" in err
    _inert(out + err)


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    memo = "KT-4471 ![p](https://evil.example/p.png) <script>alert(1)</script> `x` [l](http://e)"
    context_file(ws, "memory/<img src=x onerror=alert(1)>.md", memo + "\n")
    context_file(ws, f"memory/{HOSTILE_NAME}.md", "also KT-4471 here\n")
    context_file(ws, "notes/plain.md", "nothing\n")
    return ws, reference(tmp_path / "ref.csv", {"R1": "KT-4471"})


# Class 3: contamination overlap prints workspace file names (findings, `not read:` lines).
def test_overlap_prints_hostile_file_names_as_inert_lines(tmp_path: Path) -> None:
    ws, ref = _workspace(tmp_path)
    (ws / "notes" / "bad\x1b]0;t\x07.md").mkdir()  # a folder where a file is expected
    code, out, err = run_cli(
        ["contamination", "overlap", "--reference", str(ref), "--context", str(ws)]
    )
    assert code == 1 and bad_outcome(["contamination"], code, out, err) is None
    assert "FAKE" in out and "KT-4471" in out
    _inert(out + err)
    assert not any(line.startswith("FAKE") for line in (out + err).splitlines())


# Class 4: contamination.md copies context lines and file names; the HTML page renders them.
def test_contamination_md_keeps_memo_lines_and_file_names_inert(tmp_path: Path) -> None:
    from support.contamination import result, results, runs

    ws, ref = _workspace(tmp_path)
    runs_csv = runs(tmp_path / "runs.csv", [("r1", "b", "2025-03-14T11:15:00Z", "XX-0000")])
    res = results(tmp_path / "results.jsonl", [result(answer="x", exact=False)])
    argv = ["contamination", "report", "--reference", str(ref), "--runs", str(runs_csv)]
    argv += ["--results", str(res), "--context", str(ws), "--out", str(tmp_path / "out")]
    code, out, err = run_cli(argv)
    assert code == 1 and bad_outcome(["contamination"], code, out, err) is None
    _inert(out + err)
    md = (tmp_path / "out" / "contamination.md").read_text("utf-8")
    _inert(md.replace("\n", ""))
    assert "KT-4471" in md and "evil.example" in md  # kept, as text
    assert "<script" not in md and "<img" not in md
    import markdown_it

    page = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    assert "<script" not in page and "<img" not in page and "<a " not in page
    assert "<code>x</code>" not in page and "&lt;script&gt;" in page


def _run(prepared: Path, run_dir: Path) -> None:
    argv = ["run", str(prepared), "--allow", "4", "--run-dir", str(run_dir)]
    code, _out, err = run_cli([*argv, "--simulate", "position", "--no-progress"])
    assert code == 0, err


# Class 3 and 4: run-folder names under the evidence root, in `registry` and `analyze`, and in
# summary.md's "other runs on record" (a backtick once broke out of its code span).
def test_hostile_run_folder_names_in_registry_analyze_and_summary(tmp_path: Path) -> None:
    root = tmp_path / "evidence"
    root.mkdir()
    (tmp_path / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    prepared = root / "prepared"
    assert (
        run_cli(["prepare", "--out", str(prepared), "--protocol", str(tmp_path / "small.json")])[0]
        == 0
    )
    _run(prepared, root / "mine")
    odd = "odd` <img src=x onerror=alert(1)> `\n\x1b[2J"
    _run(prepared, root / odd)
    code, out, err = run_cli(["registry", str(root)])
    assert code in (0, 1) and bad_outcome(["registry"], code, out, err) is None, err
    assert "odd" in out
    _inert(out + err)
    assert run_cli(["results", str(root / "mine")])[0] == 0
    argv = ["analyze", str(root / "mine"), "--no-figures", "--out", str(tmp_path / "a")]
    code, out, err = run_cli([*argv, "--evidence-root", str(root)])
    assert code == 0 and bad_outcome(["analyze"], code, out, err) is None, err
    _inert(out + err)
    summary = (tmp_path / "a" / "summary.md").read_text("utf-8")
    line = next(x for x in summary.splitlines() if "odd" in x)
    _inert(line)
    import markdown_it

    page = markdown_it.MarkdownIt("commonmark").render(line)
    assert "<img" not in page and "odd` &lt;img" in page, page
