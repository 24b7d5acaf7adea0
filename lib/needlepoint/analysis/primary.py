"""The preregistered primary analysis: completeness, middle loss, the bootstrap and the decision.

A block (case × length × similarity) is complete only when all its responses are protocol-valid,
a pair only when both similarity blocks are, and a case only when every planned length is. Only
complete cases enter the metric; everything else is listed, with its reason, as exploratory.
Missing cells are never read as zero. Arithmetic on 0/1 outcomes is done in integers and exact
fractions, so the decision never hinges on how 0.1 rounds in binary.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from needlepoint.analysis.bootstrap import as_fraction, percentile_interval
from needlepoint.analysis.inputs import AnalysisInput, Outcome

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
NOT_EVALUABLE = "not evaluable"
SIMULATION_BANNER = "SIMULATION — not a model result"


def natural_key(label: str) -> tuple[Any, ...]:
    """Sort S2 before S10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label))


def _fmt(x: Fraction | float) -> str:
    """A short, stable number for reasons and summaries."""
    return f"{float(x):.4g}"


def _problem(o: Outcome) -> str:
    return f"seq {o.seq} {o.category}" + (f" ({o.kind})" if o.kind else "")


def completeness(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Which blocks, pairs and cases are complete, and why the others are not."""
    blocks: dict[tuple[str, int, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        blocks[(o.case, o.length, o.similarity)].append(o)
    sims_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    lengths_of: dict[str, set[int]] = defaultdict(set)
    for case, length, sim in blocks:
        sims_of[(case, length)].add(sim)
        lengths_of[case].add(length)
    block_problems = {k: [_problem(o) for o in v if not o.valid] for k, v in blocks.items()}
    pair_problems: dict[tuple[str, int], list[str]] = {}
    for (case, length), sims in sims_of.items():
        pair_problems[(case, length)] = [
            f"{sim} block: {', '.join(block_problems[(case, length, sim)])}"
            if sim in sims
            else f"{sim} block not planned"
            for sim in ("low", "high")
            if sim not in sims or block_problems[(case, length, sim)]
        ]
    case_problems = {
        case: [
            f"length {length} pair incomplete ({'; '.join(pair_problems[(case, length)])})"
            for length in sorted(lengths)
            if pair_problems[(case, length)]
        ]
        for case, lengths in lengths_of.items()
    }
    return {
        "blocks": blocks,
        "block_problems": block_problems,
        "pair_problems": pair_problems,
        "case_problems": case_problems,
        "complete_cases": sorted((c for c, p in case_problems.items() if not p), key=natural_key),
    }


def _loss2(block: Sequence[Outcome]) -> int:
    """Twice the middle loss, ``B + E - 2M``, from a complete block (an integer)."""
    score = {o.condition: int(o.status == "correct") for o in block}
    return score["B"] + score["E"] - 2 * score["M"]


def _pair_values(blocks: dict, case: str, length: int, problems: dict) -> dict[str, Any]:
    """Middle losses and difference for one case × length; None where a block is incomplete."""
    row: dict[str, Any] = {"case": case, "length": length}
    twice: dict[str, int | None] = {}
    for sim in ("low", "high"):
        ok = (case, length, sim) in blocks and not problems[(case, length, sim)]
        twice[sim] = _loss2(blocks[(case, length, sim)]) if ok else None
        row[f"loss_{sim}"] = None if twice[sim] is None else twice[sim] / 2
    both = twice["low"] is not None and twice["high"] is not None
    row["difference"] = (twice["high"] - twice["low"]) / 2 if both else None  # type: ignore[operator]
    row["_twice_diff"] = (twice["high"] - twice["low"]) if both else None  # type: ignore[operator]
    return row


def primary(inp: AnalysisInput) -> dict[str, Any]:
    """Completeness, per-case differences, the bootstrap interval, decision and caveats."""
    params = inp.protocol["analysis"]
    comp = completeness(inp.outcomes)
    blocks, bprob = comp["blocks"], comp["block_problems"]
    lengths = sorted({o.length for o in inp.outcomes})
    denominator = 2 * len(lengths)  # case value = sum of twice-differences / (2 * lengths)
    cases, numerators = [], []
    for case in comp["complete_cases"]:
        rows = [_pair_values(blocks, case, length, bprob) for length in lengths]
        num = sum(r.pop("_twice_diff") for r in rows)
        numerators.append(num)
        value = Fraction(num, denominator)
        cases.append(
            {"case": case, "lengths": rows, "difference": float(value), "exact": str(value)}
        )
    exploratory = []
    for case in sorted(comp["case_problems"], key=natural_key):
        if comp["case_problems"][case]:
            for length in lengths:
                row = _pair_values(blocks, case, length, bprob)
                row.pop("_twice_diff")
                problems = comp["pair_problems"][(case, length)]
                row["reason"] = "; ".join(problems) or (
                    "pair complete, but the case has an incomplete length"
                )
                exploratory.append(row)
    exclusions = [
        {
            "seq": o.seq,
            "case": o.case,
            "length": o.length,
            "similarity": o.similarity,
            "condition": o.condition,
            "category": o.category,
            "kind": o.kind,
            "excludes": f"case {o.case} (block {o.case}/{o.length}/{o.similarity})",
        }
        for o in inp.outcomes
        if not o.valid
    ]
    result: dict[str, Any] = {
        "complete_cases": len(cases),
        "planned_cases": len(comp["case_problems"]),
        "cases": cases,
        "incomplete_cases": [
            {"case": c, "reason": "; ".join(p)}
            for c, p in sorted(comp["case_problems"].items(), key=lambda kv: natural_key(kv[0]))
            if p
        ],
        "exploratory": exploratory,
        "exclusions": exclusions,
        "blocks_complete": sum(1 for p in bprob.values() if not p),
        "blocks_planned": len(bprob),
        "pairs_complete": sum(1 for p in comp["pair_problems"].values() if not p),
        "pairs_planned": len(comp["pair_problems"]),
    }
    result |= decide(numerators, denominator, params)
    result["caveats"] = caveats(inp, comp["complete_cases"], result)
    return result


def decide(numerators: Sequence[int], denominator: int, params: dict[str, Any]) -> dict[str, Any]:
    """Estimate, interval and the preregistered decision from per-case integer numerators."""
    n, minimum = len(numerators), int(params["min_complete_cases"])
    threshold = as_fraction(float(params["threshold"]))
    out: dict[str, Any] = {
        "threshold": float(threshold),
        "estimate": None,
        "estimate_exact": None,
        "interval": None,
    }
    if n < minimum:
        out["decision"] = NOT_EVALUABLE
        out["reason"] = (
            f"{n} complete case{'s' if n != 1 else ''}; the protocol requires at least {minimum}"
        )
        return out
    estimate = Fraction(sum(numerators), n * denominator)
    boot = percentile_interval(
        numerators,
        float(params["confidence"]),
        exact_max=int(params["exact_bootstrap_max_cases"]),
        resamples=int(params["bootstrap_resamples"]),
        seed=int(params["bootstrap_seed"]),
        denominator=denominator,
    )
    lower, upper = boot.lower_exact, boot.upper_exact
    assert lower is not None and upper is not None  # integer numerators are always exact
    out["estimate"], out["estimate_exact"] = float(estimate), str(estimate)
    out["interval"] = {
        "confidence": float(boot.confidence),
        "lower": float(lower),
        "upper": float(upper),
        "lower_exact": str(lower),
        "upper_exact": str(upper),
        "method": boot.method,
        "seed": boot.seed,
        "resamples": boot.resamples,
        "cases": boot.n,
        "degenerate": boot.degenerate,
        "quantile": "inverse CDF: Q(p) = smallest resample mean with P(mean <= Q) >= p",
        "distribution": [
            {"value": float(v), "weight": int(w)}
            for v, w in zip(boot.values, boot.weights, strict=True)
        ],
        "total_weight": int(boot.total),
    }
    pct = f"{_fmt(100 * boot.confidence)}%"
    if estimate >= threshold and lower > 0:
        out["decision"] = SUPPORTED
        out["reason"] = (
            f"difference {_fmt(estimate)} >= threshold {_fmt(threshold)} and the {pct} "
            f"interval's lower bound {_fmt(lower)} is above 0"
        )
    else:
        out["decision"] = NOT_SUPPORTED
        why = []
        if estimate < threshold:
            why.append(f"difference {_fmt(estimate)} is below the threshold {_fmt(threshold)}")
        if lower <= 0:
            why.append(f"the {pct} interval's lower bound {_fmt(lower)} is not above 0")
        out["reason"] = " and ".join(why)
    return out


def caveats(inp: AnalysisInput, complete: Sequence[str], result: dict[str, Any]) -> list[str]:
    """Conditions under which the number says less than it seems to."""
    notes = []
    if inp.simulation:
        notes.append(f"{SIMULATION_BANNER}: the outcomes come from a fake transport.")
    keep = set(complete)
    present = [o for o in inp.outcomes if o.case in keep and o.condition in ("B", "M", "E")]
    scope = ""
    if not present:
        # No complete case: still say whether the valid answers show a floor or a ceiling,
        # labelled exploratory, because "not evaluable" alone hides what the model did.
        present = [
            o
            for o in inp.outcomes
            if o.condition in ("B", "M", "E") and o.status in ("correct", "error")
        ]
        scope = " (exploratory: over all valid responses, as no case is complete)"
    if present:
        by_sim = {s: [o for o in present if o.similarity == s] for s in ("low", "high")}
        if all(by_sim.values()) and all(o.status == "correct" for o in present):
            notes.append(
                "Ceiling: every answer-present response in both similarity conditions is "
                "correct, so a zero difference cannot tell no effect from a task too easy to "
                f"show one{scope}."
            )
        ends = [o for o in present if o.condition in ("B", "E")]
        if ends and not any(o.status == "correct" for o in ends):
            notes.append(
                "Floor: no response at an end position (B or E) is correct in either "
                "similarity condition, so the middle loss cannot be positive and a zero "
                f"difference proves nothing{scope}."
            )
    failed = Counter(o.kind for o in inp.outcomes if o.status == "protocol_failure")
    if failed:
        executed = sum(o.status != "unexecuted" for o in inp.outcomes)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(failed.items()))
        notes.append(
            f"Failures: {sum(failed.values())} of {executed} executed requests are protocol "
            f"failures ({kinds}); they are listed with their reasons and never scored as wrong."
        )
    interval = result.get("interval")
    if interval and interval["degenerate"]:
        notes.append(
            f"Degenerate bootstrap: every complete case has the same difference "
            f"({_fmt(result['estimate'])}), so the interval has zero width; that reflects "
            "identical cases, not certainty."
        )
    missing = result["planned_cases"] - result["complete_cases"]
    if missing and result["decision"] != NOT_EVALUABLE:
        notes.append(
            f"{missing} of {result['planned_cases']} planned cases are incomplete and excluded; "
            "the interval covers the complete cases only."
        )
    return notes
