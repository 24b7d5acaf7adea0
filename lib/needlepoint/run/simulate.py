"""Simulated endpoints for ``needlepoint run --simulate``: an httpx.MockTransport, never a model.

- ``perfect`` answers every request correctly.
- ``position`` is a seeded model of the effects the protocol looks for: edges beat the middle,
  high similarity hurts the middle more, longer backgrounds hurt a little. Its parameters are
  recorded in run.json, and each seq draws from its own generator, ``default_rng([seed, seq])``,
  so a resumed simulation answers exactly as an uninterrupted one.
  In a depth design (PROTOCOL.md, "Depth designs") the same parameters give a U over depth
  (``p_edge`` at 0 and 1, ``p_middle`` at 0.5, linear between), and three optional parameters
  shape it further: ``depth_decline`` (loss from depth 0 to depth 1, linear), ``depth_dip``
  (extra loss peaked at 0.5, zero beyond ±0.25) and ``near_before_drop`` (loss per near name
  before the target, high similarity only). They are recorded only when set.
- ``faulty`` answers odd seqs correctly and injects one failure kind on each even seq, cycling
  through every kind the classifier knows, then 429, 401 and 403.

Simulated latency advances the run's SimClock; nothing here sleeps.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run.transport import DeadlineExceeded
from needlepoint.schema import AddedLater

if TYPE_CHECKING:
    import httpx

    from needlepoint.design.prepared import PlanRow, Prepared
    from needlepoint.run.clock import SimClock

SIM_MODES = ("perfect", "position", "faulty")
FAULT_CYCLE = (
    "length",
    "length_empty",  # the whole budget went into reasoning: no answer at all
    "reasoning",  # not a failure: a think block before the answer, which is scored alone
    "role",
    "wrong_model",
    "no_choices",
    "broken_json",
    "content_missing",
    "content_not_string",
    "empty",
    "no_usage",  # not a failure: a valid answer whose cost is unknown
    "too_deep",
    "lone_surrogate",
    "usage_type",
    "bad_gzip",
    "status:500",
    "connect_error",
    "timeout",
    "dropped",
    "deadline",
    "status:429",
    "status:401",
    "status:403",
)


def _deep(payload: dict[str, Any]) -> tuple[bool, bytes]:
    payload["logprobs"] = "@"
    text = json.dumps(payload)
    return False, text.replace('"@"', "[" * 100_000 + "]" * 100_000).encode()


def _surrogate(payload: dict[str, Any]) -> tuple[bool, bytes]:
    payload["choices"][0]["message"]["content"] += "\ud800"
    return False, json.dumps(payload).encode()  # ensure_ascii: the surrogate stays an escape


def _usage_type(payload: dict[str, Any]) -> tuple[bool, bytes]:
    payload["usage"]["prompt_tokens"] = "many"
    return False, json.dumps(payload).encode()


_HOSTILE = {
    "too_deep": _deep,
    "lone_surrogate": _surrogate,
    "usage_type": _usage_type,
    "bad_gzip": lambda payload: (True, b"\x1f\x8b not gzip"),
}


@dataclass(frozen=True)
class PositionParams(AddedLater):
    """Probabilities of an exactly correct answer, before the length penalty."""

    seed: int = 20260101
    p_edge: float = 0.95  # target at the beginning or end
    p_middle: float = 0.85  # target in the middle, low similarity
    high_similarity_middle_drop: float = 0.25  # extra loss in the middle with near names
    high_similarity_edge_drop: float = 0.03
    length_drop_per_100_records: float = 0.02
    p_refusal: float = 0.92  # condition A answered UNKNOWN
    p_near_when_wrong_high: float = 0.8  # a wrong answer under high similarity names a near code
    latency_s: float = 0.8
    latency_per_kib_s: float = 0.02
    # Depth designs only; absent from run.json unless set (so older records keep their bytes).
    depth_decline: float | None = None
    depth_dip: float | None = None
    near_before_drop: float | None = None

    ADDED_LATER: ClassVar = ("depth_decline", "depth_dip", "near_before_drop")

    @classmethod
    def from_dict(cls, values: dict[str, float] | None) -> PositionParams:
        """Checked parameters: each known, and in its range (a seed numpy accepts, probabilities
        in [0, 1], latencies of at most a day), so a run folder is never made unresumable."""
        unknown = set(values or {}) - set(cls.__dataclass_fields__)
        if unknown:
            raise NeedlepointError(f"simulation parameters: unknown field {sorted(unknown)[0]}")
        for name, value in sorted((values or {}).items()):
            _check_param(name, value)
        return cls(**(values or {}))

    def p_correct(
        self, condition: str, similarity: str, length: int, near_before: int | None = None
    ) -> float:
        if condition == "A":
            return self.p_refusal
        high = similarity == "high"
        if condition.startswith("D"):
            return self._p_depth(float(condition[1:]), high, length, near_before or 0)
        if condition == "M":
            p = self.p_middle - (self.high_similarity_middle_drop if high else 0.0)
        else:
            p = self.p_edge - (self.high_similarity_edge_drop if high else 0.0)
        return min(1.0, max(0.0, p - self.length_drop_per_100_records * length / 100))

    def _p_depth(self, depth: float, high: bool, length: int, near_before: int) -> float:
        middle = self.p_middle - (self.high_similarity_middle_drop if high else 0.0)
        edge = self.p_edge - (self.high_similarity_edge_drop if high else 0.0)
        p = edge - (edge - middle) * (1 - abs(2 * depth - 1))
        p -= (self.depth_decline or 0.0) * depth
        p -= (self.depth_dip or 0.0) * max(0.0, 1 - abs(depth - 0.5) / 0.25)
        p -= (self.near_before_drop or 0.0) * near_before if high else 0.0
        return min(1.0, max(0.0, p - self.length_drop_per_100_records * length / 100))


# Parameters that are not probabilities: the seed, and latencies in seconds.
_SEED_LIMIT = 2**63
_LATENCY_LIMIT = 86_400.0


def _check_param(name: str, value: object) -> None:
    where = f"--sim-param {name}"
    if name == "seed":
        if isinstance(value, bool) or not isinstance(value, int):
            raise NeedlepointError(f"{where}: must be a whole number")
        if not 0 <= value < _SEED_LIMIT:
            raise NeedlepointError(f"{where}: {value} is outside 0 to 2^63 - 1")
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NeedlepointError(f"{where}: must be a finite number")
    high = _LATENCY_LIMIT if name.startswith("latency") else 1.0
    if not 0 <= value <= high:
        raise NeedlepointError(f"{where}: {value:g} is outside 0 to {high:g}")


class Simulator:
    """Answers the frozen requests of one prepared folder, advancing a simulated clock."""

    def __init__(
        self,
        mode: str,
        prepared: Prepared,
        clock: SimClock,
        *,
        timeout_s: float,
        deadline_s: float,
        params: PositionParams | None = None,
    ) -> None:
        if mode not in SIM_MODES:
            raise NeedlepointError(f"--simulate: expected one of {', '.join(SIM_MODES)}")
        self.mode = mode
        self.params = params or PositionParams()
        self.clock = clock
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.key = prepared.answer_key
        self.rows = {row.request_sha256: row for row in prepared.plan}

    def transport(self) -> httpx.MockTransport:
        import httpx

        return httpx.MockTransport(self.handle)

    def _content(self, row: PlanRow) -> str:
        entry = self.key[row.seq]
        if self.mode != "position":
            return entry["expected"]
        import numpy as np

        rng = np.random.default_rng([self.params.seed, row.seq])
        p = self.params.p_correct(
            row.condition, row.similarity, row.length, entry.get("near_before")
        )
        if rng.random() < p:
            return entry["expected"]
        near = list(entry["near_codes"])
        others = [c for c in entry["codes_present"] if c != entry["expected"] and c not in near]
        use_near = row.similarity == "high" and rng.random() < self.params.p_near_when_wrong_high
        if row.condition == "A" and not use_near and rng.random() < 0.5:
            return entry["target_code"]  # a code that is nowhere in the request
        pool = near if use_near or not others else others
        return str(pool[int(rng.integers(len(pool)))])

    def handle(self, request: httpx.Request) -> httpx.Response:
        import httpx

        body = request.content
        row = self.rows.get(sha256_hex(body))
        if row is None:
            self.clock.advance(0.05)
            return httpx.Response(400, json={"error": {"message": "not a frozen request"}})
        fault = ""
        if self.mode == "faulty" and row.seq % 2 == 0:
            fault = FAULT_CYCLE[(row.seq // 2 - 1) % len(FAULT_CYCLE)]
        if fault == "connect_error":
            self.clock.advance(0.01)
            raise httpx.ConnectError("simulated: connection refused", request=request)
        if fault == "timeout":
            self.clock.advance(self.timeout_s)
            raise httpx.ReadTimeout("simulated: read timed out", request=request)
        if fault == "dropped":
            self.clock.advance(0.5)
            raise httpx.RemoteProtocolError("simulated: server disconnected", request=request)
        if fault == "deadline":
            self.clock.advance(self.deadline_s)
            raise DeadlineExceeded("simulated: the body trickled past the deadline")
        self.clock.advance(
            round(self.params.latency_s + self.params.latency_per_kib_s * len(body) / 1024, 3)
        )
        headers = {"x-request-id": f"sim-{row.seq}"}
        if fault.startswith("status:"):
            code = int(fault.partition(":")[2])
            return httpx.Response(code, json={"error": {"message": "simulated"}}, headers=headers)
        if fault == "broken_json":
            return httpx.Response(200, content=b'{"choices": [', headers=headers)
        if fault in _HOSTILE:
            coded, data = _HOSTILE[fault](self._payload(row, body, ""))
            if coded:
                headers["content-encoding"] = "gzip"
            # A stream, so the runner's own bounded decoder reads it as it would from a socket.
            return httpx.Response(200, stream=_stream(data), headers=headers)
        return httpx.Response(200, json=self._payload(row, body, fault), headers=headers)

    def _payload(self, row: PlanRow, body: bytes, fault: str) -> dict[str, Any]:
        request = json.loads(body)
        content: Any = self._content(row)
        if fault == "reasoning":
            content = "<think>simulated reasoning</think>" + content
        elif fault == "content_not_string":
            content = [{"type": "text", "text": content}]
        elif fault == "empty":
            content = " \n"
        elif fault == "length_empty":
            content = ""
        finish = "length" if fault in ("length", "length_empty") else "stop"
        # The frozen body's shape says which endpoint this is: a prompt means /completions.
        if "prompt" in request:
            choice: dict[str, Any] = {"index": 0, "text": content, "finish_reason": finish}
            if fault == "content_missing":
                del choice["text"]
        else:
            message: dict[str, Any] = {"role": "user" if fault == "role" else "assistant"}
            if fault != "content_missing":
                message["content"] = content
            choice = {"index": 0, "finish_reason": finish, "message": message}
        data: dict[str, Any] = {
            "id": f"sim-{row.seq}",
            "object": "text_completion" if "prompt" in request else "chat.completion",
            "model": "other-model" if fault == "wrong_model" else request["model"],
            "choices": [] if fault == "no_choices" else [choice],
        }
        if fault != "no_usage":
            prompt = len(body) // 3
            budget = request.get("max_tokens", request.get("max_completion_tokens", 4))
            completion = budget if fault == "length_empty" else 4
            data["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            if fault in ("reasoning", "length_empty"):
                spent = completion if fault == "length_empty" else 3
                data["usage"]["completion_tokens_details"] = {"reasoning_tokens": spent}
        return data


def _stream(data: bytes) -> Any:
    """An unread response stream, as a socket would deliver it."""
    import httpx

    class Stream(httpx.SyncByteStream):
        def __iter__(self) -> Any:
            yield data

    return Stream()
