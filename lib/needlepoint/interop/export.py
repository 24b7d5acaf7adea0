"""``needlepoint export inspect``: a prepared folder as one self-contained inspect_ai task file.

Each frozen request becomes one ``Sample`` whose input is the frozen messages verbatim (role and
text as in ``requests.jsonl``), whose id is the request's seq and body SHA-256, and whose metadata
is its cell of the design and its answer-key entry. The task carries the frozen generation
parameters with ``max_retries=0``, ``max_connections=1`` and ``epochs=1``, names the design and
protocol fingerprints, and scores with needlepoint's own strict scoring (``needlepoint.scoring``).

Only the ``chat`` body profile is exported: for a ``reasoning`` body, inspect's OpenAI-compatible
provider decides from the model's name whether ``max_tokens`` goes out as ``max_completion_tokens``
(and maps ``reasoning_effort`` its own way), and a ``completion`` body is one prompt string on
another endpoint, which an inspect chat sample cannot express. Either could make the requests
differ from the frozen ones, so both are refused rather than approximated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design.prepared import Prepared, load_prepared
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, parse_json
from needlepoint.safeio import write_bytes_atomic

TASK_NAME = "needlepoint_task.py"
EXPORT_KIND = "needlepoint-inspect-task"
EXPORT_FORMAT = 1
# Body fields the task can carry as GenerateConfig fields; any other is refused.
_CONFIG_FIELDS = {"temperature": "temperature", "max_tokens": "max_tokens", "stop": "stop_seqs"}
_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class FrozenSample:
    """One frozen request as an inspect sample: its id, messages, cell and answer-key entry."""

    id: str
    seq: int
    request_sha256: str
    messages: tuple[tuple[str, str], ...]
    metadata: Mapping[str, Any]


def sample_id(seq: int, request_sha256: str) -> str:
    """The sample id: the seq, then the SHA-256 of the frozen body bytes."""
    return f"{seq}-{request_sha256}"


def frozen_messages(body: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    """The frozen messages as (role, text) pairs; refused when a message is not plain text."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise NeedlepointError(f"{where}: body has no messages list")
    out = []
    for i, m in enumerate(messages):
        if (
            not isinstance(m, dict)
            or set(m) != {"role", "content"}
            or m["role"] not in _ROLES
            or not isinstance(m["content"], str)
        ):
            raise NeedlepointError(
                f"{where}: message {i} is not a plain-text system, user or assistant message"
            )
        out.append((m["role"], m["content"]))
    return tuple(out)


