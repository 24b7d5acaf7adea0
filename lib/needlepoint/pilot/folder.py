"""`needlepoint pilot`: prepare held-out pilot materials, then run them with every rule of `run`.

A pilot folder holds ``pilot.json``, ``design.json`` (the design being calibrated, whole),
``prepared/`` (the pilot's own prepared folder, whose
protocol is marked ``rationale.kind: "pilot"``) and ``run/`` (its run folder, whose run.json
says ``extra.pilot: true``), and ``run/results.csv`` once a session ends. Running the same
command again on the same folder resumes the run, as `run` does; another design, lengths or
case count is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.prepared import load_prepared, prepare_protocol
from needlepoint.design.protocol import protocol_bytes
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import read_json, write_bytes_atomic
from needlepoint.pilot.heldout import OnRecord, pilot_seed
from needlepoint.pilot.record import (
    PILOT_FORMAT,
    PILOT_KIND,
    PILOT_NAME,
    PILOT_VERSION,
    PREPARED_DIR,
    RUN_DIR,
    DesignRef,
    PilotRationale,
    PilotRecord,
    design_ref,
    protocol_sha256,
    read_pilot_record,
    write_pilot_record,
)
from needlepoint.run.folder import has_run_record
from needlepoint.run.options import RunOptions, check_options
from needlepoint.run.results import write_results
from needlepoint.run.runner import RunSummary, run_protocol
from needlepoint.schema import to_plain

DESIGN_NAME = "design.json"


def load_design(protocol_path: str | Path | None) -> dict[str, Any]:
    """The design to pilot: a protocol file merged onto the reference, or the reference (v1)."""
    if protocol_path is None:
        return protocol_mod.reference_protocol()
    return protocol_mod.load_override(protocol_path)


def pilot_protocol(
    design: dict[str, Any],
    lengths: tuple[int, ...],
    cases: int,
    seed: int,
    rationale: PilotRationale | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """The design on held-out materials: other seed, the pilot's lengths and cases, and the
    next version (or ``version``, when the next one belongs to another design on record).

    Everything else (model, templates, runner, analysis) stays the design's, so the pilot
    measures the task the design will run.
    """
    p = copy.deepcopy(design)
    p["version"] = design["version"] + 1 if version is None else version
    p["lengths"] = list(lengths)
    p["cases"] = cases
    p["seeds"] = dict(design["seeds"], materials=seed)
    p["description"] = (
        f"PILOT of {design['protocol_id']} v{design['version']} on held-out materials "
        f"(materials seed {seed}); calibrates a design, never a main run"
    )
    if rationale is not None:
        p["rationale"] = to_plain(rationale)
    else:
        p.pop("rationale", None)
    p.pop("materials_reuse", None)  # the design's reason covers the design's materials only
    return p


def check_pilot_shape(design: dict[str, Any], lengths: tuple[int, ...], cases: int) -> None:
    """Refuse lengths and a case count the pilot's design could not have, before any work."""
    if not lengths:
        raise NeedlepointError("--lengths: give at least one background length")
    trial = pilot_protocol(design, lengths, cases, design["seeds"]["materials"])
    protocol_mod.validate(trial, "pilot")


@dataclass(frozen=True)
class PilotRun:
    """A pilot folder after one session: its record and how the run session ended."""

    folder: Path
    record: PilotRecord
    summary: RunSummary
    resumed: bool

    def lines(self) -> list[str]:
        """What happened, for the command line and the notebook (no paths, no durations)."""
        r = self.record
        seed = r.materials_seed
        return [
            f"PILOT of {r.design.protocol_id} v{r.design.version} (pilot protocol "
            f"v{r.protocol_version}): lengths {', '.join(map(str, r.lengths))}, {r.cases} cases"
            + ("; resumed" if self.resumed else ""),
            f"held-out materials seed {seed.seed} (attempt {seed.attempt}; "
            f"{len(seed.rejected)} earlier candidate(s) overlapped the design and were skipped)",
            *self.summary.lines(),
        ]


def create_pilot(
    out: Path,
    design: dict[str, Any],
    lengths: tuple[int, ...],
    cases: int,
    version: int | None = None,
    records: tuple[OnRecord, ...] = (),
    check: Callable[[dict[str, Any]], None] | None = None,
) -> PilotRecord:
    """Prepare a new pilot folder: held-out seed, prepared folder, then pilot.json.

    ``records``: the designs run under the evidence root, which the pilot's materials avoid;
    ``check`` is called with the pilot protocol before anything is written (and may refuse it).
    """
    check_pilot_shape(design, lengths, cases)
    if version is not None and version == design["version"]:
        raise NeedlepointError(
            f"--version {version}: a pilot's version must differ from the design's"
        )
    ref = design_ref(design)
    seed = pilot_seed(
        design, lambda s: pilot_protocol(design, lengths, cases, s, None, version), records
    )
    rationale = PilotRationale(kind=PILOT_KIND, design=ref, materials_seed=seed)
    protocol = pilot_protocol(design, lengths, cases, seed.seed, rationale, version)
    if check is not None:
        check(protocol)
    prepare_protocol(out / PREPARED_DIR, protocol)
    write_bytes_atomic(out / DESIGN_NAME, protocol_bytes(design))
    record = PilotRecord(
        format=PILOT_FORMAT,
        version=PILOT_VERSION,
        pilot=True,
        package_version=needlepoint.__version__,
        design=ref,
        protocol_version=protocol["version"],
        lengths=lengths,
        cases=cases,
        materials_seed=seed,
        prepared_dir=PREPARED_DIR,
        run_dir=RUN_DIR,
        prepared_fingerprint=load_prepared(out / PREPARED_DIR).fingerprint,
    )
    write_pilot_record(out, record)
    return record


