"""The calibration record: the ``rationale`` of a calibrated protocol, and `calibrate --report`.

It says which pilot the version was calibrated on (by its journal fingerprint), what the pilot
measured per length, which rule chose the lengths, the power model fed with the pilot's
accuracies, the power table of the case-count search and the recommendation. docs/schema.md
states every field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from needlepoint.analysis.power import PowerModel
from needlepoint.pilot.record import DesignRef, HeldOutSeed
from needlepoint.pilot.stats import LengthCounts
from needlepoint.schema import plain_without_absent, record_with_absent

CALIBRATION_FORMAT = "needlepoint-calibration"
CALIBRATION_VERSION = 2
CALIBRATION_KIND = "calibration"
# Verdicts: only "recommended" writes a protocol.
RECOMMENDED = "recommended"
NO_LENGTH = "no length qualifies"
ABOVE_ATTAINABLE = "effect above the largest attainable"
NOT_REACHED = "power not reached"


@dataclass(frozen=True)
class CalibrationRules:
    """The rules a calibration applied, fixed before it read the pilot (docs/pilot.md).

    ``band_per_similarity`` came later: true when each similarity arm's end accuracy had to be
    inside the band; absent in a record made before, whose band read both arms pooled.
    """

    ADDED_LATER: ClassVar[tuple[str, ...]] = ("band_per_similarity",)

    band_low: float
    band_high: float
    min_pair_complete: float
    threshold: float
    effect: float
    target_power: float
    complete_margin: int
    max_cases: int
    max_requests: int | None
    simulations: int
    seed: int
    band_per_similarity: bool | None = None

    def to_plain(self) -> dict[str, Any]:
        return plain_without_absent(self, self.ADDED_LATER)

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> Any:
        return record_with_absent(cls, value, where, cls.ADDED_LATER)


@dataclass(frozen=True)
class PilotRef:
    """The pilot a calibration read."""

    journal_sha256: str
    prepared_fingerprint: str
    protocol_version: int
    materials_seed: int
    simulation: bool


@dataclass(frozen=True)
class LengthVerdict:
    """Whether one pilot length qualifies for the calibrated design, and why."""

    length: int
    pair_complete: float | None
    in_band: bool
    qualifies: bool
    reason: str


@dataclass(frozen=True)
class PowerRow:
    """One row of the case-count search: a power.csv row (``POWER_COLUMNS``)."""

    cases: int
    effect: float
    power: float
    power_se: float
    not_evaluable: float
    mean_complete_cases: float
    simulations: int

    @classmethod
    def of(cls, row: Any) -> PowerRow:
        """From one row of ``power_grid``'s table, as plain Python numbers."""
        return cls(
            int(row["cases"]),
            float(row["effect"]),
            float(row["power"]),
            float(row["power_se"]),
            float(row["not_evaluable"]),
            float(row["mean_complete_cases"]),
            int(row["simulations"]),
        )


@dataclass(frozen=True)
class CalibrationRecord:
    """Why a calibrated version has its lengths and case count, or why there is none."""

    kind: str
    format: str
    version: int
    package_version: str
    pilot: PilotRef
    design: DesignRef
    rules: CalibrationRules
    lengths: tuple[LengthCounts, ...]
    verdicts: tuple[LengthVerdict, ...]
    chosen_lengths: tuple[int, ...]
    power_model: PowerModel | None
    largest_effect: float | None
    power_table: tuple[PowerRow, ...]
    power_at_threshold: float | None
    recommended_cases: int | None
    protocol_version: int | None
    materials_seed: HeldOutSeed | None
    verdict: str
    reason: str