def generation_config(body: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The frozen body's generation fields as GenerateConfig keyword arguments."""
    extra = sorted(set(body) - {"model", "messages", *_CONFIG_FIELDS})
    if extra:
        raise NeedlepointError(f"{where}: body field {extra[0]} has no inspect equivalent")
    config = {_CONFIG_FIELDS[k]: body[k] for k in sorted(_CONFIG_FIELDS) if k in body}
    return {**config, "max_retries": 0, "max_connections": 1}


def frozen_samples(prepared: Prepared) -> tuple[tuple[FrozenSample, ...], dict[str, Any]]:
    """Every frozen request in seq order as a sample, and the generation config they share."""
    profile = body_profile(prepared.protocol)
    if profile != "chat":
        raise NeedlepointError(
            f"{prepared.root}: body profile {profile!r} cannot be expressed as an inspect chat "
            "task without changing the requests; only the chat profile is exported"
        )
    unknown = prepared.protocol.get("unknown", "UNKNOWN")
    samples, config = [], None
    for row in prepared.plan:
        where = f"{prepared.root.name}/requests.jsonl seq {row.seq}"
        body = parse_json(prepared.bodies[row.seq].decode("utf-8"), where)
        these = generation_config(body, where)
        if config is None:
            config = these
        elif these != config:
            raise NeedlepointError(f"{where}: generation parameters differ from seq 1")
        key = prepared.answer_key[row.seq]
        metadata = {
            "seq": row.seq,
            "request_sha256": row.request_sha256,
            "cell": {
                "block": row.block,
                "pair": row.pair,
                "length": row.length,
                "similarity": row.similarity,
                "condition": row.condition,
                "order": row.order,
            },
            "case": row.case,
            "expected": key["expected"],
            "answer": {
                "expected": key["expected"],
                "near_codes": list(key.get("near_codes", ())),
                "codes_present": list(key.get("codes_present", ())),
            },
            "unknown": unknown,
        }
        samples.append(
            FrozenSample(
                sample_id(row.seq, row.request_sha256),
                row.seq,
                row.request_sha256,
                frozen_messages(body, where),
                metadata,
            )
        )
    assert config is not None  # a verified prepared folder has at least one request
    return tuple(samples), config


def task_source(prepared: Prepared) -> str:
    """The task file's Python source: the data as one JSON literal, then the task."""
    samples, config = frozen_samples(prepared)
    data = {
        "kind": EXPORT_KIND,
        "format": EXPORT_FORMAT,
        "design_fingerprint": design_fingerprint(prepared.protocol),
        "protocol_fingerprint": prepared.fingerprint,
        "protocol_id": prepared.protocol.get("protocol_id"),
        "protocol_version": prepared.protocol.get("version"),
        "model": prepared.protocol.get("model"),
        "min_gap_s": prepared.protocol.get("runner", {}).get("min_gap_s"),
        "config": config,
        "samples": [
            {"id": s.id, "messages": [list(m) for m in s.messages], "metadata": s.metadata}
            for s in samples
        ],
    }
    text = canonical_bytes(data).decode("utf-8")
    return _TEMPLATE.replace("@FINGERPRINT@", data["design_fingerprint"]).replace(
        "@DATA@", repr(text)
    )


def export_inspect(prepared_dir: str | Path, out_dir: str | Path) -> Path:
    """Write the task file for a verified prepared folder into ``out_dir``; return its path."""
    report = verify_prepared(prepared_dir)
    if not report.ok:
        raise NeedlepointError(
            f"{prepared_dir}: prepared folder fails verify: {report.problems[0]}"
        )
    prepared = load_prepared(prepared_dir)
    source = task_source(prepared)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NeedlepointError(f"{out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    path = out / TASK_NAME
    write_bytes_atomic(path, source.encode("utf-8"))
    return path


# The generated file. It imports needlepoint only for scoring, so the samples, ids and config
# are readable without it; inspect's own ``inspect eval`` runs it.
_TEMPLATE = '''"""needlepoint design @FINGERPRINT@ as an inspect_ai task.

Written by `needlepoint export inspect`; do not edit (the import checks every sample against the
prepared folder). Run it as docs/interop.md says, for example:

    inspect eval needlepoint_task.py --model openai-api/NAME/MODEL -M max_retries=0 \\
        --max-samples 1 --max-connections 1 --no-fail-on-error --log-format eval

then `needlepoint import inspect LOG --prepared PREPARED --out RUNDIR`.
"""

import json

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
)
from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

FROZEN = json.loads(@DATA@)
DESIGN_FINGERPRINT = FROZEN["design_fingerprint"]
PROTOCOL_FINGERPRINT = FROZEN["protocol_fingerprint"]
_MESSAGE = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


def _sample(entry):
    messages = [_MESSAGE[role](content=text) for role, text in entry["messages"]]
    meta = entry["metadata"]
    return Sample(input=messages, target=meta["expected"], id=entry["id"], metadata=meta)


@scorer(metrics=[accuracy()])
def needlepoint_strict():
    """needlepoint's strict scoring of the answer text: Java trim, then exact match.

    Indicative only: `needlepoint import inspect` re-scores every sample from the raw response
    the log holds (finish_reason, model and usage included), as a native run is scored.
    """
    from needlepoint.scoring import java_trim, score_text

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata
        if state.output.stop_reason != "stop":
            return Score(value=NOANSWER, explanation=f"stop_reason {state.output.stop_reason}")
        text = java_trim(state.output.completion)
        status, kind = score_text(text, meta["answer"], meta["unknown"])
        value = CORRECT if status == "correct" else INCORRECT
        return Score(value=value, answer=text, explanation=kind or status)

    return score


@task
def needlepoint_design():
    """One sample per frozen request, sent once each: no retries, one connection, one epoch."""
    return Task(
        dataset=MemoryDataset([_sample(e) for e in FROZEN["samples"]], shuffled=False),
        solver=generate(),
        scorer=needlepoint_strict(),
        config=GenerateConfig(**FROZEN["config"]),
        epochs=1,
        metadata={
            "needlepoint_design_fingerprint": DESIGN_FINGERPRINT,
            "needlepoint_protocol_fingerprint": PROTOCOL_FINGERPRINT,
        },
    )
'''
