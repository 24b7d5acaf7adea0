"""Which notebooks a live pipeline skips, and the one line that says why.

`needlepoint pipeline -p transport live` sends the frozen requests to your model in 03-run.
07-compare, 08-pilot and 09-depth, left at their defaults, would then make *simulated* runs
of their own beside that live one, in the same evidence folder, where a reader could take them
for results about the model. The pipeline skips them instead, with one line naming the
command that does the live version; given live inputs (existing run folders with
``-p simulated null``, a live pilot folder with ``-p simulate_pilot false``), 07 and 08 run
on those.
"""

from __future__ import annotations

import ast
from typing import Any

LIVE = "live"

_COMPARE = (
    "skipped: this live pipeline made one run (run/), and a comparison needs two or more runs "
    "of one design; compare live runs with `needlepoint compare RUNDIR RUNDIR --out DIR`, or "
    'here with -p simulated null -p run_dirs \'["run", "OTHER/run"]\''
)
_PILOT = (
    "skipped: a live pipeline makes no simulated pilot, and a live pilot sends held-out "
    "requests of its own; make one with `needlepoint pilot --protocol prepared/protocol.json "
    "--out pilot --lengths 12,48,160 --cases 8 --allow 192 --base-url URL --model M "
    "--api-key-env VAR`, then calibrate it here with -p simulate_pilot false -p pilot_dir pilot"
)

_DEPTH = (
    "skipped: 09-depth runs a simulated depth grid only; run the grid live against your model "
    "with `needlepoint prepare --protocol protocols/depth-grid.json --out depth --model M`, "
    "then `needlepoint run depth --allow 432 --run-dir depth-run --base-url URL --model M "
    "--api-key-env VAR` and `needlepoint analyze depth-run`"
)


def _value(name: str, overrides: dict[str, Any], defaults: dict[str, str]) -> Any:
    """A parameter's value in this pipeline: its override, else its literal default."""
    if name in overrides:
        return overrides[name]
    try:
        return ast.literal_eval(defaults.get(name, "None"))
    except (ValueError, SyntaxError):
        return None


def live_skip(notebook: str, overrides: dict[str, Any], defaults: dict[str, str]) -> str | None:
    """Why a live pipeline skips ``notebook`` (``overrides``: every -p of the pipeline;
    ``defaults``: the notebook's declared parameters), or None when it runs."""
    if overrides.get("transport") != LIVE:
        return None
    if notebook == "07-compare" and _value("simulated", overrides, defaults) is not None:
        return _COMPARE
    if notebook == "08-pilot" and _value("simulate_pilot", overrides, defaults) is not False:
        return _PILOT
    if notebook == "09-depth":
        return _DEPTH
    return None
