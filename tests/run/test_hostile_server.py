"""A loopback server that answers with hostile bodies: the run never crashes, the answer that
arrived is journalled and classified, the journal passes audit-run, and memory stays bounded.
"""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.bombs import deflate_raw, gzip_bomb
from support.fuzz import SMALL, run_cli
from support.runner import KEY_ENV, SENTINEL, live, of_type, server_for

from needlepoint.design.prepared import prepare
from needlepoint.run.audit import audit_run
from needlepoint.run.records import decode_body
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


CHOICE = '{"finish_reason":"stop","message":{"role":"assistant","content":"ANSWER"}}'
DUPLICATE = (
    '{"model":"MODEL","choices":[' + CHOICE.replace("ANSWER", "UNKNOWN") + "],"
    '"choices":[' + CHOICE.replace("ANSWER", "XX-0000") + "]}"
)


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
        # 990 stacked codings once overflowed the stack (RecursionError, exit 70) and left the
        # answer that arrived journalled as indeterminate_interrupted, without status or body.
        "gzip_990_times": (
            lambda p: gz(text(p)),
            {"Content-Encoding": ", ".join(["gzip"] * 990)},
            "content_encoding",
        ),
        # {"choices": [right], "choices": [wrong]} once resolved silently to the last one.
        "duplicate_choices": (raw(DUPLICATE), {}, "json_duplicate_key"),
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


def test_an_answer_whose_body_breaks_the_reader_is_kept_with_its_status(
    small, tmp_path, monkeypatch
):
    """Whatever a body does to the reader once the status arrived, the outcome keeps the status
    and the bytes: never indeterminate_interrupted without them."""
    from needlepoint.run import transport as body_module

    def broken(self, raw, tick=None):
        for chunk in raw:
            self._raw.append(chunk)
            raise RecursionError("maximum recursion depth exceeded")

    run = tmp_path / "run"
    with server_for(small) as server:
        server.script([server.serve("gz", lambda p: gz(text(p)), {"Content-Encoding": "gzip"})])
        monkeypatch.setattr(body_module.BodyReader, "read", broken)
        live(small, run, server, allow=1, timeout_s=10)
    first = of_type(run, "outcome")[0]
    assert (first["http_status"], first["classification"]["kind"]) == (200, "content_encoding")
    assert "RecursionError" in first["error_detail"] and decode_body(first)
    monkeypatch.undo()
    assert audit_run(run).ok


def test_a_deadline_before_the_request_left_is_a_connect_error():
    """The deadline passes while the connection is still being made (a tiny --timeout-s, or a
    host that does not answer): the request never left, so it is a connect_error, never an
    indeterminate outcome."""
    import socket

    from needlepoint.run.clock import RealClock
    from needlepoint.run.transport import Transport

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepts: once its queue is full, a connect waits
        port = listener.getsockname()[1]
        queued = [socket.socket() for _ in range(3)]
        for sock in queued:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
        time.sleep(0.1)
        transport = Transport(
            f"http://127.0.0.1:{port}/v1",
            api_key="k" * 12,
            timeout_s=0.3,
            deadline_s=0.05,
            clock=RealClock(),
        )
        try:
            outcomes = [transport.send(transport.build(b"{}")) for _ in range(3)]
        finally:
            transport.close()
            for sock in queued:
                sock.close()
    assert [o.error for o in outcomes] == ["connect_error"] * 3, outcomes[0].error_detail
    assert "never left" in outcomes[0].error_detail


def test_usage_without_token_counts_is_not_called_missing(small, tmp_path):
    """A cap stops on an unknown cost; the stop line says why it is unknown."""
    usage = {"completion_tokens": 3}
    run = tmp_path / "run"
    with server_for(small) as server:
        server.script([server.serve("u", lambda p: text(p, usage=usage))])
        summary = live(small, run, server, allow=3, cost_cap=5.0, timeout_s=10, **RATES)
    assert summary.stop_reason == "cost_unknown"
    assert "usage has no integer prompt_tokens" in summary.stop_detail
    assert "no usage" not in summary.stop_detail


def test_an_answer_with_a_bare_carriage_return_round_trips_through_the_table(small, tmp_path):
    """The csv module leaves a bare CR unquoted, and every CSV reader ends a row there."""
    run = tmp_path / "run"
    with server_for(small) as server:
        server.script(["content:UNKNOWN\rsecond line", 'content:a,b\r\n"quoted"'])
        live(small, run, server, allow=2)
    assert run_cli(["results", str(run)])[0] == 0
    argv = ["analyze", "--results", str(run / "results.csv"), "--prepared", str(small)]
    code, _, err = run_cli([*argv, "--no-figures", "--out", str(tmp_path / "a")])
    assert code == 0, err
    assert run_cli(["audit-run", str(run)])[0] == 0
