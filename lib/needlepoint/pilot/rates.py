"""The pilot's rates as a power model, and the largest effect they allow (calibration rule 2).

The pilot's accuracies are taken per similarity, never as one end accuracy pooled over both:
pooling a ceiling under low similarity with a floor under high hides that the design cannot
show a large added middle loss at all.
"""

from __future__ import annotations

from typing import Any

from needlepoint.analysis.inputs import AnalysisInput
from needlepoint.analysis.power import PowerModel
from needlepoint.pilot.stats import pooled


def pilot_model(
    inp: AnalysisInput, lengths: tuple[int, ...], design: dict[str, Any]
) -> PowerModel | str:
    """Rule 2: the power model of the pilot's per-similarity accuracies over the chosen lengths.

    Returns the reason instead when a condition has no valid answer over those lengths (the
    high-similarity middle is shown, not needed: the effect sets it).
    """
    p = pooled(inp.outcomes, lengths)
    acc = {k: v.estimate for k, v in p.items()}
    needed = ("B", "M", "E", "A", "high B", "high E", "high A", "failure")
    missing = [k for k in needed if acc[k] is None]
    if missing:
        return f"no valid {missing[0]} answer at lengths {', '.join(map(str, lengths))}"
    return PowerModel(
        acc_b=float(acc["B"] or 0),
        acc_m=float(acc["M"] or 0),
        acc_e=float(acc["E"] or 0),
        acc_a=float(acc["A"] or 0),
        failure_rate=float(acc["failure"] or 0),
        stop_after=int(design["runner"]["max_consecutive_failures"]),
        high_b=float(acc["high B"] or 0),
        high_m=acc["high M"],
        high_e=float(acc["high E"] or 0),
        high_a=float(acc["high A"] or 0),
    )


def unattainable(model: PowerModel, effect: float, lengths: tuple[int, ...]) -> str | None:
    """Why the pilot's rates cannot produce ``effect``; None when they can."""
    if effect <= model.largest_effect:
        return None
    return (
        f"the pilot's rates (lengths {', '.join(map(str, lengths))}) allow an added middle loss "
        f"of at most {model.largest_effect:.3f}, below the effect {effect:g}: with B "
        f"{model.acc_b:.3f}, M {model.acc_m:.3f}, E {model.acc_e:.3f} under low similarity and "
        f"B {model.high('B'):.3f}, E {model.high('E'):.3f} under high, even a middle that is "
        "always wrong under high similarity gives no more, so no case count can power it"
    )
