"""run.json and the journal's session record: typed records whose bytes are the evidence's."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from support.runner import records

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes
from needlepoint.run.folder import RUN_NAME, json_bytes, read_run_record
from needlepoint.run.loop import run_protocol
from needlepoint.run.run_record import RunRecord, SessionRecord
from needlepoint.run.settings import DEFAULT_TIMEOUT_S, RunOptions, check_settings
from needlepoint.run.simulate import PositionParams
from needlepoint.schema import from_plain, to_plain

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
RUNS = [EVIDENCE / f / "run" for f in ("20261130-simulated-reference", "20261130-local-smollm2")]
ENVELOPE = ("format", "n", "prev", "type")


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.parent.name)
def test_committed_run_json_reads_back_to_the_same_bytes(run_dir: Path) -> None:
    record = read_run_record(run_dir)
    assert isinstance(record, RunRecord)
    assert json_bytes(to_plain(record)) == (run_dir / RUN_NAME).read_bytes()


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.parent.name)
def test_committed_session_records_round_trip(run_dir: Path) -> None:
    sessions = [r for r in records(run_dir) if r["type"] == "session"]
    assert sessions
    for line in sessions:
        fields = {k: v for k, v in line.items() if k not in ENVELOPE}
        session = from_plain(SessionRecord, fields, "session")
        assert canonical_bytes(to_plain(session)) == canonical_bytes(fields)


def test_dropped_tail_is_written_only_when_there_is_one() -> None:
    base = SessionRecord(1, "t", "a" * 64, "0.1.0", 8, 20.0, None, 120.0, 240.0, None, None, None)
    assert "dropped_tail_sha256" not in base.to_plain()
    torn = dataclasses.replace(base, dropped_tail_sha256="b" * 64)
    assert torn.to_plain()["dropped_tail_sha256"] == "b" * 64
    assert from_plain(SessionRecord, torn.to_plain(), "session") == torn


def test_simulated_run_json_is_built_from_the_options(reference_dir: Path, tmp_path: Path) -> None:
    options = RunOptions(allow=3, simulate="position", sim_params={"p_edge": 0.5}, progress="off")
    run_protocol(reference_dir, tmp_path / "run", options)
    record = read_run_record(tmp_path / "run")
    assert record.simulation and record.simulate is not None
    assert record.simulate.params == PositionParams(p_edge=0.5)
    assert record.allow == 3 and record.timeout_s == DEFAULT_TIMEOUT_S
    assert record.deadline_s == 2 * DEFAULT_TIMEOUT_S and record.extra == {}


def test_check_settings_takes_one_options_record(reference_dir: Path) -> None:
    options = RunOptions(allow=5, simulate="perfect", run_meta={"note": "x"}, fsync=False)
    s = check_settings(reference_dir, options)
    assert (s.allow, s.simulate, s.run_meta, s.fsync, s.progress) == (
        5,
        "perfect",
        {"note": "x"},
        False,
        "auto",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.allow = 6  # type: ignore[misc]
    with pytest.raises(NeedlepointError, match="--allow must be a positive integer"):
        check_settings(reference_dir, RunOptions(allow=0, simulate="perfect"))


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(RUNS[0], tmp_path / "run"))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d.update(format=2), r"run\.json: field format: expected 1"),
        (lambda d: d.pop("allow"), r"run\.json: field allow: missing"),
        (lambda d: d.update(git={}), r"run\.json: field git: unknown field"),
        (lambda d: d.update(allow="128"), r"run\.json: field allow: expected int"),
        (lambda d: d["simulate"].update(mode=None), r"field simulate\.mode: expected str"),
        (lambda d: d["cost"].pop("cap"), r"field cost\.cap: missing"),
    ],
)
def test_malformed_run_json_is_refused_in_one_line(run_copy: Path, edit, message: str) -> None:
    value = json.loads((run_copy / RUN_NAME).read_text("utf-8"))
    edit(value)
    (run_copy / RUN_NAME).write_bytes(json_bytes(value))
    with pytest.raises(NeedlepointError, match=message) as err:
        read_run_record(run_copy)
    assert "\n" not in str(err.value)
