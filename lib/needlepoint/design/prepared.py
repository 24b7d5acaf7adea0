"""The prepared folder's format and loading: plan rows, data files and the materials fingerprint.

A prepared folder holds ``protocol.json``, ``requests.jsonl``, ``plan.csv``, ``answer_key.jsonl``
and ``manifest.json``. ``load_prepared`` reads them without regenerating anything; ``verify``
(``needlepoint.design.verify``) is what proves they are the protocol's bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design import prepared_schema as schema
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.prepared_schema import DATA_FILES, PLAN_COLUMNS
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, read_json, sha256_hex

__all__ = ["DATA_FILES", "MANIFEST_FORMAT", "PLAN_COLUMNS", "PlanRow", "Prepared", "load_prepared"]


MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class PlanRow:
    """One row of plan.csv."""

    seq: int
    block: int
    pair: int
    case: str
    length: int
    similarity: str
    condition: str
    order: str
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


def protocol_bytes(protocol: dict[str, Any]) -> bytes:
    """protocol.json is indented for reading, but still sorted and UTF-8, so its bytes are fixed."""
    return (json.dumps(protocol, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode()


def materials_fingerprint(manifest: Any) -> str:
    """SHA-256 of the canonical map of data-file hashes: the protocol fingerprint."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise NeedlepointError("manifest.json: no files map")
    return sha256_hex(canonical_bytes(files))


def _folder(path: str | Path) -> Path:
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
    root = _folder(path)
    protocol = load_protocol_file(root)
    schema.check_file_sizes(root, protocol)
    bodies: dict[int, bytes] = {}
    for number, line in schema.jsonl_values(root / "requests.jsonl"):
        schema.check_request(line, f"{root / 'requests.jsonl'}:{number}")
        bodies[line["seq"]] = canonical_bytes(line["body"])
    answer_key = {}
    for number, line in schema.jsonl_values(root / "answer_key.jsonl"):
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