def _check_same(
    record: PilotRecord, ref: DesignRef, lengths: tuple[int, ...], cases: int, version: int | None
) -> None:
    if record.design.protocol_sha256 != ref.protocol_sha256:
        raise NeedlepointError(
            f"{PILOT_NAME}: this pilot calibrates another design ({record.design.protocol_id} "
            f"v{record.design.version}, sha256 {record.design.protocol_sha256[:12]}); "
            "use a new --out"
        )
    if record.lengths != lengths or record.cases != cases:
        raise NeedlepointError(
            f"{PILOT_NAME}: this pilot has lengths {','.join(map(str, record.lengths))} and "
            f"{record.cases} cases; use a new --out for another shape"
        )
    if version is not None and version != record.protocol_version:
        raise NeedlepointError(
            f"{PILOT_NAME}: this pilot's protocol is v{record.protocol_version}, not "
            f"--version {version}; use a new --out"
        )


def run_pilot(
    protocol_path: str | Path | None,
    out_dir: str | Path,
    lengths: tuple[int, ...],
    cases: int,
    options: RunOptions,
    before_run: Callable[[Path], None] | None = None,
    version: int | None = None,
    records: tuple[OnRecord, ...] = (),
    check: Callable[[dict[str, Any]], None] | None = None,
) -> PilotRun:
    """Create (or resume) a pilot folder and run it; results.csv is written after the session.

    ``before_run`` is called with the pilot's prepared folder before any request (a local
    server's token check, say); when it raises, nothing is sent. ``version``: the pilot
    protocol's version (default: the design's + 1). ``records``: the designs run under the
    evidence root, which a new pilot's materials avoid (a resumed pilot keeps its own);
    ``check`` may refuse the new pilot's protocol before anything is written.
    """
    out = Path(out_dir)
    design = load_design(protocol_path)
    if protocol_mod.is_pilot(design):
        raise NeedlepointError(f"{protocol_path}: is a pilot's protocol; pilot the design itself")
    check_options(options)  # a refused run creates no pilot folder
    resumed = (out / PILOT_NAME).exists()
    if resumed:
        record = read_pilot_record(out)
        _check_same(record, design_ref(design), lengths, cases, version)
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NeedlepointError(f"{out}: exists, is not empty and has no {PILOT_NAME}")
    else:
        existed = out.exists()
        record = create_pilot(out, design, lengths, cases, version, records, check)
    meta = {**(options.run_meta or {}), "pilot": True}
    try:
        if before_run is not None:
            before_run(out / PREPARED_DIR)
        summary = run_protocol(out / PREPARED_DIR, out / RUN_DIR, replace(options, run_meta=meta))
    except BaseException:
        if not resumed and not has_run_record(out / RUN_DIR):
            _remove_new(out, existed)  # refused before its first request: nothing to keep
        raise
    write_results(out / RUN_DIR)
    return PilotRun(out, record, summary, resumed)


def _remove_new(out: Path, keep_folder: bool) -> None:
    """Remove a pilot folder this command created (an empty folder given by the user stays)."""
    import shutil

    if not keep_folder:
        shutil.rmtree(out, ignore_errors=True)
        return
    for child in sorted(out.iterdir()):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def read_design(folder: Path, record: PilotRecord) -> dict[str, Any]:
    """The pilot's design.json, checked against pilot.json and the pilot's own protocol.

    The pilot's prepared protocol must be exactly the design on the recorded held-out seed, so
    a calibration can only ever be derived from the design the pilot was run for.
    """
    path = folder / DESIGN_NAME
    design = read_json(path)
    if not isinstance(design, dict) or protocol_sha256(design) != record.design.protocol_sha256:
        raise NeedlepointError(f"{path}: differs from the design recorded in {PILOT_NAME}")
    protocol_mod.validate(design, str(path))
    rationale = PilotRationale(PILOT_KIND, record.design, record.materials_seed)
    expected = pilot_protocol(
        design,
        record.lengths,
        record.cases,
        record.materials_seed.seed,
        rationale,
        record.protocol_version,
    )
    prepared = load_prepared(folder / PREPARED_DIR)
    if prepared.protocol != expected or prepared.fingerprint != record.prepared_fingerprint:
        raise NeedlepointError(
            f"{folder / PREPARED_DIR}: is not the pilot that {PILOT_NAME} describes"
        )
    return design
