"""The analysis of a depth design (PROTOCOL.md, "Depth analysis"): accuracy against depth, the
preregistered contrast, and a model that separates depth from the near names before the target.

A depth design replaces B, M and E by a grid of depths, and may draw its near-name slots per
case, so that how many near names sit ahead of the target varies at each depth. What is
computed here:

- **accuracy** per similarity × length × depth (exact-correct out of the valid answers);
- **the preregistered contrast** (``analysis.contrast``), high minus low similarity, each case's
  value averaged over the lengths; its interval is a case-cluster percentile bootstrap
  (scipy.stats.bootstrap, seeded by ``analysis.bootstrap_seed``); the decision is *supported*
  when the interval lies above 0 and the estimate reaches ``analysis.threshold``;
- **the two end contrasts** per similarity, first depth − interior mean and last depth −
  interior mean, each with its case-cluster interval; **the shape verdict** reads them with the
  reference analysis's rule (``analysis.shape``: the preregistered case-cluster bootstrap, Holm
  across the four end contrasts, a U-shape only when both ends beat the interior);
- **the model**: a linear-probability GEE per similarity (identity link, independence working
  correlation, bias-reduced sandwich covariance, t on cases − 1 df, as in the robustness
  panel), correctness on the depth (one indicator per depth after the first), the number of
  near names before the target and the length. Under high similarity its near-name coefficient
  is what near-duplicate names ahead of the target cost per name, depth held fixed; under low
  similarity the same slots hold unrelated names, a placebo.

- **the robustness line** (``depth_robustness``): the decision with each missing cell scored at
  four extremes, without each complete case, and by the exact sign-flip test of the case values
  (``analysis.robustness``'s test and wording), so a depth decision reads ``robust`` or
  ``fragile`` with its reasons like every other decision.

Failures, indeterminate and unexecuted requests are missing, never wrong.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, overload

import numpy as np

from needlepoint.analysis.inputs import AnalysisInput, Outcome
from needlepoint.analysis.record import AnalysisParameters, Scenario, ShapeRow, SignFlip
from needlepoint.analysis.robustness import sign_flip, verdict_text
from needlepoint.design.schema import SIMILARITIES
from needlepoint.errors import NeedlepointError

FORMAT = "needlepoint-depth-analysis"
VERSION = 1
SUPPORTED, NOT_SUPPORTED, UNDECIDED = "supported", "not supported", "not decided"
# Leave-one-out redraws the bootstrap once per case (time grows with the square of the cases);
# above this many cases it is left out, and the robustness line says so.
LEAVE_ONE_OUT_MAX = 200


def is_depth_design(protocol: dict[str, Any]) -> bool:
    """Whether a protocol declares a depth grid (and so is analysed here)."""
    return "depths" in protocol


def contrast_weights(name: str, depths: Sequence[float]) -> list[float]:
    """The weight of each depth in a named contrast (they sum to 0)."""
    m = len(depths)
    if name == "first-minus-last":
        return [1.0, *([0.0] * (m - 2)), -1.0]
    if m < 3:
        raise NeedlepointError(f"analysis.contrast {name} needs at least three depths")
    if name == "ends-minus-interior":
        return [0.5, *([-1.0 / (m - 2)] * (m - 2)), 0.5]
    if name == "ends-minus-centre":
        interior = list(range(1, m - 1))
        centre = min(interior, key=lambda i: (abs(depths[i] - 0.5), i))
        return [0.5 if i in (0, m - 1) else (-1.0 if i == centre else 0.0) for i in range(m)]
    raise NeedlepointError(f"analysis.contrast: unknown contrast {name!r}")


@dataclass(frozen=True)
class Interval:
    """An estimate with its case-cluster percentile-bootstrap interval."""

    estimate: float | None
    lower: float | None
    upper: float | None
    cases: int


@dataclass(frozen=True)
class Coefficient:
    """One GEE coefficient (probability points) with its t interval and two-sided p."""

    term: str
    estimate: float
    lower: float
    upper: float
    p_two_sided: float


@dataclass(frozen=True)
class ModelFit:
    """The GEE of one similarity arm; ``note`` says why there is none."""

    similarity: str
    rows: int
    cases: int
    coefficients: tuple[Coefficient, ...]
    note: str


@dataclass(frozen=True)
class DepthAnalysis:
    """Everything the depth analysis reports for one run."""

    simulation: bool
    depths: tuple[float, ...]
    conditions: tuple[str, ...]
    lengths: tuple[int, ...]
    contrast: str
    weights: tuple[float, ...]
    # (similarity, length, condition) -> (correct, valid, planned)
    accuracy: dict[tuple[str, int, str], tuple[int, int, int]]
    primary: Interval
    decision: str
    reason: str
    ends: dict[str, tuple[Interval, Interval]]  # similarity -> (first − interior, last − interior)
    models: tuple[ModelFit, ...]
    absent: dict[str, tuple[int, int]]  # similarity -> (UNKNOWN answers, valid)
    shapes: tuple[ShapeRow, ...] = ()  # each similarity's shape verdict, all lengths
    # similarity -> (wrong answers naming a near name before the target, after it, all wrong)
    near_named: dict[str, tuple[int, int, int]] | None = None
    robustness: DepthRobustness | None = None


@dataclass(frozen=True)
class DepthRobustness:
    """What-ifs beside the preregistered decision, ending in its one line (``verdict``)."""

    missing: tuple[Scenario, ...]
    leave_one_out: tuple[Scenario, ...]
    sign_flip: SignFlip | None
    verdict: str


@overload
def _round(x: float) -> float: ...
@overload
def _round(x: None) -> None: ...
def _round(x: float | None) -> float | None:
    # Six significant digits: the stored numbers do not depend on the last bits of a BLAS.
    return None if x is None else float(f"{x:.6g}")


def _accuracy(
    outcomes: Sequence[Outcome], conditions: Sequence[str], lengths: Sequence[int]
) -> dict[tuple[str, int, str], tuple[int, int, int]]:
    out = {}
    for sim in SIMILARITIES:
        for n in lengths:
            for cond in conditions:
                rows = [
                    o
                    for o in outcomes
                    if o.similarity == sim and o.length == n and o.condition == cond
                ]
                valid = [o for o in rows if o.valid]
                correct = sum(o.status == "correct" for o in valid)
                out[(sim, n, cond)] = (correct, len(valid), len(rows))
    return out


def _case_scores(
    outcomes: Sequence[Outcome],
    present: Sequence[str],
    lengths: Sequence[int],
    fill: dict[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """Complete cases → array [similarity, length, depth] of 0/1 exact-correct answers; with
    ``fill`` (seq → 0 or 1 for each missing cell), every case, its missing cells so scored."""
    cells: dict[str, dict[tuple[int, int, int], int]] = {}
    for o in outcomes:
        if o.condition in present and (o.valid or fill is not None):
            key = (
                SIMILARITIES.index(o.similarity),
                lengths.index(o.length),
                present.index(o.condition),
            )
            scored = int(o.status == "correct") if o.valid else fill[o.seq]  # type: ignore[index]
            cells.setdefault(o.case, {})[key] = scored
    need = 2 * len(lengths) * len(present)
    out = {}
    for case in sorted(cells, key=_case_number):
        values = cells[case]
        if len(values) == need:
            grid = np.zeros((2, len(lengths), len(present)))
            for (s, li, d), v in values.items():
                grid[s, li, d] = v
            out[case] = grid
    return out


def _case_number(case: str) -> int:
    return int(case[1:]) if case[1:].isdigit() else 0


def case_interval(values: np.ndarray, params: AnalysisParameters, salt: int) -> Interval:
    """Mean of per-case values with a percentile bootstrap over cases (seeded, recorded)."""
    from scipy import stats

    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0)
    estimate = float(values.mean())
    if n < 2 or np.ptp(values) == 0:
        return Interval(_round(estimate), _round(estimate), _round(estimate), n)
    rng = np.random.default_rng([params.bootstrap_seed, salt])
    res = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=params.bootstrap_resamples,
        confidence_level=params.confidence,
        method="percentile",
        random_state=rng,
    )
    ci = res.confidence_interval
    return Interval(_round(estimate), _round(float(ci.low)), _round(float(ci.high)), n)


def _gee(
    outcomes: Sequence[Outcome],
    present: Sequence[str],
    lengths: Sequence[int],
    sim: str,
    confidence: float,
) -> ModelFit:
    from scipy import stats
    from statsmodels.genmod import cov_struct, families
    from statsmodels.genmod.generalized_estimating_equations import GEE

    rows = [
        o
        for o in outcomes
        if o.similarity == sim and o.condition in present and o.valid and o.near_before is not None
    ]
    cases = sorted({o.case for o in rows})
    terms = [
        *(f"depth {c[1:]}" for c in present[1:]),
        "near names before",
        *(f"length {n}" for n in lengths[1:]),
    ]
    if len(cases) < 2:
        return ModelFit(sim, len(rows), len(cases), (), "too few cases for a model")
    x = np.zeros((len(rows), 1 + len(terms)))
    x[:, 0] = 1.0
    for i, o in enumerate(rows):
        d = present.index(o.condition)
        if d > 0:
            x[i, d] = 1.0
        x[i, len(present)] = float(o.near_before or 0)
        li = lengths.index(o.length)
        if li > 0:
            x[i, len(present) + li] = 1.0
    y = np.array([float(o.status == "correct") for o in rows])
    groups = np.array([cases.index(o.case) for o in rows])
    if np.linalg.matrix_rank(x) < x.shape[1]:
        return ModelFit(
            sim,
            len(rows),
            len(cases),
            (),
            "not estimable: the near names before the target are fixed by the depth "
            "(fixed placement), so the model cannot separate them",
        )
    if np.ptp(y) == 0:
        return ModelFit(sim, len(rows), len(cases), (), "not estimable: every answer is the same")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = GEE(
                y,
                x,
                groups=groups,
                family=families.Gaussian(),
                cov_struct=cov_struct.Independence(),
            ).fit(cov_type="bias_reduced")
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        return ModelFit(sim, len(rows), len(cases), (), f"the fit failed: {type(exc).__name__}")
    df = len(cases) - 1
    tq = float(stats.t.ppf(1 - (1 - confidence) / 2, df))
    se = np.sqrt(np.clip(np.diag(fit.cov_params()), 0.0, None))
    if not (np.isfinite(fit.params).all() and np.isfinite(se).all()):
        # depth.json is strict JSON (NaN is refused when written): no coefficient is better
        # than a NaN one, and the note says why.
        return ModelFit(sim, len(rows), len(cases), (), "the fit failed: not finite")
    coefs = []
    for j, term in enumerate(terms, start=1):
        b, s = float(fit.params[j]), float(se[j])
        p = float(2 * stats.t.sf(abs(b / s), df)) if s > 0 else 1.0
        coefs.append(
            Coefficient(term, _round(b), _round(b - tq * s), _round(b + tq * s), _round(p))
        )
    return ModelFit(sim, len(rows), len(cases), tuple(coefs), "")


def depth_shapes(
    grids: np.ndarray,
    present: Sequence[str],
    accuracy: dict[tuple[str, int, str], tuple[int, int, int]],
    lengths: Sequence[int],
    params: AnalysisParameters,
) -> tuple[ShapeRow, ...]:
    """Each similarity's shape verdict from first depth − interior and last depth − interior,
    over all lengths and, when there are several, at each length, with the reference
    analysis's rule and multiplicity (``analysis.shape``: Holm across every row printed).

    Each case's contrast is an integer over ``lengths × interior depths`` (the end counted once
    per interior depth, the interior summed), so the exact case-cluster bootstrap applies.
    """
    from fractions import Fraction

    from needlepoint.analysis.shape import adjust, classify, contrast

    k = len(present)
    if k < 3:  # no interior depth: no end can be set against it
        return ()
    alpha = float(1 - Fraction(repr(float(params.confidence))))
    # The rows: per similarity, all lengths, then each length when there are several.
    rows_of: list[tuple[int, int | None]] = []
    for s, _ in enumerate(SIMILARITIES):
        rows_of.append((s, None))
        if len(lengths) > 1:
            rows_of += [(s, n) for n in lengths]
    family = []
    for s, n in rows_of:
        arm = grids[:, s] if len(grids) else np.zeros((0, len(lengths), k))
        if n is not None:
            arm = arm[:, [lengths.index(n)]]
        inner = arm[:, :, 1:-1].sum(axis=2)
        denominator = arm.shape[1] * (k - 2)
        for end in (0, k - 1):
            values = ((k - 2) * arm[:, :, end] - inner).sum(axis=1)
            name = "first depth − interior" if end == 0 else "last depth − interior"
            family.append(contrast(name, [int(v) for v in values], denominator, params))
    family = adjust(family, alpha)
    rows = []
    for i, (s, n) in enumerate(rows_of):
        sim = SIMILARITIES[s]
        first, last = family[2 * i], family[2 * i + 1]
        verdict, reason = classify(first, last)
        counts = {}
        for cond in present:
            cells = [accuracy[(sim, m, cond)] for m in lengths if n is None or m == n]
            counts[cond] = f"{sum(c[0] for c in cells)}/{sum(c[1] for c in cells)}"
        rows.append(ShapeRow(sim, n, first, last, counts, verdict, reason))
    return tuple(rows)


def near_named(
    outcomes: Sequence[Outcome], present: Sequence[str]
) -> dict[str, tuple[int, int, int]]:
    """Per similarity, the wrong answers to a present target that name a near name placed
    before it, after it, and all wrong answers (under low similarity the slots hold unrelated
    names: a placebo)."""
    out = {}
    for sim in SIMILARITIES:
        wrong = [
            o
            for o in outcomes
            if o.similarity == sim and o.condition in present and o.status == "error"
        ]
        before = sum(o.near_side == "before" for o in wrong)
        after = sum(o.near_side == "after" for o in wrong)
        out[sim] = (before, after, len(wrong))
    return out


def per_case_values(grids: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Each complete case's preregistered value: its contrast at high minus at low similarity,
    averaged over the lengths (``grids``: cases × similarity × length × depth, 0/1)."""
    if not len(grids):
        return np.zeros(0)
    return ((grids[:, 1] - grids[:, 0]) @ np.asarray(weights, dtype=float)).mean(axis=1)


