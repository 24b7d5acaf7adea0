"""The run notebook's transport switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.run.modes import run_step


def test_unknown_transport_is_refused(reference_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(NeedlepointError, match="transport must be one of simulate, live"):
        run_step(reference_dir, tmp_path / "run", transport="carrier-pigeon", allow=1)


def test_live_without_key_is_refused_before_anything_is_sent(
    reference_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NP_TEST_KEY", raising=False)
    with pytest.raises(NeedlepointError, match="NP_TEST_KEY"):
        run_step(
            reference_dir,
            tmp_path / "run",
            transport="live",
            allow=1,
            base_url="http://127.0.0.1:9",
            model="agnes-3.0-flash",
            api_key_env="NP_TEST_KEY",
        )
    assert not (tmp_path / "run" / "journal.jsonl").exists()


def test_simulation_runs_offline(reference_dir: Path, tmp_path: Path) -> None:
    summary = run_step(
        reference_dir,
        tmp_path / "run",
        transport="simulate",
        allow=8,
        simulate="perfect",
        progress="off",
    )
    assert summary.simulation and summary.attempts_total == 8
    assert summary.counts.get("correct") == 8
