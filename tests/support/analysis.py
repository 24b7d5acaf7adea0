"""Analysis parameters for tests: the reference protocol's values, with any field replaced."""

from __future__ import annotations

from dataclasses import MISSING, fields

from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.record import AnalysisParameters

REFERENCE = dict(
    threshold=0.1,
    confidence=0.95,
    min_complete_cases=2,
    exact_bootstrap_max_cases=12,
    bootstrap_resamples=2000,
    bootstrap_seed=20260930,
)


def analysis_params(**kw: object) -> AnalysisParameters:
    """The reference protocol's analysis parameters, with the given fields replaced."""
    return AnalysisParameters(**{**REFERENCE, **kw})  # type: ignore[arg-type]


def outcome(**given: object) -> Outcome:
    """An Outcome with the given fields; every other required field (the numbers) unknown."""
    unknown = {f.name: None for f in fields(Outcome) if f.default is MISSING}
    return Outcome(**{**unknown, **given})  # type: ignore[arg-type]
