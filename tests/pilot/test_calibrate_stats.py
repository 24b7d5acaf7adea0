"""Exact binomial intervals and the per-length counts the calibration reads."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from needlepoint.analysis.inputs import Outcome
from needlepoint.pilot.calibrate import Proportion, clopper_pearson, length_counts, pooled


@pytest.mark.parametrize(
    ("x", "n", "lower", "upper"),
    [
        # Published exact (Clopper–Pearson) 95% intervals, as binomial tables give them.
        (5, 10, 0.187086, 0.812914),
        (0, 10, 0.0, 0.308497),
        (10, 10, 0.691503, 1.0),
        (1, 20, 0.001265, 0.248733),
    ],
)
def test_clopper_pearson_known_values(x: int, n: int, lower: float, upper: float) -> None:
    lo, hi = clopper_pearson(x, n)
    assert lo == pytest.approx(lower, abs=1e-6)
    assert hi == pytest.approx(upper, abs=1e-6)


def test_the_boundary_cases_have_closed_forms() -> None:
    # x = 0: upper = 1 - (alpha/2)^(1/n); x = n: lower = (alpha/2)^(1/n).
    for n in (1, 2, 7, 64):
        assert clopper_pearson(0, n) == (0.0, pytest.approx(1 - 0.025 ** (1 / n), abs=1e-12))
        assert clopper_pearson(n, n) == (pytest.approx(0.025 ** (1 / n), abs=1e-12), 1.0)


def test_clopper_pearson_equals_scipy_exact_interval() -> None:
    for n in (1, 3, 8, 16, 32, 100):
        for x in range(n + 1):
            ci = binomtest(x, n).proportion_ci(confidence_level=0.95, method="exact")
            assert clopper_pearson(x, n) == (
                pytest.approx(ci.low, abs=1e-12),
                pytest.approx(ci.high, abs=1e-12),
            )


def test_no_trial_has_no_interval() -> None:
    assert clopper_pearson(0, 0) is None
    assert Proportion.of(0, 0) == Proportion(0, 0, None, None, None)
    assert Proportion.of(0, 0).text() == "0/0 —"
    with pytest.raises(ValueError):
        clopper_pearson(3, 2)


def _row(seq: int, length: int, sim: str, cond: str, status: str, kind: str = "") -> Outcome:
    return Outcome(seq, 1, 1, "S1", length, sim, cond, "B-M-A-E", status, kind, *([None] * 6))


def test_length_counts_count_valid_answers_and_failures_among_sent() -> None:
    rows = [
        _row(1, 12, "low", "B", "correct"),
        _row(2, 12, "high", "E", "error", "wrong_code"),
        _row(3, 12, "low", "M", "correct"),
        _row(4, 12, "high", "M", "error", "wrong_code"),
        _row(5, 12, "low", "A", "protocol_failure", "finish_reason"),
        _row(6, 12, "high", "A", "unexecuted"),
        _row(7, 24, "low", "B", "correct"),
    ]
    c = length_counts(rows, 12)
    assert (c.end.successes, c.end.trials) == (1, 2)
    assert (c.middle.successes, c.middle.trials) == (1, 1)
    assert (c.middle_high.successes, c.middle_high.trials) == (0, 1)
    assert (c.refusal.successes, c.refusal.trials) == (0, 0)
    # a failure is never a wrong answer, and an unexecuted request was never sent
    assert (c.failures.successes, c.failures.trials) == (1, 5)
    assert c.unexecuted == 1
    assert c.failure_kinds == {"finish_reason": 1}
    assert c.error_kinds == {"wrong_code": 2}
    p = pooled(rows, [12, 24])
    assert (p["B"].successes, p["B"].trials) == (2, 2)
    assert (p["M"].successes, p["M"].trials) == (1, 1)  # low similarity only
    assert (p["failure"].successes, p["failure"].trials) == (1, 6)
