"""A loopback server that answers with hostile bodies: the run never crashes, the answer that
arrived is journalled and classified, the journal passes audit-run, and memory stays bounded.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.bombs import deflate_raw, gzip_bomb
from support.fuzz import SMALL, run_cli
from support.runner import KEY_ENV, SENTINEL, live, of_type, server_for

from needlepoint.design.freeze import prepare
from needlepoint.run.audit import audit_run
from needlepoint.run.journal_records import decode_body
from needlepoint.run.transport import MAX_BODY_BYTES

# Peak Python memory allowed while one hostile answer is received and journalled: a few times
# the 16 MiB body limit, never the decoded size of a bomb.
PEAK_LIMIT = 160 * 1024 * 1024
BOMB = 64 << 20  # decoded bytes of each bomb: four times the body limit
# Cost rates, so that a huge token count would have to become a cost; a timeout generous
# enough that decoding 16 MiB under tracemalloc on a loaded machine never meets the deadline.
RATES = {"input_rate": 1.0, "output_rate": 2.0}


def gz(data: bytes, level: int = 6) -> bytes:
    return gzip.compress(data, level, mtime=0)


def answer(payload: dict[str, Any], *, content: Any = "UNKNOWN", usage: Any = None) -> dict:
    data: dict[str, Any] = {
        "model": payload.get("model"),
        "choices": [
            {"finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        ],
    }
    if usage is not None:
        data["usage"] = usage
    return data


def text(payload: dict[str, Any], **kw: Any) -> bytes:
    return json.dumps(answer(payload, **kw)).encode()


def raw(template: str) -> Callable[[dict[str, Any]], bytes]:
    """A body written by hand (for what json.dumps will not write), with the model filled in."""
    return lambda payload: template.replace("MODEL", payload.get("model", "")).encode()


USAGE_NAN = '{"model":"MODEL","choices":[{"finish_reason":"stop","message":{"role":"assistant",'
USAGE_NAN += '"content":"UNKNOWN"}}],"usage":{"prompt_tokens":NaN,"completion_tokens":1}}'


def _hostile() -> dict[str, tuple[Any, dict[str, str], str]]:
    bomb = gzip_bomb(BOMB)
    return {
        "gzip_gzip_bomb": (gz(bomb, 9), {"Content-Encoding": "gzip, gzip"}, "body_too_large"),
        "gzip_bomb": (bomb, {"Content-Encoding": "gzip"}, "body_too_large"),
        "deflate_bomb": (deflate_raw(BOMB), {"Content-Encoding": "deflate"}, "body_too_large"),
        "plain_17_mib": (b" " * (17 << 20), {}, "body_too_large"),
        "broken_gzip": (
            b"\x1f\x8b\x08 this is not gzip",
            {"Content-Encoding": "gzip"},
            "content_encoding",
        ),
        "brotli": (b"\x8b\x02\x80{}\x03", {"Content-Encoding": "br"}, "content_encoding"),
        "usage_nan": (raw(USAGE_NAN), {}, "unparsable_json"),
        "infinity": (raw(USAGE_NAN.replace("NaN", "-Infinity")), {}, "unparsable_json"),
        "deep_200000": (b"[" * 200_000 + b"]" * 200_000, {}, "json_too_deep"),
        "lone_surrogate": (
            lambda p: text(p, content="UNKNOWN\ud800"),  # json.dumps writes it as \\ud800
            {},
            "invalid_unicode",
        ),
        "huge_tokens": (
            lambda p: text(p, usage={"prompt_tokens": 10**400, "completion_tokens": 1}),
            {},
            "usage_invalid",
        ),
        "usage_string": (lambda p: text(p, usage="plenty"), {}, "usage_invalid"),
        "not_utf8": (lambda p: text(p).replace(b"UNKNOWN", b"UNKNOWN\xff"), {}, "unparsable_json"),
        "million_objects": (b"[" + b"{}," * 2_000_000 + b"{}]", {}, "json_too_large"),
    }


HOSTILE = sorted(_hostile())


@pytest.fixture(scope="module")
def bodies() -> dict[str, tuple[Any, dict[str, str], str]]:
    return _hostile()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A 32-request prepared folder: verify and audit at each start stay cheap under tracemalloc."""
    root = tmp_path_factory.mktemp("small")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_body_is_kept_classified_and_audited(small, tmp_path, bodies, name):
    body, headers, kind = bodies[name]
    run = tmp_path / "run"
    with server_for(small) as server:
        server.script([server.serve(name, body, headers)])
        tracemalloc.start()
        try:
            summary = live(small, run, server, allow=2, timeout_s=10, **RATES)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert server.count == 2, "nothing retried, and the run went on after the failure"
        # A resume sends the next seq; the received answer never becomes indeterminate.
        live(small, run, server, allow=3, timeout_s=10, **RATES)
    assert summary.stop_reason == "allowance_spent"
    first = of_type(run, "outcome")[0]
    assert first["seq"] == 1 and not first["recovered"]
    assert first["classification"]["status"] == "protocol_failure"
    assert first["classification"]["kind"] == kind
    assert first["error_detail"], "every interpretation failure says why"
    assert first["http_status"] == 200
    stored = decode_body(first)
    assert stored is not None and len(stored) <= MAX_BODY_BYTES
    sent = body({"model": "agnes-3.0-flash"}) if callable(body) else body
    if kind == "body_too_large":
        assert (
            first["body_truncated"] and f"limit of {MAX_BODY_BYTES} bytes" in first["error_detail"]
        )
    else:
        assert stored == sent, "the body is journalled exactly as it arrived"
    kinds = [o["classification"]["kind"] for o in of_type(run, "outcome")]
    assert "indeterminate_interrupted" not in kinds and len(kinds) == 3
    assert audit_run(run).ok, audit_run(run).problems
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB"


def test_a_200000_character_answer_round_trips_through_results_and_analysis(
    reference_dir, tmp_path
):
    run = tmp_path / "run"
    long_answer = "UNKNOWN " + "x" * 200_000
    with server_for(reference_dir) as server:
        server.script([f"content:{long_answer}"])
        live(reference_dir, run, server, allow=2)
    assert of_type(run, "outcome")[0]["classification"]["response_text"] == long_answer
    assert run_cli(["results", str(run)])[0] == 0
    code, _, err = run_cli(
        [
            *["analyze", "--results", str(run / "results.csv"), "--prepared", str(reference_dir)],
            *["--no-figures", "--out", str(tmp_path / "analysis")],
        ]
    )
    assert code == 0, err
    assert run_cli(["audit-run", str(run)])[0] == 0
