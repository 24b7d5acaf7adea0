"""Prepare a folder of frozen, fingerprinted materials from a protocol.

``generate`` computes every data file's bytes in memory; ``prepare`` writes them with
``manifest.json``, which records each file's SHA-256 and the source of the generating modules.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.identity import design_fingerprint
from needlepoint.design.materials import RequestBuilder, generate_cases
from needlepoint.design.order import execution_plan
from needlepoint.design.prepared import DATA_FILES, MANIFEST_FORMAT, PLAN_COLUMNS, protocol_bytes
from needlepoint.design.profiles import make_variant
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, file_sha256, sha256_hex, write_bytes_atomic

# The modules whose code decides the bytes of a prepared folder; fingerprinted in the manifest.
SOURCE_MODULES = (
    "design/java_random.py",
    "jsonio.py",
    "design/protocol.py",
    "design/profiles.py",
    "design/identity.py",
    "design/materials.py",
    "design/order.py",
    "design/prepared.py",
    "design/freeze.py",
)


def generate(protocol: dict[str, Any]) -> dict[str, bytes]:
    """The bytes of every data file of a prepared folder, in memory."""
    cases = generate_cases(protocol)
    builder = RequestBuilder(protocol)
    length_index = {n: i for i, n in enumerate(protocol["lengths"])}
    requests, keys = [], []
    plan = io.StringIO()
    writer = csv.writer(plan, lineterminator="\n")
    writer.writerow(PLAN_COLUMNS)
    for slot in execution_plan(protocol):
        case = cases[slot.case_index]
        bg = case.backgrounds[length_index[slot.length]]
        req = builder.build(case, bg, slot.similarity, slot.condition)
        body = canonical_bytes(req.body)
        # Keys "body" < "seq" in sorted order, so this is the canonical encoding of the line.
        requests.append(b'{"body":' + body + b',"seq":' + str(slot.seq).encode() + b"}\n")
        writer.writerow(
            (
                slot.seq,
                slot.block,
                slot.pair,
                case.label,
                slot.length,
                slot.similarity,
                slot.condition,
                slot.order,
                sha256_hex(body),
            )
        )
        keys.append(
            {
                "seq": slot.seq,
                "expected": req.expected,
                "target_code": case.target_code,
                "target_name": case.target_name,
                "codes_present": list(req.codes_present),
                "near_codes": list(req.near_codes),
                "near_names": list(req.near_names),
                "near_kinds": list(case.near_kinds)
                if slot.similarity == "high"
                else ["unrelated"] * len(req.near_codes),
                "similarity": slot.similarity,
                "condition": slot.condition,
            }
        )
    return {
        "protocol.json": protocol_bytes(protocol),
        "requests.jsonl": b"".join(requests),
        "plan.csv": plan.getvalue().encode(),
        "answer_key.jsonl": b"".join(canonical_bytes(k) + b"\n" for k in keys),
    }


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
