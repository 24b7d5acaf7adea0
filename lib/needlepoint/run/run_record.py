"""The checked run settings as written down: run.json and the journal's ``session`` record.

run.json (format 1) says once what the run is; each session record repeats the settings that
may differ between sessions. Both are frozen records serialised through ``needlepoint.schema``;
``docs/schema.md`` states every field, and a test checks that it lists exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from needlepoint.run.declaration import DeclarationRef
from needlepoint.run.simulate import PositionParams
from needlepoint.schema import (
    plain_without_absent,
    record_from_plain,
    record_with_absent,
)

RUN_FORMAT = 1
RUN_KIND = "needlepoint-run"


@dataclass(frozen=True)
class SimulationRecord:
    """How a simulated run was simulated (run.json ``simulate``; null for a live run)."""

    mode: str
    params: PositionParams | None
    fault_cycle: tuple[str, ...] | None


@dataclass(frozen=True)
class CostRecord:
    """The money settings (run.json ``cost``): rates per million tokens and the cap."""

    input_rate: float | None
    output_rate: float | None
    cap: float | None


@dataclass(frozen=True)
class RunRecord:
    """run.json: what this run is, written once when its folder is created."""

    format: int
    kind: str
    created: str
    simulation: bool
    simulate: SimulationRecord | None
    prepared_dir: str
    prepared_fingerprint: str
    protocol_id: str | None
    protocol_version: int | None
    model: str
    base_url: str | None
    api_key_env: str | None
    allow: int
    min_gap_s: float
    protocol_min_gap_s: float
    override_reason: str | None
    timeout_s: float
    deadline_s: float
    cost: CostRecord
    package_version: str
    extra: dict[str, Any]
    # The prepared protocol's design fingerprint and body profile. A run.json written before
    # they existed has neither: read as None, and written back without them.
    design_fingerprint: str | None = None
    body_profile: str | None = None
    # True when --allow-insecure-http let the key travel over plain http to a host that is not
    # loopback; absent otherwise (and in every run.json written before the flag existed).
    allow_insecure_http: bool | None = None
    # The declaration the run was started under (`--declaration`); absent without one.
    declaration: DeclarationRef | None = None

    def to_plain(self) -> dict[str, Any]:
        return plain_without_absent(self, _ADDED_LATER)

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> RunRecord:
        return record_with_absent(cls, value, where, _ADDED_LATER)


_ADDED_LATER = ("design_fingerprint", "body_profile", "allow_insecure_http", "declaration")


@dataclass(frozen=True)
class SessionRecord:
    """The settings one session ran under: the journal's ``session`` record, less its envelope.

    ``dropped_tail_sha256`` is written only when the session dropped a torn journal tail, and
    ``declaration_sha256`` only when the run was started under a declaration.
    """

    session: int
    time: str
    run_json_sha256: str
    package_version: str
    allow: int
    min_gap_s: float
    override_reason: str | None
    timeout_s: float
    deadline_s: float
    input_rate: float | None
    output_rate: float | None
    cost_cap: float | None
    dropped_tail_sha256: str | None = None
    declaration_sha256: str | None = None

    def to_plain(self) -> dict[str, Any]:
        return plain_without_absent(self, _SESSION_ABSENT)

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> SessionRecord:
        return record_from_plain(cls, dict.fromkeys(_SESSION_ABSENT) | value, where)


_SESSION_ABSENT = ("dropped_tail_sha256", "declaration_sha256")
