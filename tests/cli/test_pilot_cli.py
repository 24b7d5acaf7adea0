"""`needlepoint pilot` and `calibrate` on bad input: one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.pilots import design_file, simulated_pilot

from needlepoint.cli.app import main


@pytest.fixture(scope="module")
def pilot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    simulated_pilot(root / "pilot", design_file(root))
    return root / "pilot"


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 2) -> str:
    capsys.readouterr()
    assert main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--lengths", "12,x"], "--lengths '12,x': expected integers"),
        (["--lengths", "12,12"], "a value repeats"),
        (["--lengths", "8"], "a background needs at least 12 records"),
        (["--lengths", "12", "--cases", "6"], "must be a multiple of the 4 orders"),
    ],
)
def test_pilot_refuses_bad_shapes(tmp_path: Path, capsys, extra: list[str], message: str) -> None:
    argv = ["pilot", "--out", str(tmp_path / "p"), "--allow", "9", "--simulate", "perfect"]
    argv += ["--lengths", "12", "--cases", "4"] if "--lengths" not in extra else ["--cases", "4"]
    line = _fails([*argv, *extra], capsys)
    assert message in line
    assert not (tmp_path / "p").exists()


def test_pilot_refuses_a_missing_or_broken_protocol(tmp_path: Path, capsys) -> None:
    base = ["pilot", "--out", str(tmp_path / "p"), "--lengths", "12", "--cases", "4"]
    base += ["--allow", "9", "--simulate", "perfect"]
    assert "file not found" in _fails([*base, "--protocol", str(tmp_path / "nope.json")], capsys)
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    assert "broken JSON" in _fails([*base, "--protocol", str(tmp_path / "bad.json")], capsys)


def test_pilot_prints_the_seed_and_the_next_step(tmp_path: Path, capsys) -> None:
    argv = ["pilot", "--protocol", str(design_file(tmp_path)), "--out", str(tmp_path / "p")]
    argv += ["--lengths", "12", "--cases", "4", "--allow", "32", "--simulate", "perfect"]
    assert main([*argv, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "held-out materials seed" in out and "next: needlepoint calibrate" in out


@pytest.mark.parametrize(
    ("band", "message"),
    [
        ("0.9,0.6", "need 0 <= LOW < HIGH <= 1"),
        ("0.6", "expected LOW,HIGH"),
        ("a,b", "expected LOW,HIGH"),
        ("0.5,1.5", "need 0 <= LOW < HIGH <= 1"),
        ("nan,0.9", "need 0 <= LOW < HIGH <= 1"),
    ],
)
def test_calibrate_refuses_a_bad_band(pilot_dir: Path, tmp_path: Path, capsys, band, message):
    line = _fails(
        ["calibrate", str(pilot_dir), "--out", str(tmp_path / "v.json"), "--band", band], capsys
    )
    assert message in line


def _broken(pilot_dir: Path, tmp_path: Path, edit) -> Path:
    copy = Path(shutil.copytree(pilot_dir, tmp_path / "copy"))
    value = json.loads((copy / "pilot.json").read_text("utf-8"))
    text = edit(value)
    (copy / "pilot.json").write_text(text if isinstance(text, str) else json.dumps(value))
    return copy


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda v: "{not json", "broken JSON"),
        (lambda v: v.update(version=2), "needlepoint-pilot version 2 is not supported"),
        (lambda v: v.update(format="other"), "format 'other' is not 'needlepoint-pilot'"),
        (lambda v: v.update(cases="4"), "field cases: expected int"),
        (lambda v: v.update(pilot=False), "field pilot: expected true"),
        (lambda v: v.pop("lengths"), "field lengths: missing"),
        (lambda v: v.update(extra=1), "field extra: unknown field"),
    ],
)
def test_calibrate_refuses_a_broken_pilot_record(
    pilot_dir: Path, tmp_path: Path, capsys, edit, message
) -> None:
    copy = _broken(pilot_dir, tmp_path, edit)
    line = _fails(["calibrate", str(copy), "--out", str(tmp_path / "v.json")], capsys)
    assert message in line


def test_calibrate_refuses_what_is_not_a_pilot(tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "v.json")
    assert "no such pilot folder" in _fails(
        ["calibrate", str(tmp_path / "none"), "--out", out], capsys
    )
    (tmp_path / "run").mkdir()
    assert "not a pilot folder" in _fails(
        ["calibrate", str(tmp_path / "run"), "--out", out], capsys
    )


def test_calibrate_never_overwrites(pilot_dir: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "v.json").write_text("{}")
    assert "never overwrites" in _fails(
        ["calibrate", str(pilot_dir), "--out", str(tmp_path / "v.json")], capsys
    )
    missing = str(tmp_path / "no" / "v.json")
    assert "no such folder" in _fails(["calibrate", str(pilot_dir), "--out", missing], capsys)


def test_calibrate_that_recommends_nothing_exits_1_and_writes_no_protocol(
    pilot_dir: Path, tmp_path: Path, capsys
) -> None:
    argv = ["calibrate", str(pilot_dir), "--out", str(tmp_path / "v.json"), "--band", "0,0.05"]
    assert main([*argv, "--report", str(tmp_path / "cal.json")]) == 1
    out = capsys.readouterr().out
    assert "NO PROTOCOL WRITTEN: no length qualifies" in out
    assert "length 12: end" in out and "length 24: end" in out
    assert not (tmp_path / "v.json").exists() and (tmp_path / "cal.json").is_file()


def test_calibrate_writes_a_protocol_ready_for_prepare(pilot_dir: Path, tmp_path: Path, capsys):
    argv = ["calibrate", str(pilot_dir), "--out", str(tmp_path / "v.json"), "--effect", "0.3"]
    assert main([*argv, "--simulations", "200", "--max-cases", "64"]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED pilot - not a model result" in out and "recommended: v7" in out
    assert (
        main(["prepare", "--protocol", str(tmp_path / "v.json"), "--out", str(tmp_path / "p")]) == 0
    )
    assert main(["verify", str(tmp_path / "p")]) == 0
