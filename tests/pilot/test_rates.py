"""rates.pilot_model at its own interface: each pooled rate goes to its own field of the power
model, a rate of exactly 0 stays 0, and a condition with no valid answer is named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from needlepoint.analysis.power import PowerModel
from needlepoint.pilot import rates

KEYS = ("B", "M", "E", "A", "high B", "high M", "high E", "high A", "failure")


def _pooled(monkeypatch: pytest.MonkeyPatch, values: dict[str, float | None]) -> list:
    seen: list = []

    def fake(outcomes: object, lengths: tuple[int, ...]) -> dict:
        seen.append((outcomes, lengths))
        return {k: SimpleNamespace(estimate=values.get(k)) for k in KEYS}

    monkeypatch.setattr(rates, "pooled", fake)
    return seen


DESIGN = {"runner": {"max_consecutive_failures": 7}}


def test_each_rate_goes_to_its_own_field(monkeypatch: pytest.MonkeyPatch) -> None:
    values = dict(zip(KEYS, (0.91, 0.82, 0.73, 0.64, 0.55, 0.46, 0.37, 0.28, 0.019), strict=True))
    seen = _pooled(monkeypatch, values)
    inp = SimpleNamespace(outcomes="the outcomes")
    model = rates.pilot_model(inp, (12, 24), DESIGN)
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
    model = rates.pilot_model(SimpleNamespace(outcomes=()), (12,), DESIGN)
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
    got = rates.pilot_model(SimpleNamespace(outcomes=()), (12, 24), DESIGN)
    assert got == f"no valid {named} answer at lengths 12, 24"


def test_an_effect_at_the_largest_attainable_is_attainable_and_above_it_is_explained() -> None:
    model = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, acc_a=0.0, high_b=0.5, high_e=0.0)
    assert model.largest_effect == 0.25
    assert rates.unattainable(model, 0.25, (12,)) is None
    assert rates.unattainable(model, 0.3, (12, 24)) == (
        "the pilot's rates (lengths 12, 24) allow an added middle loss of at most 0.250, below "
        "the effect 0.3: with B 1.000, M 1.000, E 1.000 under low similarity and B 0.500, E "
        "0.000 under high, even a middle that is always wrong under high similarity gives no "
        "more, so no case count can power it"
    )
