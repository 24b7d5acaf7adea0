"""SWEEP.json: several runs to start side by side, each exactly what one `needlepoint run` does.

A sweep file lists runs; each entry names a prepared folder, a run folder, its allowance and the
options of `needlepoint run` (live or simulated). Paths are relative to the sweep file's folder.
Reading is strict, as for every record: an unknown key, a wrong type, another format or version,
two entries with one name or one run folder are refused with one line that names the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import read_json
from needlepoint.run.options import DEFAULT_TIMEOUT_S, RunOptions
from needlepoint.schema import from_plain, record_from_plain

SWEEP_FORMAT = "needlepoint-sweep"
SWEEP_VERSION = 1
# One worker process per run: a bound keeps a mistyped file from starting hundreds of them.
MAX_RUNS = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


@dataclass(frozen=True)
class SweepRun:
    """One entry of ``runs``: the arguments of one `needlepoint run`, plus a name to show."""

    name: str
    prepared: str
    run_dir: str
    allow: int
    simulate: str | None = None
    sim_params: dict[str, float] | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    min_gap_s: float | None = None
    override_reason: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    input_rate: float | None = None
    output_rate: float | None = None
    cost_cap: float | None = None

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> SweepRun:
        """Read one entry; the keys after ``allow`` may be left out and take their defaults."""
        defaults = {f.name: f.default for f in fields(cls)[4:]}
        return record_from_plain(cls, defaults | value, where)

    def options(self, progress: str = "off") -> RunOptions:
        """The run's options, unchecked: ``check_settings`` checks them as for a single run."""
        return RunOptions(
            allow=self.allow,
            simulate=self.simulate,
            sim_params=dict(self.sim_params) if self.sim_params is not None else None,
            base_url=self.base_url,
            model=self.model,
            api_key_env=self.api_key_env,
            min_gap_s=self.min_gap_s,
            override_reason=self.override_reason,
            timeout_s=self.timeout_s,
            input_rate=self.input_rate,
            output_rate=self.output_rate,
            cost_cap=self.cost_cap,
            progress=progress,
        )


@dataclass(frozen=True)
class SweepFile:
    """The whole sweep file."""

    format: str
    version: int
    runs: tuple[SweepRun, ...]


@dataclass(frozen=True)
class PlannedRun:
    """One entry with its folders resolved against the sweep file's folder, and the declaration
    every run of the sweep is started under (`sweep --declaration`), if any."""

    entry: SweepRun
    prepared: Path
    run_dir: Path
    declaration: Path | None = None

    @property
    def name(self) -> str:
        return self.entry.name


def parse_sweep(value: Any, name: str) -> SweepFile:
    """Check a sweep file's JSON value; ``name`` is how refusals refer to the file."""
    if not isinstance(value, dict):
        raise NeedlepointError(f"{name}: expected a JSON object, got {type(value).__name__}")
    fmt, version = value.get("format"), value.get("version")
    if fmt != SWEEP_FORMAT:
        raise NeedlepointError(f"{name}: field format: expected {SWEEP_FORMAT!r}, got {fmt!r}")
    if version != SWEEP_VERSION or isinstance(version, bool):
        raise NeedlepointError(
            f"{name}: {SWEEP_FORMAT} version {version!r} is not supported "
            f"(this needlepoint reads version {SWEEP_VERSION})"
        )
    sweep: SweepFile = from_plain(SweepFile, value, name)
    if not sweep.runs:
        raise NeedlepointError(f"{name}: field runs: lists no run")
    if len(sweep.runs) > MAX_RUNS:
        raise NeedlepointError(f"{name}: field runs: {len(sweep.runs)} runs, at most {MAX_RUNS}")
    seen: set[str] = set()
    for i, run in enumerate(sweep.runs):
        where = f"{name}: runs[{i}]"
        if not _NAME.fullmatch(run.name):
            raise NeedlepointError(
                f"{where}.name: {run.name!r}: use 1-40 letters, digits, '.', '_' or '-'"
            )
        if run.name in seen:
            raise NeedlepointError(f"{where}.name: {run.name!r} names two runs")
        seen.add(run.name)
        for key in ("prepared", "run_dir"):
            text = getattr(run, key)
            if not text.strip() or "\x00" in text:
                raise NeedlepointError(f"{where}.{key}: must name a folder")
    return sweep


def read_sweep(path: str | Path) -> list[PlannedRun]:
    """Read SWEEP.json and resolve each run's folders against the file's own folder."""
    p = Path(path)
    if p.is_dir():
        raise NeedlepointError(f"{p}: is a folder; give the sweep file (SWEEP.json)")
    sweep = parse_sweep(read_json(p, pipes=True), p.name)
    base = p.parent
    planned = [PlannedRun(r, base / r.prepared, base / r.run_dir) for r in sweep.runs]
    folders: dict[Path, str] = {}
    for run in planned:
        key = run.run_dir.resolve()
        if key in folders:
            raise NeedlepointError(
                f"{p.name}: run {run.name!r}: run folder {run.entry.run_dir} is also the folder "
                f"of run {folders[key]!r}; every run needs its own journal"
            )
        folders[key] = run.name
    return planned
