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
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.generate import Case, generate_cases
from needlepoint.design.prepared import load_prepared, prepare_protocol
from needlepoint.design.protocol import protocol_bytes
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, read_json, write_bytes_atomic
from needlepoint.pilot.record import (
    PILOT_FORMAT,
    PILOT_KIND,
    PILOT_NAME,
    PILOT_VERSION,
    PREPARED_DIR,
    RUN_DIR,
    DesignRef,
    HeldOutSeed,
    PilotRationale,
    PilotRecord,
    RejectedSeed,
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


# Held-out materials: a derived materials seed whose items share nothing with a design's.
#
# The pilot's materials come from another seed than the design's, derived deterministically from
# the design's seed. A candidate seed is used only when no item of one side is seen in the other:
#
# - no target name of the pilot is a target name or a near name of the design;
# - no target code of the pilot is any code of the design (target, background or placeholder);
# - no target code of the design is any code of the pilot.
#
# So no question the design asks, and no answer it expects, was asked or answered in the pilot.
# Background names may recur by chance (the reference pools hold 19,200 names, and a large design
# uses a quarter of them), but a background record is never asked about. Otherwise the next
# candidate is tried, and every rejected one is recorded with the first overlap that ruled it
# out. The same rule keeps a calibrated design disjoint from the pilot it was calibrated on.

# Candidates tried before giving up; each costs one materials generation.
MAX_SEED_ATTEMPTS = 100
PILOT_PURPOSE = "needlepoint-pilot"
CALIBRATED_PURPOSE = "needlepoint-calibrated"
_DERIVED = (
    "(first 8 bytes of SHA-256 of the canonical JSON "
    '{{"attempt": k, "design_seed": S, "purpose": "{}"}}, big-endian) >> 1'
)
_DISJOINT = (
    "the first where no pilot target name is a design target or near name, no pilot target "
    "code is a design code, and no design target code is a pilot code"
)
PILOT_RULE = f"attempt k = 0, 1, ...: seed {_DERIVED.format(PILOT_PURPOSE)}; {_DISJOINT}"
CALIBRATED_RULE = (
    f"attempt 0: the design's own seed S; attempt k >= 1: "
    f"{_DERIVED.format(CALIBRATED_PURPOSE)}; {_DISJOINT}"
)
# Added to the calibrated rule when designs on record were given (the study record's runs).
_RECORD = (
    "; and, for every design run under the evidence root{skip}, no target name of the {side} is "
    "a target or near name of it, no target code of the {side} is a code of it, no target code "
    "of it is a code of the {side}, and no request of the {side} is byte for byte one of its "
    "requests"
)
RECORD_RULE = _RECORD.format(side="calibrated version", skip="")
# Added to the pilot's rule when designs on record were given. A pilot with the candidate's own
# design fingerprint is a model variant's pilot of the same design at the same lengths and
# cases: it shares the materials by design (docs/pilot.md), so it is not compared.
PILOT_RECORD_RULE = _RECORD.format(
    side="pilot", skip=" other than a pilot with the candidate pilot's own design fingerprint"
)


def derived_seed(design_seed: int, purpose: str, attempt: int) -> int:
    """Candidate ``attempt`` for ``purpose``: a non-negative 63-bit integer (a valid seed)."""
    data = canonical_bytes({"attempt": attempt, "design_seed": design_seed, "purpose": purpose})
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class Materials:
    """Where each asked-about name and each code of a generated design first occurs.

    ``owner`` names the side in every phrase: "the design", "the pilot", or a run on record.
    """

    asked: dict[str, str]  # target names and near names
    codes: dict[str, str]  # every code: targets, backgrounds, placeholders
    targets: tuple[tuple[str, str, str], ...]  # (case label, target name, target code)
    owner: str = "the design"


def index_materials(cases: tuple[Case, ...], owner: str = "the design") -> Materials:
    """The asked-about names and every code of a design, each with its first place."""
    asked: dict[str, str] = {}
    codes: dict[str, str] = {}
    for case in cases:
        asked.setdefault(case.target_name, f"{owner}'s target name of case {case.label}")
        for near in case.near_names:
            asked.setdefault(near, f"a near name of {owner}'s case {case.label}")
        codes.setdefault(case.target_code, f"the target code of case {case.label}")
        for bg in case.backgrounds:
            where = f"case {case.label} at length {bg.length}"
            for j, code in enumerate(bg.codes):
                codes.setdefault(code, f"the code of background record {j} of {where}")
            codes.setdefault(bg.placeholder_code, f"the placeholder code of {where}")
    targets = tuple((c.label, c.target_name, c.target_code) for c in cases)
    return Materials(asked, codes, targets, owner)


def first_overlap(pilot: Materials, design: Materials) -> str | None:
    """The first item of one side seen in the other, as one phrase; None when disjoint.

    The checks, in this order: a target name of ``pilot`` that is a target or near name of
    ``design``; a target code of ``pilot`` that is any code of ``design``; a target code of
    ``design`` that is any code of ``pilot``. Each side is named by its ``owner``.
    """
    a, b = pilot.owner, design.owner
    for label, name, _ in pilot.targets:
        if name in design.asked:
            return f"{name}, {a}'s target name of case {label}, is {design.asked[name]}"
    for label, _, code in pilot.targets:
        if code in design.codes:
            return f"{code}, {a}'s target code of case {label}, is {design.codes[code]} in {b}"
    for label, _, code in design.targets:
        if code in pilot.codes:
            return f"{code}, {b}'s target code of case {label}, is {pilot.codes[code]} in {a}"
    return None


@dataclass(frozen=True)
class OnRecord:
    """A design already run under the evidence root: what it asked and its request bytes.

    The study record builds these (``needlepoint.study.scan``); a calibrated version must share
    nothing with any of them, by the overlap rule above plus identical request bytes.
    """

    materials: Materials
    requests: frozenset[str]
    design_fingerprint: str | None = None


def record_overlap(
    new: Materials, requests: frozenset[str], records: tuple[OnRecord, ...]
) -> str | None:
    """The first thing ``new`` shares with a design on record, as one phrase; None if nothing."""
    for record in records:
        found = first_overlap(new, record.materials)
        if found is not None:
            return found
        same = requests & record.requests
        if same:
            return (
                f"{len(same)} of {new.owner}'s requests are byte for byte requests of "
                f"{record.materials.owner}"
            )
    return None


def choose_seed(
    candidates: Callable[[int], int],
    overlap_of: Callable[[int], str | None],
    what: str,
    rule: str,
) -> HeldOutSeed:
    """The first candidate seed without overlap; refuse with the last overlap if none is."""
    rejected: list[RejectedSeed] = []
    for attempt in range(MAX_SEED_ATTEMPTS):
        seed = candidates(attempt)
        overlap = overlap_of(seed)
        if overlap is None:
            return HeldOutSeed(seed, attempt, rule, tuple(rejected))
        rejected.append(RejectedSeed(attempt, seed, overlap))
    raise NeedlepointError(
        f"{what}: none of {MAX_SEED_ATTEMPTS} derived materials seeds is disjoint from the "
        f"design; the last overlaps: {rejected[-1].overlap} (use larger names pools)"
    )


def pilot_seed(
    design: dict[str, Any],
    pilot_of: Callable[[int], dict[str, Any]],
    records: tuple[OnRecord, ...] = (),
) -> HeldOutSeed:
    """A held-out seed for a pilot: ``pilot_of(seed)`` is the pilot protocol with that seed.

    With ``records`` (designs run under the evidence root) the pilot also asks nothing any of
    them asked, so a new pilot is fresh against everything on record, not only its design.
    """
    from needlepoint.design.protocol import design_fingerprint

    materials = index_materials(generate_cases(design))
    base = design["seeds"]["materials"]

    def overlap(seed: int) -> str | None:
        protocol = pilot_of(seed)
        mine = index_materials(generate_cases(protocol), "the pilot")
        found = first_overlap(mine, materials)
        if found is None and records:
            own = design_fingerprint(protocol)
            others = tuple(r for r in records if r.design_fingerprint != own)
            found = record_overlap(mine, request_hashes(protocol), others)
        return found

    return choose_seed(
        lambda k: derived_seed(base, PILOT_PURPOSE, k),
        overlap,
        "pilot",
        PILOT_RULE + (PILOT_RECORD_RULE if records else ""),
    )


def request_hashes(protocol: dict[str, Any]) -> frozenset[str]:
    """The SHA-256 of every request body a protocol generates (plan.csv's last column)."""
    from needlepoint.design.generate import generate

    lines = generate(protocol)["plan.csv"].decode("utf-8").splitlines()[1:]
    return frozenset(line.rsplit(",", 1)[1] for line in lines)


def calibrated_seed(
    design_seed: int,
    pilot: dict[str, Any],
    calibrated_of: Callable[[int], dict[str, Any]],
    records: tuple[OnRecord, ...] = (),
) -> HeldOutSeed:
    """The calibrated design's seed: the design's own when disjoint from the pilot (and from
    every design on record), else the first derived candidate that is.

    Attempt 0 is the design's own seed; attempt k > 0 is ``derived_seed(S, calibrated, k)``.
    Against the pilot the calibrated version plays "the design"; against a design on record it
    is "the calibrated version", and its requests must not be theirs byte for byte either.
    """
    pilot_materials = index_materials(generate_cases(pilot), "the pilot")

    def overlap(seed: int) -> str | None:
        protocol = calibrated_of(seed)
        mine = index_materials(generate_cases(protocol))
        found = first_overlap(pilot_materials, mine)
        if found is None and records:
            named = replace(mine, owner="the calibrated version")
            found = record_overlap(named, request_hashes(protocol), records)
        return found

    return choose_seed(
        lambda k: design_seed if k == 0 else derived_seed(design_seed, CALIBRATED_PURPOSE, k),
        overlap,
        "calibrate",
        CALIBRATED_RULE + (RECORD_RULE if records else ""),
    )
