"""A study README's tables are derived from the folder's files: marked blocks are rewritten in
place, a missing marker is refused, and each table says what the files say."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.study import readme

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "evidence" / "20261130-simulated-reference"


def test_fill_rewrites_only_the_marked_blocks() -> None:
    text = "\n".join(
        ["# study", readme.START.format("a"), "old a", readme.END.format("a"), "hand-written"]
    )
    text += "\n" + "\n".join([readme.START.format("b"), "old b", readme.END.format("b")])
    out = readme.fill(text, {"a": ["new a"]})
    assert "new a" in out and "old a" not in out and "old b" in out and "hand-written" in out
    assert readme.marked(out)["a"].splitlines()[1] == "new a"
    assert readme.fill(out, {"a": ["new a"]}) == out


def test_a_block_without_its_markers_is_refused() -> None:
    with pytest.raises(NeedlepointError, match="no marked block for pilots"):
        readme.fill("# study\n", {"pilots": ["x"]})


def test_the_run_table_counts_what_the_journal_holds() -> None:
    lines = readme.runs_table(REFERENCE, ["run"])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[0] == "`run`" and cells[2] == "128 of 128"
    correct, wrong = int(cells[3]), int(cells[4])
    results = (REFERENCE / "run" / "results.csv").read_text(encoding="utf-8")
    assert correct == results.count(",correct,") and wrong == results.count(",error,")
    assert cells[-1].startswith("`432a20c6ea98")  # the run's declaration, from its first record


def test_declarations_are_listed_with_their_full_hash() -> None:
    lines = readme.declarations_table(REFERENCE)
    assert len(lines) == 2 + 3
    assert any(
        "`432a20c6ea98493b534e12c064bd65d42d8fbea72a8210c306763901baacaf81`" in x for x in lines
    )


def test_machine_and_load_come_from_provenance_and_say_when_unrecorded(tmp_path: Path) -> None:
    from needlepoint.run.folder import read_provenance

    (tmp_path / "provenance.jsonl").write_text(
        '{"event": "session_start", "platform": "Linux", "cpus": 2, "load_average": [1.5, 1, 1]}\n'
        "[1, 2]\n{not json\n"
        '{"event": "session_end", "load_average": [2.25, 2, 2]}\n'
        '{"event": "session_start", "platform": "Linux", "cpus": 2, "load_average": [0.5, 1, 1]}\n'
        '{"event": "session_start", "platform": "Darwin", "cpus": 8, "load_average": null}\n',
        encoding="utf-8",
    )
    lines = read_provenance(tmp_path)
    assert len(lines) == 4  # a line that is not a JSON object is skipped
    assert readme.machine_text(lines) == "Linux, 2 CPUs; Darwin, 8 CPUs"
    assert readme.load_text(lines, "session_start") == "1.50, 0.50"
    assert readme.load_text(lines, "session_end") == "2.25"
    assert read_provenance(tmp_path / "absent") == []
    assert readme.machine_text([]) == readme.load_text([], "session_end") == "not recorded"
