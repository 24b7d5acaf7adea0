"""The model-based check at its own functions: design, separation, each fit and its fallbacks.

The fits are saturated (one indicator per cell) with an independence working correlation, so
their numbers have closed forms that the tests state in words: with n cases and per-case
contrast values d_i, the linear fit's estimate is the mean of d_i and its bias-reduced sandwich
standard error is sqrt(sum (d_i - mean)^2) / (n - 1); the logistic fit's estimate is the contrast
of the cells' logits, and its standard error is sqrt(sum u_i^2) / (n - 1) with
u_i = sum_j c_j (y_ij - p_j) / (p_j (1 - p_j)). The names a reader sees are literal text.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from support.analysis import analysis_params

from needlepoint.analysis.inference import ModelFit
from needlepoint.analysis.model_check import _design, _fit, model_fits, separated_cell

LINEAR = "GEE, linear probability (identity link)"
LOGISTIC = "GEE, logistic (logit link)"
SANDWICH = "bias-reduced sandwich (Mancl–DeRouen), t on cases − 1 df"
ORDER = [(sim, pos) for sim in ("low", "high") for pos in ("B", "M", "E")]
# The middle-loss contrast for one length: (B + E)/2 − M, high minus low.
CONTRAST = np.array([-0.5, 1.0, -0.5, 0.5, -1.0, 0.5])
# Four cases whose every cell has both a right and a wrong answer (no separation); the answers
# in ORDER: low B, M, E, high B, M, E.
VARIED = {
    "S1": (1, 1, 0, 0, 0, 1),
    "S2": (0, 1, 1, 1, 0, 0),
    "S3": (1, 0, 1, 1, 1, 0),
    "S4": (0, 1, 1, 0, 1, 1),
}


def score_of(answers: dict[str, tuple[int, ...]], length: int = 60) -> dict:
    return {
        (case, length, sim, pos): a
        for case, row in answers.items()
        for (sim, pos), a in zip(ORDER, row, strict=True)
    }


def design_of(answers: dict[str, tuple[int, ...]]):
    return _design(score_of(answers), list(answers), [60])


def unfit(model: str, cases: int, note: str) -> ModelFit:
    return ModelFit(model, SANDWICH, cases, None, None, cases - 1, None, None, None, note, None)


# _design


def test_the_design_has_a_row_per_case_and_cell_low_before_high_then_length_position() -> None:
    answers = {
        ("S1", 12, "low", "B"): 1, ("S1", 12, "low", "M"): 0, ("S1", 12, "low", "E"): 1,
        ("S1", 12, "high", "B"): 0, ("S1", 12, "high", "M"): 1, ("S1", 12, "high", "E"): 1,
        ("S1", 60, "low", "B"): 1, ("S1", 60, "low", "M"): 1, ("S1", 60, "low", "E"): 0,
        ("S1", 60, "high", "B"): 1, ("S1", 60, "high", "M"): 0, ("S1", 60, "high", "E"): 0,
    }  # fmt: skip
    score = answers | {("S2", n, s, p): 1 - a for (_, n, s, p), a in answers.items()}
    y, x, groups, contrast, cells = _design(score, ["S1", "S2"], [12, 60])
    assert cells == [
        ("low", 12, "B"), ("low", 12, "M"), ("low", 12, "E"),
        ("low", 60, "B"), ("low", 60, "M"), ("low", 60, "E"),
        ("high", 12, "B"), ("high", 12, "M"), ("high", 12, "E"),
        ("high", 60, "B"), ("high", 60, "M"), ("high", 60, "E"),
    ]  # fmt: skip
    s1 = [1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0]
    assert y.dtype == np.float64
    assert y.tolist() == s1 + [1 - a for a in s1]
    assert x.shape == (24, 12)
    assert (x == np.vstack([np.eye(12), np.eye(12)])).all()
    assert groups.tolist() == [0] * 12 + [1] * 12
    # Averaged over the two lengths: each weight is halved.
    quarter = [-0.25, 0.5, -0.25]
    assert contrast.tolist() == quarter * 2 + [-w for w in quarter] * 2


def test_the_contrast_of_one_length_is_the_middle_loss_high_minus_low() -> None:
    y, x, groups, contrast, cells = _design(score_of({"S1": (1,) * 6}), ["S1"], [60])
    assert contrast.tolist() == CONTRAST.tolist()
    assert cells == [(s, 60, p) for s, p in ORDER]
    assert groups.tolist() == [0] * 6 and y.tolist() == [1.0] * 6
    assert x.tolist() == np.eye(6).tolist()


# separated_cell


def test_no_cell_all_one_way_no_separated_cell() -> None:
    y, x, _, _, cells = design_of(VARIED)
    assert separated_cell(y, x, cells) is None


def test_the_first_cell_all_wrong_is_named_in_words() -> None:
    answers = dict(VARIED) | {"S2": (0, 1, 1, 0, 0, 0), "S3": (1, 0, 1, 0, 1, 0)}  # high B
    y, x, _, _, cells = design_of(answers)
    assert separated_cell(y, x, cells) == "B under high similarity at 60 records is all wrong"


def test_the_first_cell_all_correct_is_named_in_words() -> None:
    answers = {"S1": (1, 1, 1, 1, 1, 1), "S2": (0, 1, 0, 1, 1, 1)}  # low M first, all correct
    y, x, _, _, cells = design_of(answers)
    assert separated_cell(y, x, cells) == "M under low similarity at 60 records is all correct"


def test_a_cell_of_one_answer_is_all_one_way() -> None:
    y = np.array([0.0, 1.0])
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    cells = [("high", 12, "E"), ("low", 240, "B")]
    assert separated_cell(y, x, cells) == "E under high similarity at 12 records is all wrong"
    assert separated_cell(y[::-1].copy(), x, cells) == (
        "E under high similarity at 12 records is all correct"
    )


def test_a_cell_without_answers_is_skipped() -> None:
    y = np.array([0.0, 1.0, 1.0])
    x = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    cells = [("low", 12, "B"), ("low", 12, "M"), ("high", 60, "M")]
    assert separated_cell(y, x, cells) == "M under high similarity at 60 records is all correct"
    assert separated_cell(y[:2], x[:2, :2], cells[:2]) is None


# _fit


def test_the_linear_fit_is_the_mean_case_contrast_with_the_bias_reduced_sandwich() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 8), "not supported", analysis_params())
    d = np.array([np.dot(CONTRAST, row) for row in VARIED.values()])
    assert d.tolist() == [1.0, 1.0, -1.5, 0.0]
    se = np.sqrt(np.sum((d - d.mean()) ** 2)) / 3
    tq = stats.t.ppf(0.975, 3)
    assert (fit.model, fit.covariance, fit.cases, fit.df, fit.note) == (LINEAR, SANDWICH, 4, 3, "")
    assert fit.estimate == pytest.approx(0.125, rel=1e-12)
    assert fit.se == pytest.approx(se, rel=1e-9)
    assert fit.lower == pytest.approx(0.125 - tq * se, rel=1e-9)
    assert fit.upper == pytest.approx(0.125 + tq * se, rel=1e-9)
    assert fit.p_one_sided == pytest.approx(stats.t.sf(0.125 / se, 3), rel=1e-9)
    assert fit.agrees is True  # the interval includes 0: not supported, as decided


def test_the_logistic_fit_is_the_contrast_of_the_cells_logits() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LOGISTIC, y, x, groups, contrast, Fraction(1, 8), "supported", analysis_params())
    answers = np.array(list(VARIED.values()), dtype=float)
    p = answers.mean(axis=0)
    assert p.tolist() == [0.5, 0.75, 0.75, 0.5, 0.5, 0.5]
    estimate = float(CONTRAST @ np.log(p / (1 - p)))
    u = ((answers - p) / (p * (1 - p))) @ CONTRAST
    se = np.sqrt(np.sum(u**2)) / 3
    tq = stats.t.ppf(0.975, 3)
    assert (fit.model, fit.covariance, fit.cases, fit.df, fit.note) == (
        LOGISTIC, SANDWICH, 4, 3, ""
    )  # fmt: skip
    assert fit.estimate == pytest.approx(estimate, rel=1e-9)
    assert fit.se == pytest.approx(se, rel=1e-9)
    assert fit.lower == pytest.approx(estimate - tq * se, rel=1e-9)
    assert fit.upper == pytest.approx(estimate + tq * se, rel=1e-9)
    assert fit.p_one_sided == pytest.approx(stats.t.sf(estimate / se, 3), rel=1e-9)
    assert fit.agrees is False  # the interval includes 0, but the decision says supported


@pytest.mark.parametrize(
    ("estimate_pp", "decision", "agrees"),
    [
        (Fraction(7, 6), "supported", True),
        (Fraction(7, 6), "not supported", False),
        (Fraction(1, 10), "supported", True),  # the threshold itself is reached
        (Fraction(1, 20), "supported", False),  # below it: the preregistered estimate decides
        (Fraction(1, 20), "not supported", True),
        (Fraction(1, 20), "not evaluable", True),
    ],
)
def test_a_fit_agrees_when_the_rule_on_its_lower_bound_gives_the_decision(
    estimate_pp: Fraction, decision: str, agrees: bool
) -> None:
    # d = 1, 1.5, 1: the lower bound 7/6 − t · sqrt(1/6)/2 is above 0.
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (0, 1, 1, 1, 0, 1), "S3": (1, 1, 1, 1, 0, 1)}
    y, x, groups, contrast, _ = design_of(answers)
    fit = _fit(LINEAR, y, x, groups, contrast, estimate_pp, decision, analysis_params())
    assert fit.estimate == pytest.approx(7 / 6, rel=1e-12)
    se = np.sqrt(1 / 6) / 2
    assert fit.se == pytest.approx(se, rel=1e-9)
    assert fit.lower == pytest.approx(7 / 6 - stats.t.ppf(0.975, 2) * se, rel=1e-9)
    assert fit.lower > 0
    assert fit.agrees is agrees


def test_the_interval_follows_the_confidence_level() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    params = analysis_params(confidence=0.8)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 8), "supported", params)
    assert fit.upper - fit.estimate == pytest.approx(stats.t.ppf(0.9, 3) * fit.se, rel=1e-9)


def test_one_varying_cell_is_enough_for_a_fit_of_two_cases() -> None:
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (1, 1, 1, 1, 1, 1)}  # only high M varies
    y, x, groups, contrast, _ = design_of(answers)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 2), "supported", analysis_params())
    assert (fit.cases, fit.df, fit.note) == (2, 1, "")
    assert fit.estimate == pytest.approx(0.5, rel=1e-12)
    assert fit.se == pytest.approx(np.sqrt(0.5), rel=1e-9)  # sqrt(0.5² + 0.5²) / (2 − 1)
    assert fit.lower == pytest.approx(0.5 - stats.t.ppf(0.975, 1) * np.sqrt(0.5), rel=1e-9)


def test_every_cell_all_one_way_gives_no_interval() -> None:
    # Every case misses high M and nothing else: each cell is the same in every case.
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (1, 1, 1, 1, 0, 1)}
    y, x, groups, contrast, _ = design_of(answers)
    note = "no interval: every cell is all correct or all wrong (no variation)"
    for model in (LINEAR, LOGISTIC):
        fit = _fit(model, y, x, groups, contrast, Fraction(1), "supported", analysis_params())
        assert fit == unfit(model, 2, note)


def test_cases_with_the_same_contrast_give_no_interval() -> None:
    # S1 misses high B, S2 high E: both cells vary, but each case's middle loss is 0.5.
    answers = {"S1": (1, 1, 1, 0, 1, 1), "S2": (1, 1, 1, 1, 1, 0)}
    y, x, groups, contrast, _ = design_of(answers)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 2), "supported", analysis_params())
    assert fit == unfit(LINEAR, 2, "no interval: every case has the same value")


@pytest.mark.parametrize("scale", [1e200, np.inf])
def test_a_fit_that_is_not_finite_gives_no_interval(scale: float) -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    with np.errstate(all="ignore"):
        fit = _fit(LINEAR, y, x, groups, contrast * scale, Fraction(1), "supported",
                   analysis_params())  # fmt: skip
    assert fit == unfit(LINEAR, 4, "no interval: the fit is not finite")


def test_a_fit_that_fails_gives_the_first_line_of_its_error() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LINEAR, y, x, groups[:-1], contrast, Fraction(1), "supported", analysis_params())
    assert fit == unfit(LINEAR, 4, "the fit failed: 'groups' and 'endog' should have the same size")


@pytest.mark.parametrize(
    ("error", "note"),
    [
        (np.linalg.LinAlgError(), "the fit failed: LinAlgError"),
        (ZeroDivisionError(), "the fit failed: ZeroDivisionError"),
        (ValueError("first line\nsecond line"), "the fit failed: first line"),
    ],
)
def test_a_fit_that_fails_without_a_message_is_named_by_its_error(
    monkeypatch: pytest.MonkeyPatch, error: Exception, note: str
) -> None:
    from statsmodels.genmod.generalized_estimating_equations import GEE

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(GEE, "fit", fail)
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LOGISTIC, y, x, groups, contrast, Fraction(1), "supported", analysis_params())
    assert fit == unfit(LOGISTIC, 4, note)


# model_fits


def test_model_fits_gives_the_logistic_then_the_linear_fit() -> None:
    cases = tuple(VARIED)
    logistic, linear = model_fits(score_of(VARIED), cases, [60], Fraction(1, 8), "supported",
                                  analysis_params())  # fmt: skip
    y, x, groups, contrast, _ = design_of(VARIED)
    assert logistic == _fit(LOGISTIC, y, x, groups, contrast, Fraction(1, 8), "supported",
                            analysis_params())  # fmt: skip
    assert linear == _fit(LINEAR, y, x, groups, contrast, Fraction(1, 8), "supported",
                          analysis_params())  # fmt: skip
    assert logistic.estimate == pytest.approx(0.5493061443340549, rel=1e-9)
    assert linear.estimate == pytest.approx(0.125, rel=1e-12)
    assert (logistic.agrees, linear.agrees) == (False, False)  # both intervals include 0


def test_model_fits_names_the_separated_cell_and_still_fits_the_linear_model() -> None:
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (0, 1, 1, 1, 0, 1), "S3": (1, 1, 1, 1, 0, 1)}
    logistic, linear = model_fits(score_of(answers), ["S1", "S2", "S3"], [60], Fraction(7, 6),
                                  "supported", analysis_params())  # fmt: skip
    assert logistic == unfit(
        LOGISTIC,
        3,
        "not estimable: M under low similarity at 60 records is all correct "
        "(separation: its logit is infinite)",
    )
    assert linear.model == LINEAR and linear.cases == 3 and linear.df == 2
    assert linear.estimate == pytest.approx(7 / 6, rel=1e-12)
    assert linear.agrees is True
