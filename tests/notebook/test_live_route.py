"""Your model in every route: a live pipeline for a model the reference design does not name.

`needlepoint pipeline -p transport live -p model M -p base_url URL` used to pass 01 and 02 and
then stop in 03 on the model frozen by 02 (the reference's). 02-freeze now takes the model (and
body profile), 03 runs it, and 07 and 08, which would make simulated runs beside the live one,
are skipped with one line each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.loopback import LoopbackServer, answers_from
from support.runner import KEY_ENV, SENTINEL

from needlepoint.cli.app import main
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.notebook.pipeline import live_skip

MODEL = "my-model"


def test_a_live_pipeline_runs_your_model_through_every_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The answers the server gives: right for every request of the model variant 02 freezes.
    p = load_prepared(prepare(tmp_path / "expected", model=MODEL))
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    with LoopbackServer(answers_from(p.answer_key, p.bodies), models=[MODEL]) as server:
        args = ["pipeline", "--label", "mine", "--date", "20260101"]
        args += ["--evidence-root", str(tmp_path / "runs")]
        params = {
            "transport": "live",
            "model": MODEL,
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "min_gap_s": "0",
            "override_reason": "loopback test server",
            "simulations": "40",
        }
        for name, value in params.items():
            args += ["-p", name, value]
        assert main(args) == 0
        assert server.count == 128
    out = capsys.readouterr().out
    folder = tmp_path / "runs" / "20260101-mine"
    for name in ("01-design", "02-freeze", "03-run", "04-analysis", "05-power"):
        assert f"] {name} ok (" in out, out
        assert (folder / f"{name}.html").is_file()
    for name in ("07-compare", "08-pilot", "09-depth"):
        line = next(x for x in out.splitlines() if f"] {name} " in x)
        assert "skipped: " in line and "needlepoint " in line, line
        assert not (folder / f"{name}.ipynb").exists()
    assert not (folder / "compare").exists() and not (folder / "pilot").exists()
    assert not (folder / "depth").exists()
    bodies = (folder / "prepared" / "requests.jsonl").read_text().splitlines()
    assert {json.loads(b)["body"]["model"] for b in bodies} == {MODEL}
    analysis = json.loads((folder / "analysis" / "analysis.json").read_text())
    assert analysis["simulation"] is False
    assert "decision: " in out and "SIMULATION" not in out.split("decision")[-1]


def test_only_a_live_pipeline_skips_and_live_inputs_run() -> None:
    assert live_skip("07-compare", {}, {"simulated": "[]"}) is None
    assert live_skip("07-compare", {"transport": "simulate"}, {"simulated": "[]"}) is None
    assert live_skip("07-compare", {"transport": "live"}, {"simulated": "[]"})
    assert live_skip("07-compare", {"transport": "live", "simulated": None}, {}) is None
    assert live_skip("08-pilot", {"transport": "live"}, {"simulate_pilot": "True"})
    assert live_skip("08-pilot", {"transport": "live", "simulate_pilot": False}, {}) is None
    assert live_skip("04-analysis", {"transport": "live"}, {}) is None
    assert live_skip("09-depth", {"transport": "live"}, {}).startswith("skipped: 09-depth runs")
    assert live_skip("09-depth", {}, {}) is None


def test_02_freeze_reuses_an_identical_folder_and_names_what_to_delete(tmp_path: Path) -> None:
    from needlepoint.design.freeze import prepare_or_reuse
    from needlepoint.errors import NeedlepointError

    folder, reused = prepare_or_reuse(tmp_path / "prepared", model=MODEL)
    assert not reused
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    assert prepare_or_reuse(tmp_path / "prepared", model=MODEL) == (folder, True)
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before
    with pytest.raises(NeedlepointError, match=r"delete .*notebooks/work/") as err:
        prepare_or_reuse(tmp_path / "prepared", model="another")
    assert "\n" not in str(err.value)
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before
