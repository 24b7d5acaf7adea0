"""The model-based check: GEE fits of correctness over the complete cases, clustered by case.

Both fits take the B, M and E answers of the complete cases, one indicator per similarity ×
position × length cell (a saturated model: its coefficients are the cell rates, or their
logits), an independence working correlation and statsmodels' bias-reduced (Mancl–DeRouen)
sandwich covariance, which corrects the robust covariance's downward bias with few clusters.
The tested contrast is the preregistered one: the middle loss (B + E)/2 − M under high minus
under low similarity, averaged over the lengths, with a t reference on cases − 1 degrees of
freedom.

- The **logistic** fit (logit link) is the conventional model, but it has no finite estimate
  when a cell is all correct or all wrong (separation), which small designs produce often; then
  it is reported as not estimable, with the cell that causes it.
- The **linear-probability** fit (identity link) is always estimable; its contrast equals the
  preregistered estimate exactly, so it checks the interval method, not the estimate.

docs/analysis.md says why both, and what a sandwich estimate from a handful of clusters is worth.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from needlepoint.analysis.decision import SUPPORTED, meets_rule
from needlepoint.analysis.effects import Cell
from needlepoint.analysis.inference import ModelFit
from needlepoint.analysis.record import AnalysisParameters

COVARIANCE = "bias-reduced sandwich (Mancl–DeRouen), t on cases − 1 df"
LINEAR = "GEE, linear probability (identity link)"
LOGISTIC = "GEE, logistic (logit link)"
POSITIONS = ("B", "M", "E")
# Weight of each position in the middle loss (B + E)/2 − M.
WEIGHT = {"B": 0.5, "M": -1.0, "E": 0.5}


def _design(
    score: dict[Cell, int], cases: Sequence[str], lengths: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[tuple[str, int, str]]]:
    """Outcomes, cell indicators, case groups and the contrast vector, one row per answer."""
    cells = [(sim, n, pos) for sim in ("low", "high") for n in lengths for pos in POSITIONS]
    rows = [(c, cell) for c in cases for cell in cells]
    y = np.array([score[(c, n, sim, pos)] for c, (sim, n, pos) in rows], dtype=np.float64)
    x = np.zeros((len(rows), len(cells)))
    x[np.arange(len(rows)), [cells.index(cell) for _, cell in rows]] = 1.0
    groups = np.array([cases.index(c) for c, _ in rows])
    sign = {"low": -1.0, "high": 1.0}
    contrast = np.array([sign[s] * WEIGHT[p] / len(lengths) for s, _, p in cells])
    return y, x, groups, contrast, cells


def _fit(
    model: str,
    y: np.ndarray,
    x: np.ndarray,
    groups: np.ndarray,
    contrast: np.ndarray,
    estimate_pp: Fraction,
    decision: str,
    params: AnalysisParameters,
) -> ModelFit:
    from scipy import stats
    from statsmodels.genmod import cov_struct, families
    from statsmodels.genmod.generalized_estimating_equations import GEE

    n = int(groups.max()) + 1
    family = families.Gaussian() if model == LINEAR else families.Binomial()

    def unfit(why: str) -> ModelFit:
        return ModelFit(model, COVARIANCE, n, None, None, n - 1, None, None, None, why, None)

    if all(np.ptp(y[x[:, j] == 1]) == 0 for j in range(x.shape[1])):
        return unfit("no interval: every cell is all correct or all wrong (no variation)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter; the numbers are checked below
            gee = GEE(y, x, groups=groups, family=family, cov_struct=cov_struct.Independence())
            res = gee.fit(cov_type="bias_reduced")
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        return unfit(
            f"the fit failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        )
    estimate = float(contrast @ res.params)
    se = float(np.sqrt(max(contrast @ res.cov_params() @ contrast, 0.0)))
    if not (np.isfinite(estimate) and np.isfinite(se)) or se == 0:
        return unfit("no interval: " + ("every case has the same value" if se == 0 else
                                        "the fit is not finite"))  # fmt: skip
    tq = float(stats.t.ppf(1 - (1 - float(params.confidence)) / 2, n - 1))
    lower, upper = estimate - tq * se, estimate + tq * se
    p_one = float(stats.t.sf(estimate / se, n - 1))
    # The threshold is on the probability scale: the logistic fit reads the preregistered
    # estimate for it and contributes only the sign of its interval.
    passes = meets_rule(estimate_pp, Fraction(lower), params)
    return ModelFit(
        model=model,
        covariance=COVARIANCE,
        cases=n,
        estimate=estimate,
        se=se,
        df=n - 1,
        lower=lower,
        upper=upper,
        p_one_sided=p_one,
        note="",
        agrees=passes == (decision == SUPPORTED),
    )


def separated_cell(y: np.ndarray, x: np.ndarray, cells: list[tuple[str, int, str]]) -> str | None:
    """The first cell whose answers are all correct or all wrong, named; None if there is none."""
    for j, (sim, n, pos) in enumerate(cells):
        column = y[x[:, j] == 1]
        if column.size and column.min() == column.max():
            state = "all correct" if column[0] == 1 else "all wrong"
            return f"{pos} under {sim} similarity at {n} records is {state}"
    return None


def model_fits(
    score: dict[Cell, int],
    cases: Sequence[str],
    lengths: Sequence[int],
    estimate: Fraction,
    decision: str,
    params: AnalysisParameters,
) -> tuple[ModelFit, ...]:
    """The logistic and the linear-probability GEE of the complete cases (at least two)."""
    cases = list(cases)
    y, x, groups, contrast, cells = _design(score, cases, lengths)
    fits = []
    separated = separated_cell(y, x, cells)
    if separated is None:
        fits.append(_fit(LOGISTIC, y, x, groups, contrast, estimate, decision, params))
    else:
        note = f"not estimable: {separated} (separation: its logit is infinite)"
        fits.append(
            ModelFit(
                LOGISTIC,
                COVARIANCE,
                len(cases),
                None,
                None,
                len(cases) - 1,
                None,
                None,
                None,
                note,
                None,
            )
        )
    fits.append(_fit(LINEAR, y, x, groups, contrast, estimate, decision, params))
    return tuple(fits)
