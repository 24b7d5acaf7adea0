"""The pilot notebook's steps, so that the notebook holds no logic a test cannot reach.

Offline, the notebook runs a simulated pilot (labelled as such everywhere); given a pilot folder
made elsewhere (a live `needlepoint pilot`), it calibrates that one instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.pilot.calibrate import Calibration, CalibrationOptions, calibrate
from needlepoint.pilot.files import write_protocol, write_report
from needlepoint.pilot.folder import read_design, run_pilot
from needlepoint.pilot.heldout import OnRecord
from needlepoint.pilot.record import read_pilot_record
from needlepoint.run.options import RunOptions

CALIBRATED_NAME = "calibrated-protocol.json"
REPORT_NAME = "calibration.json"
ACCURACY_FIGURE = "accuracy_by_length.png"
POWER_FIGURE = "power_curve.png"
POWER_TABLE = "power.csv"


def pilot_step(
    design_file: str | Path | None,
    pilot_dir: str | Path,
    *,
    simulate: bool,
    lengths: list[int],
    cases: int,
    sim_params: dict[str, float] | None = None,
    declaration: str | Path | None = None,
) -> list[str]:
    """Run a simulated pilot into ``pilot_dir`` (or resume it), or describe an existing one;
    ``declaration``: the declaration the simulated pilot is started under."""
    if simulate:
        planned = cases * len(lengths) * 8
        options = RunOptions(
            allow=planned,
            simulate="position",
            sim_params=sim_params,
            progress="off",
            declaration=None if declaration is None else str(declaration),
        )
        return run_pilot(design_file, pilot_dir, tuple(lengths), cases, options).lines()
    record = read_pilot_record(pilot_dir)
    return [
        f"pilot of {record.design.protocol_id} v{record.design.version} (pilot protocol "
        f"v{record.protocol_version}): lengths {', '.join(map(str, record.lengths))}, "
        f"{record.cases} cases, held-out materials seed {record.materials_seed.seed}"
    ]


@dataclass(frozen=True)
class CalibrationStep:
    """A calibration and the files written for it (paths relative to where they were asked)."""

    calibration: Calibration
    design: dict[str, Any]
    out_dir: Path

    @property
    def recommended(self) -> bool:
        return self.calibration.protocol is not None


def calibrate_step(
    pilot_dir: str | Path,
    out_dir: str | Path,
    options: CalibrationOptions,
    records: tuple[OnRecord, ...] = (),
) -> CalibrationStep:
    """Calibrate; write the record, and the new protocol when one is recommended, to out_dir.

    ``records``: designs already run, which the new version's materials must not repeat.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = calibrate(pilot_dir, options, records)
    write_report(result.record, out / REPORT_NAME)
    if result.protocol is not None:
        write_protocol(result.protocol, out / CALIBRATED_NAME)
    design = read_design(Path(pilot_dir), read_pilot_record(pilot_dir))
    return CalibrationStep(result, design, out)


def figures_step(step: CalibrationStep, effects: list[float]) -> list[str]:
    """Draw the accuracy-by-length figure, and with a power model the power curve (and its
    table, power.csv); returns the figure file names.

    The curve compares half the recommended count (a multiple of the orders), the recommended
    count and the largest count tried when none was recommended.
    """
    from needlepoint.jsonio import write_bytes_atomic
    from needlepoint.pilot.plots import accuracy_by_length, power_curve, power_table

    rec = step.calibration.record
    out = step.out_dir
    accuracy_by_length(rec, out / ACCURACY_FIGURE)
    names = [ACCURACY_FIGURE]
    if rec.power_model is None or not rec.power_table:
        return names
    step_size = len(step.design["orders"])
    top = rec.recommended_cases or rec.power_table[-1].cases
    half = max(step_size, top // 2 // step_size * step_size)
    counts = tuple(sorted({half, top}))
    if not effects or any(e < 0 for e in effects):
        raise NeedlepointError("effects: give non-negative added middle losses")
    model = rec.power_model
    grid = [e for e in effects if max(0.0, model.smallest_effect) <= e <= model.largest_effect]
    table = power_table(rec, step.design, counts, tuple(grid))
    write_bytes_atomic(
        out / POWER_TABLE, table.to_csv(index=False, lineterminator="\n").encode("utf-8")
    )
    power_curve(table, rec, out / POWER_FIGURE)
    return [*names, POWER_FIGURE]


def recommendation_lines(step: CalibrationStep, shown_dir: str) -> list[str]:
    """What the calibration decided and which files hold it (``shown_dir`` as the user named it)."""
    rec = step.calibration.record
    if not step.recommended:
        return [f"{rec.verdict}: {rec.reason}", f"wrote {shown_dir}/{REPORT_NAME} only"]
    return [
        f"{rec.verdict}: v{rec.protocol_version} with lengths "
        f"{', '.join(map(str, rec.chosen_lengths))} and {rec.recommended_cases} cases",
        f"wrote {shown_dir}/{CALIBRATED_NAME} (for needlepoint prepare --protocol) and "
        f"{shown_dir}/{REPORT_NAME}",
    ]


FIGURE_EFFECTS = tuple(round(0.05 * i, 2) for i in range(11))


def write_figures(pilot_dir: str | Path, result: Calibration, out_dir: str | Path) -> list[str]:
    """`calibrate --figures DIR`: the notebook's figures (and power.csv) for a calibration."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    design = read_design(Path(pilot_dir), read_pilot_record(pilot_dir))
    names = figures_step(CalibrationStep(result, design, out), list(FIGURE_EFFECTS))
    return [*names, POWER_TABLE] if len(names) > 1 else names
