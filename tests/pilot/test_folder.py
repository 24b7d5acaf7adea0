"""A pilot folder: marked three ways, resumable, and never analysed as a main run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.pilots import design_file, simulated_pilot

from needlepoint.analysis.inputs import from_results_csv, from_run
from needlepoint.cli.app import main
from needlepoint.design.prepared import prepare
from needlepoint.design.protocol import is_pilot
from needlepoint.errors import NeedlepointError
from needlepoint.pilot.folder import read_design
from needlepoint.pilot.record import read_pilot_record
from needlepoint.run.audit import audit_run
from needlepoint.run.folder import read_run_record


@pytest.fixture(scope="module")
def pilot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One simulated pilot of the small design; treat as read-only."""
    root = tmp_path_factory.mktemp("pilot")
    simulated_pilot(root / "pilot", design_file(root))
    return root / "pilot"


def test_a_pilot_folder_is_marked_three_ways(pilot_dir: Path) -> None:
    record = read_pilot_record(pilot_dir)
    assert record.pilot is True and record.protocol_version == 6 and record.design.version == 5
    prepared = json.loads((pilot_dir / "prepared" / "protocol.json").read_text("utf-8"))
    assert is_pilot(prepared) and prepared["rationale"]["design"]["version"] == 5
    assert read_run_record(pilot_dir / "run").extra == {"pilot": True}
    assert (pilot_dir / "run" / "results.csv").is_file()
    assert audit_run(pilot_dir / "run").ok
    assert read_design(pilot_dir, record)["lengths"] == [12]


def test_analyze_refuses_a_pilot_by_run_and_by_table(pilot_dir: Path, capsys) -> None:
    with pytest.raises(NeedlepointError, match=r"is a pilot .*run\.json extra\.pilot"):
        from_run(pilot_dir / "run")
    with pytest.raises(NeedlepointError, match=r"is a pilot .*protocol's rationale"):
        from_results_csv(pilot_dir / "run" / "results.csv", pilot_dir / "prepared")
    assert from_run(pilot_dir / "run", pilot=True).simulation is True
    capsys.readouterr()
    assert main(["analyze", str(pilot_dir / "run"), "--no-figures"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never analysed as a main run" in err[0]


def test_a_main_run_is_not_read_as_a_pilot(tmp_path: Path) -> None:
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    prepared = prepare(tmp_path / "prep", design_file(tmp_path))
    run_protocol(
        prepared,
        tmp_path / "run",
        RunOptions(allow=8, simulate="perfect", progress="off", fsync=False),
    )
    with pytest.raises(NeedlepointError, match="is not a pilot"):
        from_run(tmp_path / "run", pilot=True)


def test_running_again_resumes_and_never_resends(tmp_path: Path) -> None:
    design = design_file(tmp_path)
    first = simulated_pilot(tmp_path / "p", design, allow=20)
    assert first.summary.stop_reason == "allowance_spent" and not first.resumed
    second = simulated_pilot(tmp_path / "p", design, allow=64)
    assert second.resumed and second.summary.attempts_this_session == 44
    assert second.summary.stop_reason == "complete"
    third = simulated_pilot(tmp_path / "p", design, allow=64)
    assert third.summary.attempts_this_session == 0


def test_another_shape_or_design_is_refused(pilot_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(pilot_dir, tmp_path / "p"))
    design = tmp_path / "d"
    design.mkdir()
    with pytest.raises(NeedlepointError, match="lengths 12,24 and 4 cases"):
        simulated_pilot(copy, design_file(design), lengths=(12,))
    with pytest.raises(NeedlepointError, match="calibrates another design"):
        simulated_pilot(copy, design_file(design, max_tokens=7))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(NeedlepointError, match=r"has no pilot\.json"):
        simulated_pilot(tmp_path / "busy", design_file(design))


def test_a_pilot_of_a_pilot_is_refused(pilot_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(NeedlepointError, match="is a pilot's protocol"):
        simulated_pilot(tmp_path / "p", pilot_dir / "prepared" / "protocol.json")


def test_an_edited_design_json_is_refused(pilot_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(pilot_dir, tmp_path / "p"))
    design = json.loads((copy / "design.json").read_text("utf-8"))
    design["description"] = "edited"
    (copy / "design.json").write_text(json.dumps(design), encoding="utf-8")
    with pytest.raises(NeedlepointError, match="differs from the design recorded"):
        read_design(copy, read_pilot_record(copy))


def test_a_failing_check_before_the_run_sends_nothing(tmp_path: Path) -> None:
    from needlepoint.pilot.folder import run_pilot
    from needlepoint.run.options import RunOptions

    seen: list[Path] = []

    def refuse(prepared: Path) -> None:
        seen.append(prepared)
        raise NeedlepointError("a prompt does not fit")

    options = RunOptions(allow=8, simulate="perfect", progress="off", fsync=False)
    with pytest.raises(NeedlepointError, match="does not fit"):
        run_pilot(design_file(tmp_path), tmp_path / "p", (12,), 4, options, before_run=refuse)
    assert seen == [tmp_path / "p" / "prepared"]
    # Refused before its first request: the pilot folder it made is gone (issue 22).
    assert not (tmp_path / "p").exists()


def test_compare_refuses_a_pilot(pilot_dir: Path, tmp_path: Path, capsys) -> None:
    from needlepoint.compare.document import load_run

    with pytest.raises(NeedlepointError, match="is a pilot"):
        load_run(pilot_dir / "run")
    capsys.readouterr()
    argv = ["compare", str(pilot_dir / "run"), "--out", str(tmp_path / "c"), "--allow-simulated"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a pilot" in err[0]
    assert not (tmp_path / "c").exists()
