"""`needlepoint power`'s lines, files and curve, pinned at sensitivity.py's own functions.

The power values themselves are power_grid's (tests/analysis/test_power*.py); here every line a
reader gets, the table written beside it and what the curve draws are fixed exactly.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from support.figures import record_figures

from needlepoint.analysis import sensitivity
from needlepoint.analysis.power import PowerModel, PowerStudy, power_grid
from needlepoint.analysis.sensitivity import detectable_effect, power_curve, sensitivity_lines
from needlepoint.design.protocol import reference_protocol

MODEL = PowerModel(acc_b=0.95, acc_m=0.9, acc_e=0.85, acc_a=0.8, failure_rate=0.01, stop_after=3)
STUDY = PowerStudy(cases=(4, 2), effects=(0.0, 0.45, 0.9), simulations=40, seed=7)
TITLE = "Design sensitivity: probability that the decision is 'supported'"
HEADER = [
    "Design sensitivity (seeded simulation of hypothetical models; not a model result)",
    "model: P(correct) under low similarity B 0.95, M 0.9, E 0.85, A 0.8; under high similarity "
    "B 0.95, E 0.85, A 0.8, and M 0.9 minus the added middle loss",
    "these rates allow added middle losses from 0 to 0.9",
    "between-case spread: SD 0 on the logit scale (0: every case alike); protocol-failure rate "
    "0.01; run stops after 3 consecutive failures",
    "decision: difference >= 0.1 and 95% lower bound > 0, at least 2 complete cases; exact "
    "bootstrap up to 12 cases, else 10000 resamples (seed 20260930)",
    "40 simulated runs per point, seed 7",
    "",
    "P(supported) ± its Monte Carlo standard error, by added middle loss (rows) and number of "
    "cases (columns):",
]
STOP, DECISION, RUNS = 3, 4, 5  # where the stop rule, the decision and the runs are said


def table(rows: list[tuple[int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["cases", "effect", "power"])


def test_detectable_effect_is_by_case_count_in_order_and_reads_effects_in_order() -> None:
    got = detectable_effect(
        table([(16, 0.2, 0.99), (8, 0.4, 0.9), (16, 0.0, 0.5), (8, 0.0, 0.05), (8, 0.2, 0.6)])
    )
    assert list(got) == [8, 16] and all(type(n) is int for n in got)
    assert got[8] == {"grid": 0.4, "interpolated": pytest.approx(0.2 + 0.2 * (0.8 - 0.6) / 0.3)}
    assert got[16] == {"grid": 0.2, "interpolated": pytest.approx(0.2 * 0.3 / 0.49)}


def test_the_target_is_80_percent_and_reaching_it_exactly_counts() -> None:
    got = detectable_effect(table([(8, 0.0, 0.1), (8, 0.1, 0.8), (8, 0.2, 0.95)]))
    assert got[8] == {"grid": 0.1, "interpolated": pytest.approx(0.1)}
    assert detectable_effect(table([(8, 0.0, 0.79), (8, 0.1, 0.7999)])) == {
        8: {"grid": None, "interpolated": None}
    }
    assert detectable_effect(table([(8, 0.0, 0.5), (8, 0.1, 0.6)]), target=0.5)[8] == {
        "grid": 0.0,
        "interpolated": 0.0,
    }


def test_the_lines_say_the_model_the_rule_the_grid_and_what_is_reached(tmp_path: Path) -> None:
    lines = sensitivity_lines(MODEL, STUDY)
    assert lines[: len(HEADER)] == HEADER
    assert lines[len(HEADER) :] == [
        "effect        2 cases        4 cases",
        "  0.00   0.150 ± 0.056   0.025 ± 0.025",
        "  0.45   0.400 ± 0.077   0.475 ± 0.079",
        "  0.90   0.650 ± 0.075   0.975 ± 0.025",
        "",
        "2 cases: 80% power is not reached within the grid",
        "4 cases: smallest added middle loss detected with >= 80% probability: 0.90 on the grid "
        "(about 0.743 interpolated)",
    ]


def test_the_protocols_stop_rule_is_named_when_the_model_has_none() -> None:
    model = PowerModel(failure_rate=0.5)
    lines = sensitivity_lines(model, PowerStudy(cases=(2,), effects=(0.0,), simulations=5))
    stop = reference_protocol()["runner"]["max_consecutive_failures"]
    assert lines[STOP].endswith(f"run stops after {stop} consecutive failures")
    assert lines[RUNS] == "5 simulated runs per point, seed 20260930"


def test_a_prepared_folders_protocol_replaces_the_reference(tmp_path: Path) -> None:
    from needlepoint.design.prepared import prepare_protocol

    protocol = reference_protocol()
    protocol["runner"]["max_consecutive_failures"] = 5
    protocol["analysis"]["threshold"] = 0.2
    protocol["version"] = 2  # v1 is frozen
    folder = prepare_protocol(tmp_path / "prepared", protocol)
    study = PowerStudy(cases=(2,), effects=(0.0,), simulations=5)
    lines = sensitivity_lines(PowerModel(), study, prepared=str(folder))
    assert lines[STOP].endswith("run stops after 5 consecutive failures")
    assert lines[DECISION].startswith("decision: difference >= 0.2 and 95% lower bound > 0")


def test_with_out_the_table_and_the_curve_are_written_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = record_figures(monkeypatch, sensitivity)
    out = tmp_path / "deep" / "power"
    lines = sensitivity_lines(MODEL, STUDY, out=out)
    assert lines[-1] == "wrote power/power.csv and power/power_curve.png"
    expected = power_grid(MODEL, STUDY).to_csv(index=False, lineterminator="\n").encode()
    assert (out / "power.csv").read_bytes() == expected
    assert expected.startswith(b"cases,effect,power,power_se,not_evaluable,mean_complete_cases,")
    assert b"\r" not in expected
    assert (out / "power_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [f["args"][4] for f in figures] == [out / "power_curve.png"]
    threshold = figures[0]["axes"][0]["lines"][-1]
    assert (threshold["label"], threshold["x"]) == ("threshold 0.1", [0.1, 0.1])
    sensitivity_lines(MODEL, STUDY, out=out)  # an existing folder is written again


def test_the_curve_draws_each_case_count_the_target_and_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = record_figures(monkeypatch, sensitivity)
    data = table([(16, 0.0, 0.3), (16, 0.2, 0.9), (8, 0.0, 0.1), (8, 0.2, 0.5)])
    path = tmp_path / "curve.png"
    assert power_curve(data, str(path), threshold=0.15) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (call,) = figures
    assert call["args"] == ((7.0, 4.2), (0.8, 0.3, 0.5, 0.6), TITLE, False, str(path))
    (ax,) = call["axes"]
    assert ax["xlabel"] == "added middle loss under high similarity (true difference)"
    assert ax["ylabel"] == "P(supported)"
    assert ax["ylim"] == (-0.02, 1.02)
    style = {"marker": "o", "markersize": 3.0, "linestyle": "-", "linewidth": 1.5}
    eight, sixteen, target, threshold = ax["lines"]
    assert eight == {**eight, **style, "x": [0.0, 0.2], "y": [0.1, 0.5], "label": "8 cases"}
    assert sixteen == {**sixteen, **style, "x": [0.0, 0.2], "y": [0.3, 0.9], "label": "16 cases"}
    assert target == {
        "x": [0.0, 1.0], "y": [0.8, 0.8], "label": "80%", "marker": "None", "markersize": 6.0,
        "color": "#808080", "linestyle": ":", "linewidth": 1.0,
    }  # fmt: skip
    assert threshold == {
        "x": [0.15, 0.15], "y": [0.0, 1.0], "label": "threshold 0.15", "marker": "None",
        "markersize": 6.0, "color": "#b2182b", "linestyle": "--", "linewidth": 1.0,
    }  # fmt: skip
    assert ax["legend"] == [
        ("8 cases", 8.0), ("16 cases", 8.0), ("80%", 8.0), ("threshold 0.15", 8.0)
    ]  # fmt: skip


def test_without_a_threshold_the_curve_has_no_threshold_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = record_figures(monkeypatch, sensitivity)
    power_curve(table([(8, 0.0, 0.1)]), tmp_path / "c.png", target=0.9)
    labels = [line["label"] for line in figures[0]["axes"][0]["lines"]]
    assert labels == ["8 cases", "90%"]
    assert figures[0]["axes"][0]["lines"][1]["y"] == [0.9, 0.9]


def test_without_a_model_or_a_study_the_defaults_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    small = PowerStudy(cases=(2,), effects=(0.0,), simulations=5, seed=3)
    monkeypatch.setattr(sensitivity, "PowerStudy", lambda: small)
    lines = sensitivity_lines()
    assert lines[1] == (
        "model: P(correct) under low similarity B 0.95, M 0.9, E 0.95, A 0.95; under high "
        "similarity B 0.95, E 0.95, A 0.95, and M 0.9 minus the added middle loss"
    )
    assert lines[STOP] == (
        "between-case spread: SD 0 on the logit scale (0: every case alike); protocol-failure "
        "rate 0; run stops after 2 consecutive failures"
    )
    assert lines[RUNS] == "5 simulated runs per point, seed 3"


def test_the_power_table_is_simulated_under_the_prepared_protocol(tmp_path: Path) -> None:
    from needlepoint.design.prepared import load_prepared, prepare_protocol

    protocol = reference_protocol()
    protocol["analysis"]["threshold"] = 0.4
    protocol["version"] = 2
    folder = prepare_protocol(tmp_path / "prepared", protocol)
    study = PowerStudy(cases=(4,), effects=(0.5,), simulations=40, seed=7)
    frozen = load_prepared(folder).protocol
    power = float(power_grid(MODEL, study, frozen)["power"].iloc[0])
    assert power != float(power_grid(MODEL, study)["power"].iloc[0])
    lines = sensitivity_lines(MODEL, study, prepared=folder)
    assert any(line.startswith(f"  0.50   {power:.3f} ± ") for line in lines), lines
