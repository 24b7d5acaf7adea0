"""Design identity: which protocol fields are the design, and the design fingerprint over them.

Every top-level protocol field is exactly one of: *design* (materials, order, templates,
scoring, analysis), a *label* (description, version, the optional rationale and
materials_reuse), *execution* (the runner's spacing and stop rules) or *model variant* (model
and body fields). Two prepared
folders with one design fingerprint hold the same records, codes, order and answer key, are
scored and analysed by the same rules, and differ at most in the model they ask and how the
bodies are shaped.
"""

from __future__ import annotations

from typing import Any

from needlepoint.design.profiles import BODY_FIELDS
from needlepoint.jsonio import canonical_bytes, sha256_hex

DESIGN_FIELDS = (
    "analysis",
    "cases",
    "code_pattern",
    "conditions",
    "format",
    "lengths",
    "names",
    "orders",
    "protocol_id",
    "seeds",
    "similarities",
    "templates",
    "unknown",
)
LABEL_FIELDS = ("description", "version", "rationale", "materials_reuse")
EXECUTION_FIELDS = ("runner",)
VARIANT_FIELDS = ("model", *BODY_FIELDS)


def design_part(protocol: dict[str, Any]) -> dict[str, Any]:
    """The design fields of a protocol, whole (missing ones are an error upstream)."""
    return {key: protocol[key] for key in DESIGN_FIELDS}


def design_fingerprint(protocol: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the protocol's design fields."""
    return sha256_hex(canonical_bytes(design_part(protocol)))
