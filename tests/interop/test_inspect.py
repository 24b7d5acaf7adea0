"""export inspect -> the real `inspect eval` against a loopback server -> import inspect -> analyze.

The task file is run by inspect_ai itself, in a subprocess, against the loopback
OpenAI-compatible server (tests/support/loopback.py); its real log is read back by the import.
The same answers, served to needlepoint's own runner, must give the same analysis cell for cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.fuzz import SMALL, run_cli
from support.loopback import LoopbackServer
from support.runner import KEY_ENV, MODEL, SENTINEL, live

from needlepoint.analysis.document import build_document
from needlepoint.analysis.inputs import from_run
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.errors import NeedlepointError
from needlepoint.interop.export import TASK_NAME, export_inspect
from needlepoint.interop.inspect_import import IMPORT_NAME, check_request, import_inspect
from needlepoint.schema import to_plain

INSPECT = Path(sys.executable).parent / "inspect"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("interop")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


def answer_table(prepared_dir: Path) -> dict[str, str]:
    """Answers keyed by the frozen user text: mostly right, some wrong, some false UNKNOWN."""
    p = load_prepared(prepared_dir)
    table = {}
    for row in p.plan:
        key = p.answer_key[row.seq]
        text = json.loads(p.bodies[row.seq])["messages"][-1]["content"]
        answer = key["expected"]
        if row.condition == "M" and row.seq % 3 == 0 and key.get("near_codes"):
            answer = key["near_codes"][0]  # a wrong code, in the middle
        elif row.condition == "E" and row.seq % 5 == 0:
            answer = "UNKNOWN"
        table[text] = f"  {answer}\n"  # Java trim applies
    return table


def server(table: dict[str, str]) -> LoopbackServer:
    def answer(body: bytes, payload: dict[str, Any]) -> str:
        messages = payload.get("messages") or [{}]
        return table.get(messages[-1].get("content"), "??")

    return LoopbackServer(answer)


def inspect_eval(task: Path, base_url: str, log_dir: Path, *extra: str) -> Path:
    """Run the exported task with the real inspect CLI; return its one log."""
    env = dict(os.environ, LOOP_BASE_URL=base_url, LOOP_API_KEY=SENTINEL)
    env["INSPECT_LOG_DIR"] = str(log_dir)
    # inspect resolves a task file relative to its working directory (an absolute one fails)
    argv = [str(INSPECT), "eval", task.name, "--model", f"openai-api/loop/{MODEL}"]
    argv += ["-M", "max_retries=0", "--max-samples", "1", "--max-connections", "1"]
    argv += ["--no-fail-on-error", "--display", "none", "--log-dir", str(log_dir), *extra]
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=240, cwd=task.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    logs = sorted(log_dir.glob("*.eval"))
    assert len(logs) == 1, logs
    return logs[0]


def comparable(run_dir: Path) -> dict[str, Any]:
    """The analysis of a run less what names the run itself (source, host, dates, usage)."""
    doc = to_plain(build_document(from_run(run_dir)))
    for name in ("run", "context", "figures"):
        doc.pop(name, None)
    doc["secondary"].pop("latency_usage_cost", None)
    return doc


def test_inspect_round_trip_matches_a_native_run(
    prepared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = answer_table(prepared)
    code, out, err = run_cli(["export", "inspect", str(prepared), "--out", str(tmp_path / "t")])
    assert code == 0, err
    task = tmp_path / "t" / TASK_NAME
    with server(table) as srv:
        srv.script(["status:500"])  # the first request fails once: never wrong, never retried
        log = inspect_eval(task, srv.base_url, tmp_path / "logs")
        sent = srv.count
    assert sent == 32  # one request per frozen request, the failed one not retried
    imported = tmp_path / "imported"
    code, out, err = run_cli(
        ["import", "inspect", str(log), "--prepared", str(prepared), "--out", str(imported)]
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("source: inspect_ai 0.3.285 (log SHA-256 ")
    assert lines[1].startswith("verified: ") and any(
        x.startswith("not verifiable: ") for x in lines
    )
    record = json.loads((imported / "import.json").read_text(encoding="utf-8"))
    assert record["answered"] == 31 and record["errored"] == 1 and record["missing"] == 0
    assert not [d for d in record["deviations"] if "retried" in d or "model calls" in d]
    run = json.loads((imported / "run.json").read_text(encoding="utf-8"))
    assert run["extra"]["source"] == "inspect_ai 0.3.285" and run["extra"]["executed_elsewhere"]
    rows = (imported / "results.csv").read_text(encoding="utf-8")
    assert ",protocol_failure,http_status," in rows

    # The same answers, the same first failure, sent by needlepoint's own runner.
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    native = tmp_path / "native"
    with server(table) as srv:
        srv.script(["status:500"])
        live(prepared, native, srv, allow=32)
    assert comparable(imported) == comparable(native)
    summary = build_document(from_run(imported))
    assert summary.run.source == f"inspect_ai 0.3.285 log, imported ({IMPORT_NAME})"
    assert summary.run.unverified == (
        "executed by inspect_ai 0.3.285, not by needlepoint's runner; the request bytes and the "
        f"order were not controlled ({IMPORT_NAME} lists what was verified)"
    )

    assert run_cli(["audit-run", str(imported)])[0] == 0
    code, out, err = run_cli(
        ["analyze", str(imported), "--no-figures", "--out", str(tmp_path / "a")]
    )
    assert code == 0, err
    summary_md = (tmp_path / "a" / "summary.md").read_text(encoding="utf-8")
    assert "- source: inspect_ai 0.3.285 log, imported (import.json)" in summary_md
    assert "- verified: every request inspect logged carries exactly the frozen messages" in (
        summary_md
    )
    assert "- not verifiable: the exact request bytes on the wire" in summary_md
    native_decision = build_document(from_run(native)).primary.decision
    assert f": {native_decision.upper()}. " in summary_md
    code, out, err = run_cli(
        ["compare", str(native), str(imported), "--out", str(tmp_path / "cmp"), "--no-figures"]
    )
    assert code == 0, err
    code, out, err = run_cli(["analyze", str(native), str(imported), "--no-figures"])
    assert code == 2 and "one run" in err  # never pooled


def test_a_retried_sample_is_reported_as_a_deviation(prepared: Path, tmp_path: Path) -> None:
    export_inspect(prepared, tmp_path / "t")
    with server(answer_table(prepared)) as srv:
        srv.script(["status:500"])
        # inspect's own retry allowed (the task says 0): the import must say that it happened.
        log = inspect_eval(
            tmp_path / "t" / TASK_NAME, srv.base_url, tmp_path / "logs", "--max-retries", "1"
        )
        assert srv.count == 33
    record = import_inspect(log, prepared, tmp_path / "imported")
    retried = [d for d in record.deviations if d.startswith("seq 1: inspect retried")]
    assert retried and "Error code: 500" in retried[0]
    assert record.answered == 32 and record.errored == 0


def _frozen(prepared: Path) -> dict[str, Any]:
    return json.loads(load_prepared(prepared).bodies[1])


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda r: r["messages"][1].update(content=r["messages"][1]["content"] + " "), "message 1"),
        (lambda r: r["messages"].pop(), "messages sent"),
        (lambda r: r.update(temperature=0.7), "parameter temperature"),
        (lambda r: r.update(seed=1234), "parameter seed"),
        (lambda r: r.pop("max_tokens"), "parameter max_tokens"),
        (lambda r: r.update(temperature=False), "parameter temperature"),
    ],
)
def test_a_request_that_differs_from_the_frozen_body_is_refused(
    prepared: Path, change: Any, says: str
) -> None:
    frozen = _frozen(prepared)
    sent = json.loads(json.dumps(frozen)) | {"tools": None, "extra_headers": {"x-irid": "1"}}
    sent["temperature"] = 0.0  # inspect's float for the frozen 0: the same parameter
    check_request(sent, frozen, "1-x")
    change(sent)
    with pytest.raises(NeedlepointError, match=says):
        check_request(sent, frozen, "1-x")


def test_export_refuses_what_inspect_cannot_send_as_frozen(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (tmp_path / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    prepare(root, tmp_path / "small.json", body_profile="completion")
    code, _, err = run_cli(["export", "inspect", str(root), "--out", str(tmp_path / "t")])
    assert code == 2 and "only the chat profile" in err and len(err.splitlines()) == 1


def test_the_task_file_holds_every_frozen_request_verbatim(prepared: Path, tmp_path: Path) -> None:
    path = export_inspect(prepared, tmp_path / "t")
    source = path.read_text(encoding="utf-8")
    p = load_prepared(prepared)
    literal = source.split("FROZEN = json.loads(", 1)[1].split(")\n", 1)[0]
    import ast

    data = json.loads(ast.literal_eval(literal))
    assert data["config"] == {
        "max_tokens": 1024,
        "temperature": 0,
        "max_retries": 0,
        "max_connections": 1,
    }
    for sample, row in zip(data["samples"], p.plan, strict=True):
        body = json.loads(p.bodies[row.seq])
        assert sample["id"] == f"{row.seq}-{row.request_sha256}"
        assert [{"role": r, "content": t} for r, t in sample["messages"]] == body["messages"]
        assert sample["metadata"]["case"] == row.case
        assert sample["metadata"]["expected"] == p.answer_key[row.seq]["expected"]
    assert data["design_fingerprint"] in source.splitlines()[0]


def test_the_raw_response_decides_model_and_finish_reason(prepared: Path, tmp_path: Path) -> None:
    """The committed real log (tests/data/inspect/README.md): a 503, another model named by the
    server, a stop on length. Each is a protocol failure, never a wrong answer."""
    log = Path(__file__).resolve().parents[1] / "data" / "inspect" / "small-design.eval"
    record = import_inspect(log, prepared, tmp_path / "imported")
    assert (record.answered, record.errored, record.missing) == (31, 1, 0)
    rows = (tmp_path / "imported" / "results.csv").read_text(encoding="utf-8").splitlines()
    kinds = {int(r.split(",")[0]): r.split(",")[9:11] for r in rows[1:5]}
    assert kinds == {
        1: ["correct", ""],
        2: ["protocol_failure", "http_status"],
        3: ["protocol_failure", "model_mismatch"],
        4: ["protocol_failure", "finish_reason"],
    }
    # Three failures in a row: the runner's stop rule would have ended the run; inspect went on.
    stop = [d for d in record.deviations if "stop rule fired" in d]
    assert stop == [
        "audit-run: 29 x seq N sent after a stop rule fired (consecutive failures) "
        "(first at journal.jsonl:8)"
    ]
    md = (tmp_path / "imported" / "import.md").read_text(encoding="utf-8").splitlines()
    assert md[2].startswith("- source: inspect_ai 0.3.285") and md[3].startswith("- verified:")


def test_a_log_of_another_design_is_refused(tmp_path: Path) -> None:
    other = prepare(tmp_path / "v1")  # the reference design, not the log's
    log = Path(__file__).resolve().parents[1] / "data" / "inspect" / "small-design.eval"
    code, _, err = run_cli(
        ["import", "inspect", str(log), "--prepared", str(other), "--out", str(tmp_path / "o")]
    )
    assert code == 2 and "does not name this design" in err
    assert not (tmp_path / "o").exists()


def test_a_zip_bomb_sample_is_refused_before_inspect_unpacks_it(
    prepared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zipfile

    from needlepoint.interop import inspect_log

    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 1 << 20)  # the rule, at a small size
    bomb = tmp_path / "bomb.eval"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("header.json", b"{}")
        with out.open("samples/99_epoch_1.json", "w") as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(2):
                fh.write(chunk)
    code, _, err = run_cli(
        ["import", "inspect", str(bomb), "--prepared", str(prepared), "--out", str(tmp_path / "o")]
    )
    assert code == 2 and "unpacks to" in err and len(err.splitlines()) == 1
