"""What the analysis refuses to read as a main run: a pilot.

A pilot runs a design on held-out materials to calibrate it (``needlepoint.pilot``). Its prepared
protocol carries ``rationale.kind: "pilot"`` and its run.json ``extra.pilot: true``; the analysis
reads neither as a main run, and the calibration reads nothing else.
"""

from __future__ import annotations

from pathlib import Path

from needlepoint.errors import NeedlepointError


def check_pilot(where: str | Path, marked: bool, pilot: bool, mark: str) -> None:
    """Refuse a pilot read as a main run (``pilot`` False), or a main run read as a pilot."""
    if marked and not pilot:
        raise NeedlepointError(
            f"{where}: is a pilot ({mark} says so): pilots run on held-out materials to "
            "calibrate a design and are never analysed as a main run; use needlepoint calibrate"
        )
    if pilot and not marked:
        raise NeedlepointError(f"{where}: is not a pilot ({mark} does not mark one)")
