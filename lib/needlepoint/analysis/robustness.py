"""The robustness panel: how much the preregistered verdict depends on what.

- **Missing cells.** Every response that is not protocol-valid (failed, indeterminate or
  unexecuted) blocks its case. Each is scored correct and wrong: one at a time where it is the
  only missing cell of its case (otherwise that case stays incomplete and nothing changes), and
  all together at four extremes: all correct, all wrong, each at the value that lowers the
  difference (the lower bound) and each at the value that raises it (the upper bound). Identical
  assignments are reported once, with every name they go by.
- **Leave one case out.** The decision without each complete case.
- **Method.** An exact sign-flip test, a BCa interval and two GEE fits, each compared with the
  preregistered decision.

The panel ends in one line: ``robust``, or ``fragile: changes when …`` naming each change. The
preregistered decision itself never changes: these are what-ifs, reported beside it.

**Sign flip.** Written here rather than taken from scipy because it must be exact: the p-value
is a fraction of the 2^n sign patterns, counted in integers (``scipy.stats.permutation_test``
enumerates in floating point and cannot give that fraction).

**The model-based check** (``model_fits``): GEE fits of correctness over the complete cases,
clustered by case. Both fits take the B, M and E answers of the complete cases, one indicator
per similarity × position × length cell (a saturated model: its coefficients are the cell rates,
or their logits), an independence working correlation and statsmodels' bias-reduced
(Mancl–DeRouen) sandwich covariance, which corrects the robust covariance's downward bias with
few clusters. The tested contrast is the preregistered one: the middle loss (B + E)/2 − M under
high minus under low similarity, averaged over the lengths, with a t reference on cases − 1
degrees of freedom.

- The **logistic** fit (logit link) is the conventional model, but it has no finite estimate
  when a cell is all correct or all wrong (separation), which small designs produce often; then
  it is reported as not estimable, with the cell that causes it.
- The **linear-probability** fit (identity link) is always estimable; its contrast equals the
  preregistered estimate exactly, so it checks the interval method, not the estimate.

docs/analysis.md says why both, and what a sandwich estimate from a handful of clusters is worth.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from fractions import Fraction

import numpy as np

from needlepoint.analysis.bootstrap import (
    EXACT,
    MONTE_CARLO,
    _numerators,
    quantile_need,
    resample_indices,
    tail_probabilities,
)
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.primary import (
    MEASURES,
    NOT_EVALUABLE,
    NOT_SUPPORTED,
    POSITIONS,
    SUPPORTED,
    Cell,
    decide,
    evaluable,
    fmt,
    meets_rule,
    preregistered_numerators,
    scores,
)
from needlepoint.analysis.record import (
    AnalysisParameters,
    ModelFit,
    Primary,
    Robustness,
    Scenario,
    SecondInterval,
    SignFlip,
)

BCA = "BCa (scipy.stats.bootstrap)"
# Up to this many cases the sign-flip test counts all 2^n patterns; above it, Monte Carlo.
SIGN_FLIP_EXACT_MAX = 20


def raises_difference(o: Outcome) -> bool:
    """Whether a correct answer in this cell raises the similarity difference in middle loss.

    B and E raise the middle loss, M lowers it; high similarity counts plus, low minus. A does
    not enter the metric, so either value serves; it is scored correct.
    """
    if o.condition not in ("B", "M", "E"):
        return True
    return (o.similarity == "high") == (o.condition in ("B", "E"))


def _cell_name(o: Outcome) -> str:
    return f"seq {o.seq} ({o.case}, {o.length} records, {o.similarity}, {o.condition})"


def _scenario(
    kind: str,
    label: str,
    outcomes: Sequence[Outcome],
    assignment: dict[int, bool],
    params: AnalysisParameters,
    observed: str,
) -> Scenario:
    def scored(o: Outcome) -> Outcome:
        if o.seq not in assignment:
            return o
        # The numerators read the status alone: a scored cell is valid whatever kind it had.
        return replace(o, status="correct" if assignment[o.seq] else "error")

    _, nums, den = preregistered_numerators([scored(o) for o in outcomes])
    return _from_decision(kind, label, tuple(sorted(assignment)), nums, den, params, observed)


def _from_decision(
    kind: str,
    label: str,
    cells: tuple[int, ...],
    nums: Sequence[int],
    den: int,
    params: AnalysisParameters,
    observed: str,
) -> Scenario:
    d = decide(nums, den, params)
    return Scenario(
        kind=kind,
        label=label,
        cells=cells,
        complete_cases=len(nums),
        estimate=d.estimate,
        estimate_exact=d.estimate_exact,
        lower_exact=None if d.interval is None else d.interval.lower_exact,
        upper_exact=None if d.interval is None else d.interval.upper_exact,
        decision=d.decision,
        changes=d.decision != observed,
    )


def missing_scenarios(
    outcomes: Sequence[Outcome], params: AnalysisParameters, observed: str
) -> tuple[Scenario, ...]:
    """The decision with the missing cells scored: one at a time, then at the four extremes."""
    missing = [o for o in outcomes if not o.valid]
    if not missing:
        return ()
    per_case = Counter(o.case for o in missing)
    plans: list[tuple[str, str, dict[int, bool]]] = []
    for o in missing:
        if per_case[o.case] == 1:
            for right in (True, False):
                label = f"{_cell_name(o)} is scored {'correct' if right else 'wrong'}"
                plans.append(("one cell", label, {o.seq: right}))
    every = {
        "every missing cell is scored correct": {o.seq: True for o in missing},
        "every missing cell is scored wrong": {o.seq: False for o in missing},
        "every missing cell is set to lower the difference (lower bound)": {
            o.seq: not raises_difference(o) if o.condition != "A" else True for o in missing
        },
        "every missing cell is set to raise the difference (upper bound)": {
            o.seq: raises_difference(o) for o in missing
        },
    }
    plans += [("all cells", label, a) for label, a in every.items()]
    merged: dict[frozenset[tuple[int, bool]], tuple[str, list[str], dict[int, bool]]] = {}
    for kind, label, assignment in plans:
        key = frozenset(assignment.items())
        if key in merged:
            merged[key][1].append(label)
        else:
            merged[key] = (kind, [label], assignment)
    return tuple(
        _scenario(kind, "; ".join(labels), outcomes, assignment, params, observed)
        for kind, labels, assignment in merged.values()
    )


def leave_one_out(
    cases: Sequence[str], nums: Sequence[int], den: int, params: AnalysisParameters, observed: str
) -> tuple[Scenario, ...]:
    """The decision without each complete case in turn: exact, in time linear in the cases
    (``leave_one_out.shared_bounds``: one shared bootstrap draw, as each fresh decision would
    draw it), or by ``decide`` where the exact bootstrap makes that cheap."""
    shared = shared_bounds(nums, params)
    if shared is None:
        return tuple(
            _from_decision(
                "leave one out",
                f"without {case}",
                (),
                [*nums[:i], *nums[i + 1 :]],
                den,
                params,
                observed,
            )
            for i, case in enumerate(cases)
        )
    scale = (len(nums) - 1) * den
    out = []
    for case, (total, low, high) in zip(cases, shared, strict=True):
        estimate, lower, upper = (Fraction(x, scale) for x in (total, low, high))
        decision = decision_of(total, scale, lower, params)
        out.append(
            Scenario(
                kind="leave one out",
                label=f"without {case}",
                cells=(),
                complete_cases=len(nums) - 1,
                estimate=float(estimate),
                estimate_exact=str(estimate),
                lower_exact=str(lower),
                upper_exact=str(upper),
                decision=decision,
                changes=decision != observed,
            )
        )
    return tuple(out)


def robustness(
    outcomes: Sequence[Outcome], params: AnalysisParameters, primary: Primary
) -> Robustness:
    """The whole panel for one run, ending in its one-line verdict."""
    observed = primary.decision
    cases, nums, den = preregistered_numerators(outcomes)
    missing = missing_scenarios(outcomes, params, observed)
    evaluable = observed != NOT_EVALUABLE
    loo = leave_one_out(cases, nums, den, params, observed) if evaluable else ()
    supported = observed == SUPPORTED
    flip = sign_flip(nums, den, params, supported) if evaluable else None
    second = bca_interval(nums, den, params, supported) if evaluable else None
    models = ()
    if evaluable:
        lengths = sorted({o.length for o in outcomes})
        estimate = Fraction(sum(nums), len(nums) * den)
        models = model_fits(scores(outcomes), cases, lengths, estimate, observed, params)
    changes = [f"{s.label.split('; ')[0]} ({s.decision})" for s in missing if s.changes]
    changes += [f"case {s.label.removeprefix('without ')} is left out ({s.decision})"
                for s in loo if s.changes]  # fmt: skip
    if second is not None and second.agrees is False:
        changes.append(f"the BCa interval decides instead (lower bound {fmt(second.lower or 0)})")
    if flip is not None and not flip.agrees:
        changes.append(f"the sign-flip test decides instead (one-sided p {flip.p_one_sided_exact})")
    changes += [f"the {m.model} decides instead" for m in models if m.agrees is False]
    verdict = verdict_text(missing, loo, flip, second, models)
    return Robustness(
        missing=missing,
        leave_one_out=loo,
        sign_flip=flip,
        second_interval=second,
        models=models,
        changes=tuple(changes),
        verdict=verdict,
    )


def _listed(items: Sequence[str], last: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def verdict_text(
    missing: Sequence[Scenario],
    loo: Sequence[Scenario],
    flip: SignFlip | None,
    second: SecondInterval | None,
    models: Sequence[ModelFit],
) -> str:
    """The panel's one line: ``robust`` or ``fragile``, always followed by the checks that
    decide it, e.g. "fragile: leaving out S6 flips it; sign-flip p 7/128"."""
    p = f"sign-flip p {flip.p_one_sided_exact}" if flip is not None else None
    flips = [s.label.removeprefix("without ") for s in loo if s.changes]
    cells = [f"{s.label.split('; ')[0]} ({s.decision})" for s in missing if s.changes]
    methods = []
    if second is not None and second.agrees is False:
        methods.append(f"the BCa interval disagrees (lower bound {fmt(second.lower or 0)})")
    if flip is not None and not flip.agrees:
        methods.append(f"the sign-flip test disagrees (p {flip.p_one_sided_exact})")
    methods += [f"the {m.model} disagrees" for m in models if m.agrees is False]
    if not (flips or cells or methods):
        cells_missing = len({c for s in missing for c in s.cells})
        plural = "s" * (cells_missing != 1)
        checked = [f"no way of scoring its {cells_missing} missing cell{plural}" if missing
                   else "no missing cell"]  # fmt: skip
        if loo:
            checked.append("no single case")
        if flip is not None or second is not None or models:
            checked.append("no other method")
        return f"robust: {_listed(checked, 'and')} changes it" + (f"; {p}" if p else "")
    reasons = []
    if flips:
        of = f" ({len(flips)} of {len(loo)} cases)" if len(flips) > 1 else ""
        reasons.append(f"leaving out {_listed(flips)} flips it{of}")
    if cells:
        reasons.append("it flips when " + "; when ".join(cells))
    reasons += methods
    if p is not None and not any(m.startswith("the sign-flip") for m in methods):
        reasons.append(p)
    return "fragile: " + "; ".join(reasons)


# --- other methods: the sign-flip test and the BCa interval --------------------------------------


def _signed_sum_counts(values: Sequence[int]) -> tuple[int, np.ndarray]:
    """How many of the 2^n sign patterns give each signed sum: (lowest sum, counts)."""
    span = sum(abs(v) for v in values)
    counts = np.zeros(2 * span + 1, dtype=np.int64)
    counts[span] = 1  # the empty sum, at offset ``span``
    for v in values:
        a = abs(v)
        if a == 0:
            counts = counts * 2  # a zero keeps the sum under both signs
            continue
        shifted = np.zeros_like(counts)
        shifted[a:] += counts[:-a]  # +|v|
        shifted[:-a] += counts[a:]  # -|v|
        counts = shifted
    return -span, counts


def sign_flip(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters, supported: bool
) -> SignFlip:
    """One- and two-sided p of the sum of case values under random signs, and whether the test
    agrees with the decision (``supported``).

    Exact up to ``SIGN_FLIP_EXACT_MAX`` cases: every pattern counted once, p a fraction of
    2^n. Above, ``default_rng(bootstrap_seed)`` draws ``bootstrap_resamples`` patterns and
    p = (1 + hits) / (1 + draws), counting the observed pattern as one draw.
    """
    nums = [int(v) for v in numerators]
    n = len(nums)
    if n == 0:
        raise ValueError("the sign-flip test needs at least one case")
    observed = sum(nums)
    if n <= SIGN_FLIP_EXACT_MAX:
        lowest, counts = _signed_sum_counts(nums)
        sums = np.arange(lowest, lowest + counts.size)
        method, patterns, seed = EXACT, 2**n, None
        one = Fraction(int(counts[sums >= observed].sum()), patterns)
        two = Fraction(int(counts[np.abs(sums) >= abs(observed)].sum()), patterns)
    else:
        patterns, seed = int(params.bootstrap_resamples), int(params.bootstrap_seed)
        signs = np.random.default_rng(seed).integers(0, 2, (patterns, n), dtype=np.int8) * 2 - 1
        stats = signs.astype(np.int64) @ np.array(nums, dtype=np.int64)
        method = MONTE_CARLO
        one = Fraction(1 + int((stats >= observed).sum()), 1 + patterns)
        two = Fraction(1 + int((np.abs(stats) >= abs(observed)).sum()), 1 + patterns)
    alpha, _ = tail_probabilities(float(params.confidence))
    # The test's counterpart of "the lower bound is above 0": p below the interval's tail α.
    passes = meets_rule(observed, n * denominator, one < alpha, params)
    return SignFlip(
        cases=n,
        method=method,
        patterns=patterns,
        seed=seed,
        statistic_exact=str(Fraction(observed, n * denominator)),
        p_one_sided=float(one),
        p_one_sided_exact=str(one),
        p_two_sided=float(two),
        p_two_sided_exact=str(two),
        agrees=passes == supported,
    )


def bca_interval(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters, supported: bool
) -> SecondInterval:
    """``scipy.stats.bootstrap(method="BCa")`` on the case values, seeded with the protocol's
    bootstrap seed, and whether it agrees with the decision (``supported``); None bounds, with
    the reason, where BCa is undefined."""
    from scipy import stats

    values = np.asarray(numerators, dtype=np.float64) / denominator
    draws, seed = int(params.bootstrap_resamples), int(params.bootstrap_seed)
    confidence = float(params.confidence)
    if values.size < 2 or np.all(values == values[0]):
        why = "fewer than two cases" if values.size < 2 else "every case has the same value"
        return SecondInterval(BCA, confidence, None, None, draws, seed, f"undefined: {why}", None)
    with warnings.catch_warnings():
        # A degenerate jackknife or resample set gives NaN with a warning; NaN is reported.
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (values,),
            np.mean,
            confidence_level=confidence,
            n_resamples=draws,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        why = "undefined: the BCa correction is not finite"
        return SecondInterval(BCA, confidence, None, None, draws, seed, why, None)
    passes = meets_rule(sum(int(v) for v in numerators), len(values) * denominator, lo > 0, params)
    return SecondInterval(BCA, confidence, lo, hi, draws, seed, "", passes == supported)


# --- the model-based check -----------------------------------------------------------------------


COVARIANCE = "bias-reduced sandwich (Mancl–DeRouen), t on cases − 1 df"
LINEAR = "GEE, linear probability (identity link)"
LOGISTIC = "GEE, logistic (logit link)"
# Weight of each position in the middle loss (B + E)/2 − M: the metric's own coefficients.
_COEFFICIENTS, _PER_BLOCK = MEASURES["middle loss"]
WEIGHT = {p: c / _PER_BLOCK for p, c in zip(POSITIONS, _COEFFICIENTS, strict=True)}


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


def _unfit(model: str, cases: int, why: str) -> ModelFit:
    """A fit that gives no estimate, and why."""
    return ModelFit(model, COVARIANCE, cases, None, None, cases - 1, None, None, None, why, None)


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
    if all(np.ptp(y[x[:, j] == 1]) == 0 for j in range(x.shape[1])):
        return _unfit(
            model, n, "no interval: every cell is all correct or all wrong (no variation)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter; the numbers are checked below
            gee = GEE(y, x, groups=groups, family=family, cov_struct=cov_struct.Independence())
            res = gee.fit(cov_type="bias_reduced")
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        return _unfit(
            model,
            n,
            f"the fit failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
        )
    estimate = float(contrast @ res.params)
    se = float(np.sqrt(max(contrast @ res.cov_params() @ contrast, 0.0)))
    if not (np.isfinite(estimate) and np.isfinite(se)) or se == 0:
        why = "every case has the same value" if se == 0 else "the fit is not finite"
        return _unfit(model, n, f"no interval: {why}")
    tq = float(stats.t.ppf(1 - (1 - float(params.confidence)) / 2, n - 1))
    lower, upper = estimate - tq * se, estimate + tq * se
    p_one = float(stats.t.sf(estimate / se, n - 1))
    # The threshold is on the probability scale: the logistic fit reads the preregistered
    # estimate for it and contributes only the sign of its interval.
    passes = meets_rule(estimate_pp.numerator, estimate_pp.denominator, lower > 0, params)
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
        fits.append(_unfit(LOGISTIC, len(cases), note))
    fits.append(_fit(LINEAR, y, x, groups, contrast, estimate, decision, params))
    return tuple(fits)


# The robustness panel's leave-one-out bounds, exact and in time linear in the cases.
#
# Leaving case ``i`` out of ``n`` and deciding again (``primary.decide``) draws the Monte Carlo
# bootstrap of the ``m = n - 1`` remaining cases: ``resample_indices(m, R, seed)``. That draw is
# the **same** for every ``i`` (same ``m``, same protocol seed); only which case each index names
# changes: index ``k`` names case ``k`` when ``k < i`` and case ``k + 1`` otherwise. So with
# ``c[k, r]``, how often resample ``r`` draws index ``k``, the resample sums without case ``i``
# are
#
#     S_i[r] = sum_k c[k, r] * v[k + (k >= i)],   and   S_{i+1} = S_i + c[i] * (v[i] - v[i + 1]),
#
# one vector update per case. Each bound is one order statistic of ``S_i`` (``np.partition``,
# linear in R): the ``quantile_need``-th smallest sum, the inverse-CDF quantile that
# ``bootstrap.percentile_interval`` takes. The result is the one that deciding afresh for each
# ``i`` gives, bit for bit (a test checks it), in O(n * R) time instead of O(n^2 * R): 3.7 s of
# CPU at 200 cases and 226 s at 2,000 before, see ``benchmarks/bench_leave_one_out.py``.
#
# Memory: the draw (4 bytes per resample and case) and the counts (2), below the 12 bytes per
# resample and case that the primary analysis's own bootstrap needs (PROTOCOL.md, *Limits*).
# With at most ``exact_bootstrap_max_cases`` remaining cases the exact bootstrap is cheap and
# ``decide`` is called as before.

# Resamples handled at once while the draw becomes counts: bounds the temporary arrays.
_ROWS = 256


def shared_bounds(
    numerators: Sequence[int], params: AnalysisParameters
) -> Iterator[tuple[int, int, int]] | None:
    """``(total, lower sum, upper sum)`` of the resample sums without each case in turn, from
    one shared draw; None when the remaining cases take the exact bootstrap (or too few remain
    to decide), where ``decide`` is cheap and used instead."""
    m = len(numerators) - 1
    if m <= int(params.exact_bootstrap_max_cases) or not evaluable(m, params):
        return None
    v = _numerators(numerators)
    resamples, seed = int(params.bootstrap_resamples), int(params.bootstrap_seed)
    lo_p, hi_p = tail_probabilities(float(params.confidence))
    k_lo = quantile_need(resamples, lo_p) - 1
    k_hi = quantile_need(resamples, hi_p) - 1
    return _walk(v, m, resamples, seed, (k_lo, k_hi))


def _walk(
    v: np.ndarray, m: int, resamples: int, seed: int, ranks: tuple[int, int]
) -> Iterator[tuple[int, int, int]]:
    drawn = resample_indices(m, resamples, seed)
    counts = np.empty((m, resamples), dtype=np.uint16)  # m <= 10,000 cases: a count fits
    sums = np.empty(resamples, dtype=np.int64)
    rest = v[1:]  # leaving out case 0: index k names case k + 1
    for start in range(0, resamples, _ROWS):
        block = drawn[start : start + _ROWS].astype(np.int64)
        rows = block.shape[0]
        sums[start : start + rows] = rest[block].sum(axis=1)
        flat = (block + (np.arange(rows, dtype=np.int64) * m)[:, None]).ravel()
        per_row = np.bincount(flat, minlength=rows * m).reshape(rows, m)
        counts[:, start : start + rows] = per_row.T
    del drawn
    total = int(v.sum())
    k_lo, k_hi = ranks
    for i in range(m + 1):
        if i > 0:
            # index i - 1 named case i; now it names case i - 1
            sums += counts[i - 1].astype(np.int64) * int(v[i - 1] - v[i])
        part = np.partition(sums, (k_lo, k_hi))
        yield total - int(v[i]), int(part[k_lo]), int(part[k_hi])


def decision_of(total: int, scale: int, lower: Fraction, params: AnalysisParameters) -> str:
    """The preregistered rule on one leave-one-out estimate and lower bound."""
    return SUPPORTED if meets_rule(total, scale, lower > 0, params) else NOT_SUPPORTED