def integer_weights(weights: Sequence[float]) -> tuple[list[int], int]:
    """The contrast's weights as integers over one denominator (each weight is a small fraction:
    1/2, −1/(depths − 2), −1, 0), so that the sign-flip test can count in integers."""
    exact = [Fraction(w).limit_denominator(10**6) for w in weights]
    scale = math.lcm(*(f.denominator for f in exact))
    return [int(f * scale) for f in exact], scale


def _scenario(
    kind: str,
    label: str,
    cells: tuple[int, ...],
    values: np.ndarray,
    params: AnalysisParameters,
    observed: str,
) -> Scenario:
    """One what-if, decided by the decision's own rule (a percentile interval has no exact
    estimate: its bounds are stored as the floats' shortest text)."""
    iv = case_interval(values, params, 0)
    decision, _ = decide(iv, params)
    lower, upper = (None if b is None else repr(b) for b in (iv.lower, iv.upper))
    # Scenario's fields in order: kind, label, cells, complete cases, estimate and its exact
    # text, the bounds, the decision and whether it changed.
    return Scenario(kind, label, cells, iv.cases, iv.estimate, None, lower, upper, decision,
                    decision != observed)  # fmt: skip


def depth_robustness(
    outcomes: Sequence[Outcome],
    scores: dict[str, np.ndarray],
    present: Sequence[str],
    lengths: Sequence[int],
    weights: Sequence[float],
    params: AnalysisParameters,
    decision: str,
) -> DepthRobustness:
    """The decision's what-ifs, each decided by ``decide`` on the same case-cluster bootstrap:

    - **missing cells**, all scored at once four ways (all correct, all wrong, each at the value
      that lowers the contrast, each at the value that raises it; identical assignments named
      together), which bounds every way of scoring them;
    - **leave one case out** (up to ``LEAVE_ONE_OUT_MAX`` cases);
    - **the exact sign-flip test** of the complete cases' values (``analysis.robustness``).

    ``scores``: the complete cases' grids, as the decision read them (``_case_scores``).
    """
    if decision == UNDECIDED:
        return DepthRobustness((), (), None, "")
    grids = np.array(list(scores.values()))
    missing = [o for o in outcomes if o.condition in present and not o.valid]
    cells = tuple(sorted(o.seq for o in missing))
    iw, scale = integer_weights(weights)

    def lowers(o: Outcome) -> int:
        # Scoring the cell correct adds +w under high similarity and −w under low.
        sign = 1 if o.similarity == "high" else -1
        return int(sign * iw[present.index(o.condition)] < 0)

    assignments: dict[tuple[int, ...], list[str]] = {}
    for label, value in (
        ("all missing cells correct", lambda o: 1),
        ("all missing cells wrong", lambda o: 0),
        ("each missing cell at the value that lowers the contrast", lowers),
        ("each missing cell at the value that raises it", lambda o: 1 - lowers(o)),
    ):
        if missing:
            assignments.setdefault(tuple(value(o) for o in missing), []).append(label)
    scenarios = []
    for key, labels in assignments.items():
        fill = dict(zip((o.seq for o in missing), key, strict=True))
        grid = np.array(list(_case_scores(outcomes, present, lengths, fill).values()))
        scenarios.append(
            _scenario("missing cells", "; ".join(labels), cells,
                      per_case_values(grid, weights), params, decision)
        )  # fmt: skip
    loo: list[Scenario] = []
    if 1 < len(grids) <= LEAVE_ONE_OUT_MAX:
        for i, case in enumerate(scores):
            rest = np.delete(grids, i, axis=0)
            loo.append(
                _scenario("leave one out", f"without {case}", (),
                          per_case_values(rest, weights), params, decision)
            )  # fmt: skip
    flip = None
    if len(grids):
        nums = [round(float(((g[1] - g[0]) @ np.array(iw)).sum())) for g in grids]
        flip = sign_flip(nums, scale * len(lengths), params, decision == SUPPORTED)
    verdict = verdict_text(scenarios, loo, flip, None, ())
    if len(grids) > LEAVE_ONE_OUT_MAX:
        verdict += f"; leaving out one case not checked above {LEAVE_ONE_OUT_MAX} cases"
    return DepthRobustness(tuple(scenarios), tuple(loo), flip, verdict)


