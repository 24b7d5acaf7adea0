"""The prepared folder: writing it from a protocol, its manifest, and loading it back.

A prepared folder holds ``protocol.json``, ``requests.jsonl``, ``plan.csv``, ``answer_key.jsonl``
and ``manifest.json``, which records each data file's SHA-256 and the source of the generating
modules. ``prepare`` writes one (from ``generate``'s bytes); ``load_prepared`` reads one without
regenerating anything; ``verify`` (``needlepoint.design.verify``) is what proves they are the
protocol's bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.design import protocol as protocol_mod
from needlepoint.design import schema
from needlepoint.design.generate import generate
from needlepoint.design.profiles import make_variant
from needlepoint.design.protocol import design_fingerprint, protocol_bytes
from needlepoint.design.schema import DATA_FILES
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import (
    canonical_bytes,
    file_sha256,
    read_json,
    sha256_hex,
    write_bytes_atomic,
)

MANIFEST_FORMAT = 1
# The modules whose code decides the bytes of a prepared folder; fingerprinted in the manifest.
SOURCE_MODULES = (
    "rand.py",
    "jsonio.py",
    "design/schema.py",
    "design/protocol.py",
    "design/profiles.py",
    "design/generate.py",
    "design/prepared.py",
)


@dataclass(frozen=True)
class PlanCell:
    """Where one request sits in the design and in execution order: the columns of plan.csv
    that every row of results.csv repeats."""

    seq: int
    block: int
    pair: int
    case: str
    length: int
    similarity: str
    condition: str
    order: str


@dataclass(frozen=True)
class PlanRow(PlanCell):
    """One row of plan.csv."""

    request_sha256: str


@dataclass(frozen=True)
class Prepared:
    """A loaded prepared folder.

    ``fingerprint`` is the SHA-256 of the canonical ``files`` map of manifest.json: it names the
    frozen materials, and stays the same when only the generating source changes (verify warns
    about that separately), so runs and analyses of identical materials carry one fingerprint.
    """

    root: Path
    protocol: dict[str, Any]
    plan: tuple[PlanRow, ...]
    bodies: dict[int, bytes]
    answer_key: dict[int, dict[str, Any]]
    manifest: dict[str, Any]
    fingerprint: str


def materials_fingerprint(manifest: Any) -> str:
    """SHA-256 of the canonical map of data-file hashes: the protocol fingerprint."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise NeedlepointError("manifest.json: no files map")
    return sha256_hex(canonical_bytes(files))


def prepared_root(path: str | Path) -> Path:
    """The folder ``path`` names, refused in one line when there is none."""
    root = Path(path)
    if not root.is_dir():
        raise NeedlepointError(f"{root}: no such prepared folder")
    return root


def load_protocol_file(root: Path) -> dict[str, Any]:
    """Read and validate a prepared folder's protocol.json."""
    protocol = read_json(root / "protocol.json")
    if not isinstance(protocol, dict):
        raise NeedlepointError(f"{root / 'protocol.json'}: not a JSON object")
    protocol_mod.validate(protocol, str(root / "protocol.json"))
    return protocol


def read_plan(path: Path) -> tuple[PlanRow, ...]:
    """Parse plan.csv; a malformed row is a one-line error naming the line and field."""
    return tuple(
        PlanRow(**{**row, **{k: int(row[k]) for k in ("seq", "block", "pair", "length")}})
        for row in schema.check_plan(path)
    )


def load_prepared(path: str | Path) -> Prepared:
    """Load every file of a prepared folder (without verifying it: see verify_prepared).

    Each file is checked against its documented schema first, so whatever the folder holds,
    the result is well typed or the load is refused with one line.
    """
    root = prepared_root(path)
    protocol = load_protocol_file(root)
    schema.check_file_sizes(root, protocol)
    bodies: dict[int, bytes] = {}
    for number, line in schema.read_jsonl(root / "requests.jsonl"):
        schema.check_request(line, f"{root / 'requests.jsonl'}:{number}")
        bodies[line["seq"]] = canonical_bytes(line["body"])
    answer_key = {}
    for number, line in schema.read_jsonl(root / "answer_key.jsonl"):
        schema.check_answer(line, f"{root / 'answer_key.jsonl'}:{number}")
        answer_key[line["seq"]] = line
    manifest = schema.check_manifest(read_json(root / "manifest.json"), str(root / "manifest.json"))
    return Prepared(
        root=root,
        protocol=protocol,
        plan=read_plan(root / "plan.csv"),
        bodies=bodies,
        answer_key=answer_key,
        manifest=manifest,
        fingerprint=materials_fingerprint(manifest),
    )


def frozen_model(prepared: Prepared) -> str:
    """The single model named by every frozen body (each was checked to be an object)."""
    models = {json.loads(body)["model"] for body in prepared.bodies.values()}
    if len(models) != 1:
        raise NeedlepointError(f"{prepared.root}: frozen bodies name {len(models)} models")
    return str(models.pop())


def source_fingerprints() -> dict[str, str]:
    """SHA-256 of each source module that decides the materials."""
    here = Path(needlepoint.__file__).parent
    return {f"needlepoint/{m}": file_sha256(here / m) for m in SOURCE_MODULES}


def manifest_bytes(files: dict[str, bytes], protocol: dict[str, Any]) -> bytes:
    """manifest.json for a set of data files generated from ``protocol``."""
    manifest = {
        "design_fingerprint": design_fingerprint(protocol),
        "format": MANIFEST_FORMAT,
        "package_version": needlepoint.__version__,
        "files": {name: sha256_hex(files[name]) for name in DATA_FILES},
        "sources": source_fingerprints(),
    }
    return protocol_bytes(manifest)


def load_protocol(
    protocol_path: str | Path | None = None,
    *,
    model: str | None = None,
    body_profile: str | None = None,
) -> dict[str, Any]:
    """The protocol to prepare: the reference or an override file, as a model variant if asked."""
    protocol = (
        protocol_mod.load_override(protocol_path)
        if protocol_path is not None
        else protocol_mod.reference_protocol()
    )
    if model is None and body_profile is None:
        return protocol
    variant = make_variant(protocol, model, body_profile)
    protocol_mod.validate(variant, "model variant")
    return variant


def prepare(
    out_dir: str | Path,
    protocol_path: str | Path | None = None,
    *,
    model: str | None = None,
    body_profile: str | None = None,
) -> Path:
    """Write a prepared folder; refuses a non-empty folder so nothing is ever overwritten.

    ``model`` and ``body_profile`` make a model variant of the protocol: the same design (and
    design fingerprint), with its own bodies and protocol fingerprint.
    """
    protocol = load_protocol(protocol_path, model=model, body_profile=body_profile)
    return prepare_protocol(out_dir, protocol)


def prepare_protocol(out_dir: str | Path, protocol: dict[str, Any]) -> Path:
    """Write a prepared folder for a protocol built in memory (a pilot's design, say).

    The protocol is validated exactly as a protocol file is, and the folder must be new or empty.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NeedlepointError(f"{out}: exists and is not an empty folder; choose a fresh one")
    protocol_mod.validate(protocol, f"{out}/protocol.json")
    files = generate(protocol)
    files["manifest.json"] = manifest_bytes(files, protocol)
    out.mkdir(parents=True, exist_ok=True)
    for name in (*DATA_FILES, "manifest.json"):
        write_bytes_atomic(out / name, files[name])
    return out
