"""Resume after the runner process is killed with SIGKILL in the middle of a request."""

from __future__ import annotations

import os
import subprocess
import sys

from support.runner import KEY_ENV, MODEL, SENTINEL, kinds, of_type, records, server_for

from needlepoint.jsonio import sha256_hex
from needlepoint.run.audit import audit_run
from needlepoint.run.results import derive


def cli_run(prepared, run, url, allow):
    args = [sys.executable, "-m", "needlepoint", "run", str(prepared), "--allow", str(allow)]
    args += ["--run-dir", str(run), "--base-url", url, "--model", MODEL]
    args += ["--api-key-env", KEY_ENV, "--min-gap-s", "0", "--override-reason", "loopback test"]
    args += ["--timeout-s", "30", "--no-progress"]
    env = {**os.environ, KEY_ENV: SENTINEL}
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_sigkill_mid_request_then_resume(reference_dir, tmp_path):
    run = tmp_path / "run"
    with server_for(reference_dir) as server:
        server.script(["normal", "normal", "hang:60"])
        proc = cli_run(reference_dir, run, server.base_url, 10)
        assert server.wait_for(3, timeout=60), proc.communicate()
        proc.kill()  # SIGKILL: no handler, no cleanup, mid-request
        out, err = proc.communicate()
        assert proc.returncode == -9

        # The attempt was journalled before the request left; its outcome never was.
        last = records(run)[-1]
        assert (last["type"], last["seq"]) == ("attempt", 3)
        rows = derive(run).rows
        assert [r["status"] for r in rows[:4]] == [
            "correct",
            "correct",
            "protocol_failure",
            "unexecuted",
        ]
        assert rows[2]["kind"] == "indeterminate_interrupted"
        first = audit_run(run)
        assert first.ok and any("seq 3 has no outcome" in w for w in first.warnings)

        proc = cli_run(reference_dir, run, server.base_url, 10)
        out2, err2 = proc.communicate(timeout=60)
        assert proc.returncode == 0, err2.decode()
        assert b"allowance_spent" in out2

        # Seq 3 was never sent again; the allowance counted it.
        sent = [r.sha256 for r in server.requests]
        assert len(sent) == 10 and len(set(sent)) == 10
        assert [a["seq"] for a in of_type(run, "attempt")] == list(range(1, 11))
        recovered = [r for r in of_type(run, "outcome") if r["recovered"]]
        assert [r["seq"] for r in recovered] == [3]
        assert kinds(run)[2] == (3, "protocol_failure", "indeterminate_interrupted")
        final = audit_run(run)
        assert final.ok and not final.warnings, final.lines()
        for blob in (out, err, out2, err2):
            assert SENTINEL.encode() not in blob


def test_torn_last_line_is_dropped_and_recorded(reference_dir, tmp_path, monkeypatch):
    from support.runner import live

    run = tmp_path / "run"
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    with server_for(reference_dir) as server:
        live(reference_dir, run, server, allow=1)
        with open(run / "journal.jsonl", "ab") as fh:
            fh.write(b'{"format":1,"n":4,"type":"att')
        live(reference_dir, run, server, allow=2)
    session = of_type(run, "session")[1]
    assert session["dropped_tail_sha256"] == sha256_hex(b'{"format":1,"n":4,"type":"att')
    assert audit_run(run).ok