def decide(primary: Interval, params: AnalysisParameters) -> tuple[str, str]:
    """The depth design's preregistered decision and its reason: the one copy of the rule
    (the analysis and the calibration's power search both call it)."""
    need = params.min_complete_cases
    if primary.cases < need or primary.estimate is None:
        return UNDECIDED, f"{primary.cases} complete cases, fewer than the {need} required"
    if primary.lower is not None and primary.lower > 0 and primary.estimate >= params.threshold:
        return SUPPORTED, f"interval above 0 and estimate ≥ {params.threshold:g}"
    return NOT_SUPPORTED, f"interval not above 0 or estimate below {params.threshold:g}"


def analyze_depth(inp: AnalysisInput) -> DepthAnalysis:
    """The depth analysis of one validated run of a depth design."""
    p = inp.protocol
    if not is_depth_design(p):
        raise NeedlepointError("not a depth design: the protocol declares no depths")
    params = AnalysisParameters.of(p)
    depths = [float(d) for d in p["depths"]]
    conditions = list(p["conditions"])
    present = [c for c in conditions if c != "A"]
    lengths = [int(n) for n in p["lengths"]]
    name = p["analysis"]["contrast"]
    weights = contrast_weights(name, depths)
    accuracy = _accuracy(inp.outcomes, conditions, lengths)
    scores = _case_scores(inp.outcomes, present, lengths)
    grids = (
        np.array(list(scores.values())) if scores else np.zeros((0, 2, len(lengths), len(present)))
    )
    primary = case_interval(per_case_values(grids, weights), params, 0)
    decision, reason = decide(primary, params)
    ends = {}
    interior = np.zeros(len(present))
    interior[1:-1] = 1.0 / max(1, len(present) - 2)
    for s, sim in enumerate(SIMILARITIES):
        arm = grids[:, s].mean(axis=1) if len(grids) else np.zeros((0, len(present)))
        inner = arm @ interior if len(present) > 2 else arm[:, -1]
        first = (
            case_interval(arm[:, 0] - inner, params, 1 + 2 * s)
            if len(arm)
            else Interval(None, None, None, 0)
        )
        last = (
            case_interval(arm[:, -1] - inner, params, 2 + 2 * s)
            if len(arm)
            else Interval(None, None, None, 0)
        )
        ends[sim] = (first, last)
    models = tuple(
        _gee(inp.outcomes, present, lengths, sim, params.confidence) for sim in SIMILARITIES
    )
    absent = {}
    for sim in SIMILARITIES:
        rows = [o for o in inp.outcomes if o.similarity == sim and o.condition == "A" and o.valid]
        absent[sim] = (sum(o.status == "correct" for o in rows), len(rows))
    return DepthAnalysis(
        simulation=inp.simulation,
        depths=tuple(depths),
        conditions=tuple(conditions),
        lengths=tuple(lengths),
        contrast=name,
        weights=tuple(_round(x) for x in weights),
        accuracy=accuracy,
        primary=primary,
        decision=decision,
        reason=reason,
        ends=ends,
        models=models,
        absent=absent,
        shapes=depth_shapes(grids, present, accuracy, lengths, params),
        near_named=near_named(inp.outcomes, present),
        robustness=depth_robustness(
            inp.outcomes, scores, present, lengths, weights, params, decision
        ),
    )
