"""calibrate: the band and failure rules, the smallest count reaching power, the new version.


cr.pilot_model at its own interface: each pooled rate goes to its own field of the power
model, a rate of exactly 0 stays 0, and a condition with no valid answer is named.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.pilots import design_file, simulated_pilot

from needlepoint.analysis.depth import contrast_weights
from needlepoint.analysis.inputs import from_run
from needlepoint.analysis.power import PowerModel, PowerStudy, power_grid
from needlepoint.design.generate import generate_cases
from needlepoint.design.prepared import prepare
from needlepoint.design.protocol import load_override
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.pilot import calibrate as cr
from needlepoint.pilot.calibrate import (
    CalibrationOptions,
    CalibrationRecord,
    LengthCounts,
    Proportion,
    calibrate,
    calibrated_protocol,
    threshold_power,
    verdict_of,
)
from needlepoint.pilot.folder import first_overlap, index_materials
from needlepoint.pilot.report import calibration_lines, read_report, write_protocol, write_report
from needlepoint.schema import from_plain

_PAIR_1 = "a pair complete with probability 1.000"
_PAIR_536 = "a pair complete with probability 0.536"
_SHORT = "failure rate leaves a pair complete with probability {} only"
ROOT = Path(__file__).resolve().parents[2]
FAST = {"effect": 0.3, "simulations": 200, "max_cases": 64}


@pytest.fixture(scope="module")
def pilot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cal")
    simulated_pilot(root / "pilot", design_file(root))
    return root / "pilot"


@pytest.fixture
def result(pilot_dir: Path):
    # Built per test, not per module: mutmut maps a test to the functions it calls, and a
    # cached fixture would tie calibrate() to the first test that used it only.
    return calibrate(pilot_dir, CalibrationOptions(**FAST))


def _counts(
    end: tuple[int, int], failures: tuple[int, int], middle=(3, 4), refusal=(4, 4),
    low: tuple[int, int] | None = None, high: tuple[int, int] | None = None,
):  # fmt: skip
    return LengthCounts(
        length=12,
        end=Proportion.of(*end),
        end_low=Proportion.of(*(low or end)),
        end_high=Proportion.of(*(high or end)),
        middle=Proportion.of(*middle),
        middle_high=Proportion.of(1, 4),
        refusal=Proportion.of(*refusal),
        failures=Proportion.of(*failures),
        unexecuted=0,
        failure_kinds={},
        error_kinds={},
    )


@pytest.mark.parametrize(
    ("end", "failures", "qualifies", "in_band", "reason"),
    [
        # the edges are inside the band
        ((12, 20), (0, 40), True, True, "end accuracy 0.600 in the band; " + _PAIR_1),
        ((19, 20), (0, 40), True, True, "end accuracy 0.950 in the band; " + _PAIR_1),
        ((11, 20), (0, 40), False, False, "end accuracy 0.550 is below the band (floor side)"),
        ((20, 20), (0, 40), False, False, "end accuracy 1.000 is above the band (ceiling side)"),
        # (1 - 3/40)^8 = 0.536 >= 0.5 qualifies; (1 - 4/40)^8 = 0.430 does not
        ((15, 20), (3, 40), True, True, "end accuracy 0.750 in the band; " + _PAIR_536),
        ((15, 20), (4, 40), False, True, _SHORT.format("0.430")),
        ((0, 0), (40, 40), False, False, "no valid B or E answer"),
        ((15, 20), (0, 0), False, True, _SHORT.format("unknown")),  # no request ran
    ],
)
def test_the_band_and_failure_rule(end, failures, qualifies, in_band, reason) -> None:
    # The pooled band, as calibrations before issue 34 read it (both arms equal here).
    v = verdict_of(_counts(end, failures), CalibrationOptions(band_per_similarity=False))
    assert (v.qualifies, v.in_band, v.reason) == (qualifies, in_band, reason)


def test_a_pair_probability_equal_to_the_minimum_qualifies() -> None:
    v = verdict_of(_counts((15, 20), (0, 40)), CalibrationOptions(min_pair_complete=1.0))
    assert v.qualifies and v.pair_complete == 1.0


@pytest.mark.parametrize(("middle", "refusal"), [((0, 0), (4, 4)), ((3, 4), (0, 0))])
def test_a_length_needs_valid_middle_and_refusal_answers(middle, refusal) -> None:
    v = verdict_of(_counts((15, 20), (0, 40), middle=middle, refusal=refusal), CalibrationOptions())
    assert (v.qualifies, v.reason) == (False, "no valid middle (low similarity) or A answer")
    one = verdict_of(_counts((15, 20), (0, 40), refusal=(1, 1)), CalibrationOptions())
    assert one.qualifies  # a single valid A answer is enough


@pytest.mark.parametrize(
    ("problems", "shown"),
    [
        (["a", "b", "c"], "3 problem(s): a; b; c"),
        (["a", "b", "c", "d"], "4 problem(s): a; b; c; and 1 more"),
        (["a", "b", "c", "d", "e"], "5 problem(s): a; b; c; and 2 more"),
    ],
)
def test_a_pilot_failing_its_audit_names_three_problems_and_counts_the_rest(
    pilot_dir: Path, monkeypatch: pytest.MonkeyPatch, problems: list[str], shown: str
) -> None:
    import needlepoint.run.audit as audit

    monkeypatch.setattr(
        audit, "audit_run", lambda *_: SimpleNamespace(ok=False, problems=tuple(problems))
    )
    with pytest.raises(NeedlepointError) as err:
        calibrate(pilot_dir, CalibrationOptions(**FAST))
    assert str(err.value) == f"{pilot_dir / 'run'}: fails audit-run with {shown}"


def test_recommended_count_is_the_smallest_multiple_reaching_the_target(
    result, pilot_dir: Path
) -> None:
    rec = result.record
    assert rec.verdict == cr.RECOMMENDED and rec.chosen_lengths == (12, 24)
    design = json.loads((pilot_dir / "design.json").read_text("utf-8"))
    # brute force: every multiple of the 4 orders, in order, through the public power_grid
    found = None
    for cases in range(4, FAST["max_cases"] + 1, 4):
        protocol = calibrated_protocol(design, rec.chosen_lengths, cases, 0, 99)
        study = PowerStudy(cases=(cases,), effects=(0.3,), simulations=200, seed=20260930)
        row = power_grid(rec.power_model, study, protocol).iloc[0]
        if row["power"] >= 0.8 and row["mean_complete_cases"] >= 2 * 2:
            found = cases
            break
    assert found is not None and rec.recommended_cases == found
    assert [r.cases for r in rec.power_table] == list(range(4, found + 1, 4))
    assert rec.power_table[-1].power >= 0.8 > max(r.power for r in rec.power_table[:-1])
    assert rec.power_at_threshold is not None and rec.power_at_threshold < 0.8


def test_the_new_version_prepares_verifies_and_records_its_rationale(
    result, pilot_dir: Path, tmp_path: Path
) -> None:
    protocol = result.protocol
    assert protocol is not None and protocol["version"] == 7  # design v5, pilot v6
    assert protocol["lengths"] == [12, 24] and protocol["cases"] == result.record.recommended_cases
    assert protocol["description"] == (
        f"{protocol['protocol_id']} v7: v5 calibrated on a SIMULATED pilot "
        f"{result.record.pilot.journal_sha256[:12]} (held-out materials): lengths 12, 24, "
        f"{protocol['cases']} cases"
    )
    path = write_protocol(protocol, tmp_path / "v7.json")
    assert load_override(path) == protocol
    folder = prepare(tmp_path / "prepared", path)
    assert verify_prepared(folder).ok
    rationale = json.loads((folder / "protocol.json").read_text("utf-8"))["rationale"]
    rec = from_plain(CalibrationRecord, rationale, "rationale")
    assert rec == result.record
    assert (
        rec.pilot.journal_sha256
        == json.loads((pilot_dir / "run" / "journal.head.json").read_text())["sha256"]
    )
    write_report(rec, tmp_path / "cal.json")
    assert read_report(tmp_path / "cal.json") == rec
    # the calibrated materials ask nothing the pilot asked and expect no pilot code
    pilot = load_override(pilot_dir / "prepared" / "protocol.json")
    overlap = first_overlap(
        index_materials(generate_cases(pilot)), index_materials(generate_cases(protocol))
    )
    assert overlap is None


def test_no_length_qualifies_writes_no_protocol(pilot_dir: Path) -> None:
    out = calibrate(pilot_dir, CalibrationOptions(band_low=0.0, band_high=0.05, **FAST))
    assert out.protocol is None and out.record.verdict == cr.NO_LENGTH
    assert out.record.chosen_lengths == () and out.record.power_model is None
    assert out.record.reason == (
        "12: end accuracy under low similarity 0.875 (7/8) is above the band (ceiling side); "
        "end accuracy under high similarity 0.875 (7/8) is above the band (ceiling side) "
        "(band [0, 0.05]); 24: end accuracy under low similarity 0.875 (7/8) is above the band "
        "(ceiling side); end accuracy under high similarity 0.625 (5/8) is above the band "
        "(ceiling side) (band [0, 0.05])"
    )


def test_a_pilot_whose_rates_cannot_be_estimated_recommends_nothing_and_says_why(
    pilot_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import needlepoint.pilot.calibrate as calibrate_module

    why = "no valid high B answer at lengths 12, 24"
    monkeypatch.setattr(calibrate_module, "pilot_model", lambda *_: why)
    out = calibrate(pilot_dir, CalibrationOptions(**FAST))
    rec = out.record
    assert out.protocol is None and (rec.verdict, rec.reason) == (cr.NO_LENGTH, why)
    assert rec.chosen_lengths == (12, 24) and rec.power_model is None
    assert (rec.power_table, rec.recommended_cases, rec.protocol_version) == ((), None, None)


def test_power_not_reached_within_the_bound(pilot_dir: Path) -> None:
    # 7, one below the next multiple of the 4 orders: 8 cases would exceed the bound
    out = calibrate(pilot_dir, CalibrationOptions(effect=0.3, simulations=200, max_cases=7))
    assert out.protocol is None and out.record.verdict == cr.NOT_REACHED
    assert "no multiple of 4 up to 7 cases reaches 80% power" in out.record.reason
    assert [r.cases for r in out.record.power_table] == [4]


def test_an_effect_above_the_largest_attainable_is_refused_with_why(pilot_dir: Path) -> None:
    out = calibrate(pilot_dir, CalibrationOptions(effect=1.0, simulations=50))
    rec = out.record
    assert out.protocol is None and rec.verdict == cr.ABOVE_ATTAINABLE
    assert rec.power_model is not None and rec.largest_effect == rec.power_model.largest_effect
    assert rec.power_table == () and rec.recommended_cases is None
    assert rec.reason.startswith(
        "the pilot's rates (lengths 12, 24) allow an added middle loss of "
    )
    assert "below the effect 1: " in rec.reason and "no case count can power it" in rec.reason


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"band_low": 0.9, "band_high": 0.6}, "need 0 <= LOW < HIGH <= 1"),
        ({"effect": 0.1}, "must exceed the threshold 0.1"),
        ({"max_cases": 0}, "must be positive"),
        ({"version": 5}, "other than the design's (v5) and the pilot's (v6)"),
        ({"version": 6}, "other than the design's"),
        ({"version": 0}, "--version 0: must be a positive version"),
    ],
)
def test_bad_options_are_refused(pilot_dir: Path, options: dict, message: str) -> None:
    with pytest.raises(NeedlepointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        calibrate(pilot_dir, CalibrationOptions(**options))


def test_the_request_budget_bounds_the_search(pilot_dir: Path) -> None:
    # lengths 12 and 24: 16 requests per case, so 64 requests hold 4 cases and 32 hold none
    out = calibrate(pilot_dir, CalibrationOptions(effect=0.3, simulations=200, max_requests=64))
    assert [r.cases for r in out.record.power_table] == [4]
    assert out.record.rules.max_requests == 64
    none = calibrate(pilot_dir, CalibrationOptions(effect=0.3, simulations=200, max_requests=32))
    assert none.protocol is None and none.record.power_table == ()
    assert none.record.reason == (
        "no multiple of 4 up to 2 cases (--max-requests 32) reaches 80% power at effect 0.3"
    )


def test_the_new_version_is_a_deep_copy_without_the_designs_own_free_text(
    pilot_dir: Path,
) -> None:
    design = json.loads((pilot_dir / "design.json").read_text("utf-8"))
    design.update(rationale="why the pilot", materials_reuse="allowed")
    before = json.dumps(design, sort_keys=True)
    p = calibrated_protocol(design, (12, 24), 16, 7, 99)
    assert "rationale" not in p and "materials_reuse" not in p
    assert (p["version"], p["lengths"], p["cases"], p["seeds"]["materials"]) == (
        99,
        [12, 24],
        16,
        7,
    )
    assert {k: v for k, v in p.items() if k not in ("version", "lengths", "cases", "seeds")} == {
        k: v
        for k, v in design.items()
        if k not in ("version", "lengths", "cases", "seeds", "rationale", "materials_reuse")
    }
    p["analysis"]["threshold"] = -1.0  # nothing nested is shared with the design
    assert json.dumps(design, sort_keys=True) == before


def test_power_at_the_threshold_uses_the_options_simulations_and_seed(result) -> None:
    rec = result.record
    protocol = json.loads(json.dumps(result.protocol))
    o = CalibrationOptions(**{**FAST, "simulations": 150, "seed": 11})
    study = PowerStudy(
        cases=(protocol["cases"],),
        effects=(float(protocol["analysis"]["threshold"]),),
        simulations=150,
        seed=11,
    )
    expected = float(power_grid(rec.power_model, study, protocol)["power"].iloc[0])
    assert threshold_power(rec.power_model, o, protocol) == expected
    other = CalibrationOptions(**{**FAST, "simulations": 150, "seed": 12})
    assert threshold_power(rec.power_model, other, protocol) != expected


def test_the_search_stops_at_the_first_count_meeting_both_rules_at_their_edges(
    pilot_dir: Path,
) -> None:
    o = CalibrationOptions(effect=0.3, simulations=120, seed=17, max_cases=64)
    rec = calibrate(pilot_dir, o).record
    design = json.loads((pilot_dir / "design.json").read_text("utf-8"))
    for row in rec.power_table:  # each row: the public power_grid at the options' runs and seed
        study = PowerStudy(cases=(row.cases,), effects=(0.3,), simulations=120, seed=17)
        protocol = calibrated_protocol(design, rec.chosen_lengths, row.cases, 0, 99)
        want = power_grid(rec.power_model, study, protocol).iloc[0]
        assert (row.power, row.mean_complete_cases) == (want["power"], want["mean_complete_cases"])
    last = rec.power_table[-1]
    assert last.mean_complete_cases == last.cases  # the simulated pilot has no failures
    # A target equal to a row's power is met at that row, not one count later.
    at = calibrate(pilot_dir, replace(o, target_power=last.power)).record
    assert at.recommended_cases == last.cases
    # Complete cases: a mean equal to margin x minimum (2) passes; one step short does not.
    equal = calibrate(pilot_dir, replace(o, complete_margin=last.cases // 2)).record
    assert equal.recommended_cases == last.cases
    short = calibrate(pilot_dir, replace(o, complete_margin=(last.cases + 4) // 2)).record
    assert short.recommended_cases is not None and short.recommended_cases >= last.cases + 4
    assert all(r.cases < last.cases + 4 or r.power < o.target_power
               for r in short.power_table[:-1])  # fmt: skip


def test_version_1_is_a_positive_version_but_a_frozen_one(pilot_dir: Path) -> None:
    # 1 passes the positive-version rule; the frozen reference protocol then refuses it.
    with pytest.raises(NeedlepointError, match=r"^calibrated protocol: [a-z-]+ v1 is frozen; "):
        calibrate(pilot_dir, CalibrationOptions(**FAST, version=1))


def test_power_not_reached_names_the_best_row_wherever_it_is(pilot_dir: Path) -> None:
    # 20 runs per count, seed 4: Monte Carlo noise puts the best power in the middle row.
    o = CalibrationOptions(effect=0.3, simulations=20, seed=4, max_cases=15)
    rec = calibrate(pilot_dir, o).record
    assert [(r.cases, r.power) for r in rec.power_table] == [(4, 0.3), (8, 0.5), (12, 0.35)]
    assert rec.power_model is not None and rec.largest_effect == rec.power_model.largest_effect
    assert rec.reason == (
        "no multiple of 4 up to 15 cases reaches 80% power at effect 0.3 (best 0.500 at 8 cases)"
    )


KEYS = ("B", "M", "E", "A", "high B", "high M", "high E", "high A", "failure")


def _pooled(monkeypatch: pytest.MonkeyPatch, values: dict[str, float | None]) -> list:
    seen: list = []

    def fake(outcomes: object, lengths: tuple[int, ...]) -> dict:
        seen.append((outcomes, lengths))
        return {k: SimpleNamespace(estimate=values.get(k)) for k in KEYS}

    monkeypatch.setattr(cr, "pooled", fake)
    return seen


DESIGN = {"runner": {"max_consecutive_failures": 7}}


def test_each_rate_goes_to_its_own_field(monkeypatch: pytest.MonkeyPatch) -> None:
    values = dict(zip(KEYS, (0.91, 0.82, 0.73, 0.64, 0.55, 0.46, 0.37, 0.28, 0.019), strict=True))
    seen = _pooled(monkeypatch, values)
    inp = SimpleNamespace(outcomes="the outcomes")
    model = cr.pilot_model(inp, (12, 24), DESIGN)
    assert seen == [("the outcomes", (12, 24))]
    assert model == PowerModel(
        acc_b=0.91, acc_m=0.82, acc_e=0.73, acc_a=0.64, failure_rate=0.019, stop_after=7,
        high_b=0.55, high_m=0.46, high_e=0.37, high_a=0.28,
    )  # fmt: skip
    assert type(model.stop_after) is int


def test_a_rate_of_zero_stays_zero_and_the_high_middle_may_be_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = dict.fromkeys(KEYS, 0.0)
    values["high M"] = None
    _pooled(monkeypatch, values)
    model = cr.pilot_model(SimpleNamespace(outcomes=()), (12,), DESIGN)
    assert isinstance(model, PowerModel)
    fields = (model.acc_b, model.acc_m, model.acc_e, model.acc_a, model.failure_rate)
    assert fields == (0.0,) * 5
    assert (model.high_b, model.high_e, model.high_a, model.high_m) == (0.0, 0.0, 0.0, None)


@pytest.mark.parametrize(
    ("gone", "named"),
    [(("high B", "A"), "A"), (("failure",), "failure"), (("B", "high E"), "B")],
)
def test_the_first_condition_without_a_valid_answer_is_named(
    monkeypatch: pytest.MonkeyPatch, gone: tuple[str, ...], named: str
) -> None:
    values: dict[str, float | None] = dict.fromkeys(KEYS, 0.5)
    for key in gone:
        values[key] = None
    _pooled(monkeypatch, values)
    got = cr.pilot_model(SimpleNamespace(outcomes=()), (12, 24), DESIGN)
    assert got == f"no valid {named} answer at lengths 12, 24"


def test_an_effect_at_the_largest_attainable_is_attainable_and_above_it_is_explained() -> None:
    model = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, acc_a=0.0, high_b=0.5, high_e=0.0)
    assert model.largest_effect == 0.25
    assert cr.unattainable(model, 0.25, (12,)) is None
    assert cr.unattainable(model, 0.3, (12, 24)) == (
        "the pilot's rates (lengths 12, 24) allow an added middle loss of at most 0.250, below "
        "the effect 0.3: with B 1.000, M 1.000, E 1.000 under low similarity and B 0.500, E "
        "0.000 under high, even a middle that is always wrong under high similarity gives no "
        "more, so no case count can power it"
    )


def test_each_similarity_arm_must_be_inside_the_band() -> None:
    """A low arm at the ceiling and a high arm near the floor pool into the band (the declared
    study's C2: 46/64 = 0.72 at 12 records); each arm on its own is refused, with its numbers."""
    c2 = _counts((46, 64), (0, 128), low=(32, 32), high=(14, 32))
    pooled = verdict_of(c2, CalibrationOptions(band_per_similarity=False))
    assert pooled.qualifies and pooled.reason.startswith("end accuracy 0.719 in the band")
    v = verdict_of(c2, CalibrationOptions())
    assert (v.qualifies, v.in_band) == (False, False)
    assert v.reason == (
        "end accuracy under low similarity 1.000 (32/32) is above the band (ceiling side); "
        "end accuracy under high similarity 0.438 (14/32) is below the band (floor side) "
        "(band [0.6, 0.95])"
    )
    ceiling_only = verdict_of(_counts((40, 48), (0, 96), low=(24, 24), high=(16, 24)),
                              CalibrationOptions())  # fmt: skip
    assert not ceiling_only.qualifies
    assert ceiling_only.reason.startswith(
        "end accuracy under low similarity 1.000 (24/24) is above"
    )
    both = verdict_of(_counts((30, 40), (0, 80), low=(16, 20), high=(14, 20)), CalibrationOptions())
    assert both.qualifies
    assert both.reason.startswith("end accuracy 0.800 (low) and 0.700 (high) in the band")
    none_high = verdict_of(
        _counts((16, 20), (0, 40), low=(16, 20), high=(0, 0)), CalibrationOptions()
    )
    assert none_high.reason.startswith("no valid B or E answer under high similarity")


# --- a depth design ------------------------------------------------------------------------------


def _depth_design(folder: Path) -> Path:
    """The worked depth grid as a small design: one length of 12, six cases (one square)."""
    folder.mkdir(parents=True, exist_ok=True)
    grid = json.loads((ROOT / "protocols" / "depth-grid.json").read_text(encoding="utf-8"))
    grid.pop("description")
    grid.update(version=5, lengths=[12], cases=6)
    path = folder / "design.json"
    path.write_text(json.dumps(grid), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def depth_pilot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("depth")
    simulated_pilot(root / "pilot", _depth_design(root), cases=6, allow=6 * 2 * 12)
    return root / "pilot"


DEPTH_FAST = {"effect": 0.3, "simulations": 100, "max_cases": 24}


def test_a_depth_pilot_calibrates_with_its_ends_interior_and_contrast(depth_pilot: Path) -> None:
    result = calibrate(depth_pilot, CalibrationOptions(**DEPTH_FAST))
    rec = result.record
    assert rec.power_model is None and rec.depth_model is not None and rec.model is rec.depth_model
    # The ends are the first and last depth, the middle the three interior depths.
    inp = from_run(depth_pilot / "run", pilot=True)
    for c in rec.lengths:
        rows = [o for o in inp.outcomes if o.length == c.length and o.valid]
        ends = [o for o in rows if o.condition in ("D0", "D1") and o.similarity == "low"]
        inner = [o for o in rows if o.condition in ("D0.25", "D0.5", "D0.75")]
        inner_low = [o for o in inner if o.similarity == "low"]
        assert c.end_low.trials == len(ends) == 12
        assert c.middle.trials == len(inner_low) == 18
        assert c.failures.trials == 72  # 12 requests per case and length
    m = rec.depth_model
    assert m.conditions == ("D0", "D0.25", "D0.5", "D0.75", "D1", "A")
    assert m.weights == tuple(contrast_weights("ends-minus-interior", [0, 0.25, 0.5, 0.75, 1]))
    assert rec.verdict == cr.RECOMMENDED and rec.recommended_cases % 6 == 0
    assert [r.cases for r in rec.power_table] == list(range(6, rec.recommended_cases + 1, 6))
    protocol = result.protocol
    assert protocol is not None and protocol["depths"] == [0, 0.25, 0.5, 0.75, 1]
    assert protocol["cases"] == rec.recommended_cases
    lines = "\n".join(calibration_lines(rec))
    assert "end (first and last depth) accuracy" in lines and "a case's 12 requests" in lines
    assert "largest contrast these rates allow" in lines
    # The record survives its file.
    rationale = json.loads(json.dumps(protocol["rationale"]))
    assert from_plain(CalibrationRecord, rationale, "rationale") == rec


def test_a_depth_calibration_that_misses_power_writes_the_declared_descriptive_count(
    depth_pilot: Path, tmp_path: Path
) -> None:
    strict = dict(DEPTH_FAST, effect=0.25, target_power=0.99, max_cases=12)
    none = calibrate(depth_pilot, CalibrationOptions(**strict))
    assert none.protocol is None and none.record.verdict == cr.NOT_REACHED
    result = calibrate(depth_pilot, CalibrationOptions(**strict, descriptive_cases=6))
    rec = result.record
    assert rec.verdict == cr.DESCRIPTIVE and rec.recommended_cases == 6
    assert result.protocol is not None and result.protocol["cases"] == 6
    assert result.protocol["description"].endswith(
        ": descriptive, underpowered: lengths 12, 24, 6 cases"
    )
    at = next(r for r in rec.power_table if r.cases == 6)
    # why the power was not reached, then what the declared count has
    assert rec.reason.startswith("no multiple of 6 up to 12 cases reaches 99% power")
    assert rec.reason.endswith(
        f"; the declared descriptive count, 6 cases, has power {at.power:.3f} at effect 0.25: "
        "its decision is reported, underpowered"
    )
    assert rec.rules.descriptive_cases == 6
    head = "DESCRIPTIVE (power not reached): v7"
    assert any(line.startswith(head) for line in calibration_lines(rec))
    write_report(rec, tmp_path / "cal.json")
    assert read_report(tmp_path / "cal.json") == rec
    # The calibrated depth version prepares and verifies like any other.
    path = write_protocol(result.protocol, tmp_path / "v7.json")
    folder = prepare(tmp_path / "prepared", path)
    assert verify_prepared(folder).ok
    for bad in (5, 18):  # not a multiple of the six orders; above the search bound of 12
        with pytest.raises(NeedlepointError, match=f"--descriptive-cases {bad}: must be"):
            calibrate(depth_pilot, CalibrationOptions(**strict, descriptive_cases=bad))


def _with_status(inp, status: str, *, condition: str, similarity: str):
    """The pilot's outcomes with every answer of one cell given ``status``."""
    changed = tuple(
        replace(o, status=status) if (o.condition, o.similarity) == (condition, similarity) else o
        for o in inp.outcomes
    )
    return replace(inp, outcomes=changed)


def test_a_depth_pilot_without_a_needed_rate_says_which_and_where(depth_pilot: Path) -> None:
    _, design, inp = cr.load_pilot(depth_pilot)
    lengths = (12, 60)  # the pilot ran 12 only: the reason names what was asked for
    no_low = _with_status(inp, "protocol_failure", condition="D0.5", similarity="low")
    assert cr.pilot_depth_model(no_low, lengths, design) == (
        "no valid D0.5 answer under low similarity at lengths 12, 60"
    )
    # A has weight 0 in the contrast, but its high-similarity rate is still needed.
    no_high_a = _with_status(inp, "protocol_failure", condition="A", similarity="high")
    assert cr.pilot_depth_model(no_high_a, lengths, design) == (
        "no valid A answer under high similarity at lengths 12, 60"
    )
    # An end (weight above 0) needs it too; a lowered interior depth does not.
    no_high_end = _with_status(inp, "protocol_failure", condition="D1", similarity="high")
    assert "no valid D1 answer under high similarity" in str(
        cr.pilot_depth_model(no_high_end, lengths, design)
    )
    no_high_inner = _with_status(inp, "protocol_failure", condition="D0.5", similarity="high")
    model = cr.pilot_depth_model(no_high_inner, lengths, design)
    assert not isinstance(model, str) and model.high[model.conditions.index("D0.5")] is None


def test_a_depth_pilot_whose_end_was_always_wrong_models_a_rate_of_zero(depth_pilot: Path) -> None:
    _, design, inp = cr.load_pilot(depth_pilot)
    wrong = _with_status(inp, "error", condition="D0", similarity="low")
    model = cr.pilot_depth_model(wrong, (12,), design)
    assert not isinstance(model, str) and model.low[0] == 0.0


def test_a_depth_design_whose_depths_and_conditions_disagree_is_refused(depth_pilot: Path) -> None:
    _, design, inp = cr.load_pilot(depth_pilot)
    short = dict(design, depths=design["depths"][:-1])  # five conditions and A, four depths
    with pytest.raises(ValueError, match="zip"):
        cr.pilot_depth_model(inp, (12,), short)


def test_a_proportion_reads_with_its_interval_or_a_dash_when_any_part_is_unknown() -> None:
    assert Proportion.of(27, 32).text() == "27/32 0.844 [0.672, 0.947]"
    assert Proportion.of(0, 0).text() == "0/0 —"
    for partial in ((None, 0.1, 0.9), (0.75, None, 0.9), (0.75, 0.1, None)):
        assert Proportion(3, 4, *partial).text() == "3/4 —"


def test_a_depth_search_counts_its_own_requests_per_case_against_the_budget(
    depth_pilot: Path,
) -> None:
    """A depth case asks 12 requests per length (six conditions, two similarities), not the
    reference design's 8: 288 requests at two lengths allow 12 cases, not 18."""
    o = CalibrationOptions(**dict(DEPTH_FAST, target_power=0.999, max_requests=288))
    rec = calibrate(depth_pilot, o).record
    assert rec.verdict == cr.NOT_REACHED
    assert [r.cases for r in rec.power_table] == [6, 12]
    assert rec.reason.startswith(
        "no multiple of 6 up to 12 cases (--max-requests 288) reaches 100% power at effect 0.3"
    )


def test_an_unattainable_depth_effect_lists_every_rate_and_a_dash_for_one_unmeasured(
    depth_pilot: Path,
) -> None:
    _, design, inp = cr.load_pilot(depth_pilot)
    no_high = _with_status(inp, "protocol_failure", condition="D0.5", similarity="high")
    model = cr.pilot_depth_model(no_high, (12, 24), design)
    assert not isinstance(model, str)
    why = cr.unattainable(model, 1.5, (12, 24))
    assert why is not None and why.startswith("the pilot's rates (lengths 12, 24) allow a contrast")
    i = model.conditions.index("D0.5")
    assert f"D0.5 {model.low[i]:.3f} (low) — (high); " in why
    j = model.conditions.index("D0")
    assert f"D0 {model.low[j]:.3f} (low) {model.high[j]:.3f} (high); " in why
    # A model whose rates do not match its conditions is refused, not read short.
    short = replace(model, high=model.high[:-1])
    with pytest.raises(ValueError, match="zip"):
        cr.unattainable(short, 1.5, (12, 24))
