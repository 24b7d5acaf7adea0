"""Simulated runs: labelled, reproducible, never sleeping, and covering every failure kind."""

from __future__ import annotations

import json
import time

import pytest
from support.runner import kinds, of_type

from needlepoint.errors import NeedlepointError
from needlepoint.run.audit import audit_run
from needlepoint.run.options import RunOptions
from needlepoint.run.results import derive
from needlepoint.run.runner import run_protocol
from needlepoint.run.scoring import PROTOCOL_FAILURE_KINDS


def sim(prepared, run, mode, allow=128, **kw):
    kw.setdefault("progress", "off")
    options = RunOptions(allow=allow, simulate=mode, fsync=False, **kw)
    return run_protocol(prepared, run, options)


def test_perfect_run_is_labelled_and_never_sleeps(reference_dir, tmp_path):
    run = tmp_path / "run"
    start = time.monotonic()
    summary = sim(reference_dir, run, "perfect")
    assert time.monotonic() - start < 20, "128 x 20 s of spacing must be simulated, not slept"
    assert summary.simulation and summary.counts == {"correct": 128}
    assert summary.lines()[0].startswith("SIMULATION")
    gaps = [a["gap_s"] for a in of_type(run, "attempt")]
    assert gaps[0] is None and set(gaps[1:]) == {20.0}
    assert json.loads((run / "run.json").read_text())["simulation"] is True
    assert {row["simulation"] for row in derive(run).rows} == {"true"}
    assert audit_run(run).ok


def test_position_model_is_reproducible_and_resume_invariant(reference_dir, tmp_path):
    one = sim(reference_dir, tmp_path / "one", "position")
    two = sim(reference_dir, tmp_path / "two", "position")
    journal = "journal.jsonl"
    assert (tmp_path / "one" / journal).read_bytes() == (tmp_path / "two" / journal).read_bytes()
    assert one.journal_sha256 == two.journal_sha256
    sim(reference_dir, tmp_path / "split", "position", allow=40)
    sim(reference_dir, tmp_path / "split", "position", allow=128)
    cols = ("seq", "status", "kind", "response_text")
    whole = [tuple(r[c] for c in cols) for r in derive(tmp_path / "one").rows]
    split = [tuple(r[c] for c in cols) for r in derive(tmp_path / "split").rows]
    assert whole == split


def test_position_parameters_drive_the_outcomes(reference_dir, tmp_path):
    params = {
        "p_edge": 1.0,
        "p_middle": 0.0,
        "high_similarity_middle_drop": 0.0,
        "high_similarity_edge_drop": 0.0,
        "length_drop_per_100_records": 0.0,
        "p_refusal": 1.0,
    }
    run = tmp_path / "run"
    sim(reference_dir, run, "position", sim_params=params)
    for row in derive(run).rows:
        assert (row["status"] == "correct") == (row["condition"] != "M"), row
    recorded = json.loads((run / "run.json").read_text())["simulate"]["params"]
    assert recorded["p_middle"] == 0.0 and recorded["seed"] > 0
    with pytest.raises(NeedlepointError, match="unknown field"):
        sim(reference_dir, tmp_path / "bad", "position", sim_params={"p_midle": 0.5})
    with pytest.raises(NeedlepointError, match="only to --simulate position"):
        sim(reference_dir, tmp_path / "bad", "perfect", sim_params={"p_middle": 0.5})


def test_faulty_run_injects_every_failure_kind(reference_dir, tmp_path):
    run = tmp_path / "run"
    reasons = []
    for _ in range(6):
        summary = sim(reference_dir, run, "faulty", input_rate=1.0, output_rate=2.0)
        reasons.append((summary.stop_reason, summary.stop_detail))
        if summary.stop_reason == "complete":
            break
    assert [r for r, _ in reasons[:3]] == ["stop_status"] * 3
    assert [d.split()[1] for _, d in reasons[:3]] == ["429", "401", "403"]
    seen = {k for _, _, k in kinds(run)}
    # Not simulated: interrupted needs a dying process; body_too_large and json_too_large need
    # megabytes per outcome (the loopback tests serve them); uninterpretable guards against
    # errors no one foresaw.
    unsimulated = {
        "indeterminate_interrupted",
        "body_too_large",
        "json_too_large",
        "uninterpretable",
        # A repeated key is a body json.dumps never writes; the loopback tests serve it.
        "json_duplicate_key",
    }
    missing = set(PROTOCOL_FAILURE_KINDS) - seen - unsimulated
    assert not missing
    assert any(o["cost"] is None and o["http_status"] == 200 for o in of_type(run, "outcome"))
    assert audit_run(run).ok


def test_simulated_and_live_runs_never_pool(reference_dir, tmp_path):
    run = tmp_path / "run"
    sim(reference_dir, run, "perfect", allow=2)
    with pytest.raises(NeedlepointError, match="field simulate"):
        sim(reference_dir, run, "position", allow=4)


def test_deterministic_progress_output(reference_dir, tmp_path, capsys):
    outputs = []
    for name in ("a", "b"):
        sim(reference_dir, tmp_path / name, "position", allow=20, progress="deterministic")
        outputs.append(capsys.readouterr().err)
    assert outputs[0] == outputs[1]
    assert "SIMULATION 20/128" in outputs[0] and "seq=20" in outputs[0]
    assert "it/s" not in outputs[0] and "req/s" not in outputs[0] and "00:" not in outputs[0]
