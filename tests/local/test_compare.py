"""`needlepoint local-compare`: one-line refusals, and the whole plumbing against loopback servers.

The packaged models are replaced by loopback servers (``compare.serve``, ``facts_of`` and
``token_check`` are the seams), so these tests need neither llama.cpp nor the GGUFs; the real
comparison is the committed evidence, re-derived in ``tests/evidence/test_local_compare.py``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.loopback import LoopbackServer, answers_from

from needlepoint.cli import main
from needlepoint.design.prepared import load_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.local import compare
from needlepoint.local.compare import MARKER, Layout, evidence_folder
from needlepoint.local.model import model_spec
from needlepoint.run import runner as run_session
from needlepoint.run.audit import audit_run

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "protocols" / "local-compare.json"
DATE = "20261201"


@dataclass(frozen=True)
class FakeServer:
    base_url: str
    alias: str
    n_ctx: int
    port: int


class Loopbacks:
    """Stands in for the packaged models: one loopback server per `serve`, on the asked port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.served: list[tuple[str, int | None]] = []
        self.checked: list[tuple[str, int]] = []  # (model, requests received before the check)
        self.current: LoopbackServer | None = None
        self.failures: dict[str, int] = {}  # model -> HTTP 500 answers before normal ones
        self.stop_status: dict[str, int] = {}  # model -> one answer with this status after them

    @contextlib.contextmanager
    def serve(self, key: str, n_ctx: int, port: int | None, log_path: Path) -> Iterator[Any]:
        self.served.append((key, port))
        p = load_prepared(Layout(self.folder).root / "prepared" / key)
        # Gemma answers every request correctly; SmolLM2 always says UNKNOWN.
        answer = answers_from(p.answer_key, p.bodies) if key == "gemma3" else None
        with LoopbackServer(answer, port=port or 0) as server:
            stop = [f"status:{self.stop_status.pop(key)}"] if key in self.stop_status else []
            server.script(["status:500"] * self.failures.pop(key, 0) + stop)
            self.current = server
            base = server.base_url.removesuffix("/v1")
            yield FakeServer(base, model_spec(key).alias, n_ctx, int(base.rsplit(":", 1)[1]))

    def facts(self, server: FakeServer) -> dict[str, Any]:
        return {"format": 1, "model_alias": server.alias, "n_ctx": server.n_ctx,
                "gguf": {"sha256": f"sha-of-{server.alias}"}}  # fmt: skip

    def token_check(self, prepared_dir: Path, server: FakeServer) -> Any:
        assert self.current is not None
        self.checked.append((prepared_dir.name, self.current.count))
        return FakeReport(f"{prepared_dir.name}: all requests fit")

    def timed_timeout(
        self, prepared_dir: Path, server: FakeServer, report: Any, floor_s: float
    ) -> dict[str, Any]:
        from needlepoint.local.server import local_timeout

        return local_timeout(floor_s, {"seq": 1, "prompt_tokens": 300, "seconds": 100.2})


@dataclass(frozen=True)
class FakeReport:
    line: str

    def summary_line(self) -> str:
        return self.line


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Loopbacks:
    loop = Loopbacks(tmp_path / f"{DATE}-cmp")
    monkeypatch.setattr(compare, "serve", loop.serve)
    monkeypatch.setattr(compare, "facts_of", loop.facts)
    monkeypatch.setattr(compare, "token_check", loop.token_check)
    monkeypatch.setattr(compare, "timed_timeout", loop.timed_timeout)
    monkeypatch.setenv(compare.KEY_ENV, "loopback-needs-no-key")
    return loop


def _cli(tmp_path: Path, *extra: str) -> int:
    return main(
        ["local-compare", "--label", "cmp", "--date", DATE, "--protocol", str(PROTOCOL),
         "--evidence-root", str(tmp_path), "--no-notebooks", "--no-progress", *extra]
    )  # fmt: skip


def _one_line_refusal(capsys: pytest.CaptureFixture[str], code: int, words: str) -> None:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert words in err and len(err.splitlines()) == 1, err


# --- refusals, before anything is served ---------------------------------------------------------


def test_missing_protocol(tmp_path, capsys, fakes):
    code = main(["local-compare", "--label", "cmp", "--protocol", str(tmp_path / "no.json"),
                 "--evidence-root", str(tmp_path)])  # fmt: skip
    _one_line_refusal(capsys, code, "protocol file not found")
    assert not fakes.served and not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--label", "Bad Label"], "lower-case"), (["--label", "ok", "--date", "1 Dec"], "YYYYMMDD")],
)
def test_bad_label_or_date(tmp_path, capsys, fakes, args, words):
    code = main(["local-compare", *args, "--protocol", str(PROTOCOL), "--evidence-root",
                 str(tmp_path)])  # fmt: skip
    _one_line_refusal(capsys, code, words)
    assert not fakes.served


def test_refuses_a_folder_it_did_not_make(tmp_path, capsys, fakes):
    (tmp_path / f"{DATE}-cmp").mkdir()
    (tmp_path / f"{DATE}-cmp" / "notes.txt").write_text("someone else's")
    _one_line_refusal(capsys, _cli(tmp_path), f"has no {MARKER}")
    assert not fakes.served


def test_refuses_to_resume_with_other_settings(tmp_path, capsys, fakes, monkeypatch):
    monkeypatch.setattr(compare, "run_live", lambda *a: None)
    monkeypatch.setattr(compare, "finish", lambda *a: None)
    assert _cli(tmp_path) == 0
    capsys.readouterr()
    _one_line_refusal(capsys, _cli(tmp_path, "--n-ctx", "2048"), "made with n_ctx 4096")


def test_refuses_a_prepared_folder_from_another_protocol(tmp_path, capsys, fakes):
    from needlepoint.design.prepared import prepare

    folder = tmp_path / f"{DATE}-cmp"
    compare.check_marker(Layout(folder), PROTOCOL, compare.DEFAULT_ENTRANTS, 4096)
    prepare(folder / "prepared" / "gemma3")  # the reference design, not the local protocol
    _one_line_refusal(capsys, _cli(tmp_path), "prepared from another protocol")
    assert not fakes.served


def test_without_a_date_the_labels_one_folder_is_resumed(tmp_path):
    (tmp_path / "20261130-cmp").mkdir()
    assert evidence_folder(tmp_path, "cmp", None) == tmp_path / "20261130-cmp"
    (tmp_path / "20261201-cmp").mkdir()
    with pytest.raises(NeedlepointError, match="several folders"):
        evidence_folder(tmp_path, "cmp", None)


def test_resume_refuses_other_weights_or_window():
    record = SimpleNamespace(extra={"local_server": {"gguf": {"sha256": "aaa"}, "n_ctx": 4096}})
    compare.check_same_server(record, {"gguf": {"sha256": "aaa"}, "n_ctx": 4096})
    compare.check_same_server(None, {"gguf": {"sha256": "bbb"}, "n_ctx": 1})  # a new run
    with pytest.raises(NeedlepointError, match="GGUF sha256 'aaa'"):
        compare.check_same_server(record, {"gguf": {"sha256": "bbb"}, "n_ctx": 4096})
    with pytest.raises(NeedlepointError, match="n_ctx 4096"):
        compare.check_same_server(record, {"gguf": {"sha256": "aaa"}, "n_ctx": 2048})


def test_resume_refuses_a_busy_recorded_port():
    with LoopbackServer() as busy:
        port = int(busy.base_url.removesuffix("/v1").rsplit(":", 1)[1])
        with pytest.raises(NeedlepointError, match=f"port {port}"):
            compare.resume_port(SimpleNamespace(base_url=f"http://127.0.0.1:{port}/v1"))


# --- the whole command against loopback servers --------------------------------------------------


def test_two_variants_run_complete_audited_and_compared(tmp_path, capsys, fakes):
    assert _cli(tmp_path) == 0, capsys.readouterr().err
    folder = Layout(tmp_path / f"{DATE}-cmp")
    # One model at a time, each token-checked before its first request.
    assert [key for key, _ in fakes.served] == ["gemma3", "smollm2"]
    assert fakes.checked == [("gemma3", 0), ("smollm2", 0)]
    manifests = [
        json.loads((folder.root / "prepared" / k / "manifest.json").read_text())
        for k in ("gemma3", "smollm2")
    ]
    assert manifests[0]["design_fingerprint"] == manifests[1]["design_fingerprint"]
    doc = json.loads((folder.comparison / "comparison.json").read_text())
    assert [(r["model"], r["body_profile"]) for r in doc["runs"]] == [
        ("gemma3-270m-q4_k_m", "completion"),
        ("smollm2-135m-instruct-q4_1", "chat"),
    ]
    for key in ("gemma3", "smollm2"):
        run_dir = folder.root / "runs" / key
        assert audit_run(run_dir).ok
        record = json.loads((run_dir / "run.json").read_text())
        assert record["min_gap_s"] == 0 and "no shared rate limit" in record["override_reason"]
        assert record["extra"]["local_server"]["gguf"]["sha256"].startswith("sha-of-")
        assert record["prepared_dir"] == f"../../prepared/{key}"
        assert (folder.root / "analysis" / key / "analysis.json").is_file()
    present = {r["model"]: r["scores"][0] for r in doc["runs"]}
    assert present["gemma3-270m-q4_k_m"]["correct"] == 48  # every answer-present request
    assert present["smollm2-135m-instruct-q4_1"]["correct"] == 0
    readme = (folder.root / "README.md").read_text()
    assert "| `runs/gemma3` | `gemma3-270m-q4_k_m` | completion |" in readme
    assert "07-compare.ipynb" not in readme  # no notebooks were run
    assert str(tmp_path) not in readme


def test_ctrl_c_mid_run_then_running_again_resumes(tmp_path, capsys, fakes, monkeypatch):
    real_one = run_session.Session.one
    sent = {"n": 0}

    def one(self, transport, seq, sha):  # Ctrl-C arrives during SmolLM2's 10th request
        if self.s.model.startswith("smollm2"):
            sent["n"] += 1
            if sent["n"] == 10:
                raise KeyboardInterrupt
        return real_one(self, transport, seq, sha)

    monkeypatch.setattr(run_session.Session, "one", one)
    assert _cli(tmp_path) == 130
    err = capsys.readouterr().err
    assert "Resume with: needlepoint local-compare --label cmp" in err
    run_dir = tmp_path / f"{DATE}-cmp" / "runs" / "smollm2"
    first_port = fakes.served[-1][1]
    assert compare.attempted(run_dir) == 9 and audit_run(run_dir).ok
    assert not (tmp_path / f"{DATE}-cmp" / "comparison").exists()

    assert _cli(tmp_path) == 0, capsys.readouterr().err
    # Gemma was complete and not served again; SmolLM2 resumed at its recorded address.
    assert [key for key, _ in fakes.served] == ["gemma3", "smollm2", "smollm2"]
    assert first_port is None and fakes.served[-1][1] is not None
    assert compare.attempted(run_dir) == 64 and audit_run(run_dir).ok
    journal = [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]
    seqs = [r["seq"] for r in journal if r["type"] == "attempt"]
    assert len(seqs) == len(set(seqs)) == 64  # nothing sent twice
    assert sum(r["type"] == "session" for r in journal) == 2


def test_a_stop_rule_is_exit_3_and_running_again_completes(tmp_path, capsys, fakes):
    fakes.failures["smollm2"] = 1  # HTTP 500 first: a protocol failure, which does not stop
    fakes.stop_status["smollm2"] = 429  # then 429, which stops a run under every protocol
    assert _cli(tmp_path) == 3
    err = capsys.readouterr().err.strip()
    assert "stop_status" in err and "run the command again to resume" in err
    run_dir = tmp_path / f"{DATE}-cmp" / "runs" / "smollm2"
    assert compare.attempted(run_dir) == 2 and audit_run(run_dir).ok
    assert not (tmp_path / f"{DATE}-cmp" / "comparison").exists()
    assert _cli(tmp_path) == 0
    assert compare.attempted(run_dir) == 64 and audit_run(run_dir).ok


def test_the_consecutive_failure_rule_never_ends_a_run_of_this_design(tmp_path, capsys, fakes):
    # v5 sets the rule to the number of planned requests: a model that fails all but the last
    # request is still run completely, and its failures are what the comparison reports.
    rule = json.loads(PROTOCOL.read_text(encoding="utf-8"))["runner"]["max_consecutive_failures"]
    fakes.failures["smollm2"] = rule - 1
    assert _cli(tmp_path) == 0, capsys.readouterr().err
    folder = Layout(tmp_path / f"{DATE}-cmp")
    run_dir = folder.root / "runs" / "smollm2"
    planned = len(load_prepared(folder.root / "prepared" / "smollm2").plan)
    assert rule == planned == 64
    assert compare.attempted(run_dir) == planned and audit_run(run_dir).ok
    journal = [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]
    statuses = [r["classification"]["status"] for r in journal if r["type"] == "outcome"]
    assert statuses.count("protocol_failure") == rule - 1


def test_notebooks_get_only_declared_parameters_and_relative_paths(tmp_path):
    from needlepoint.local.compare import notebook_plan
    from needlepoint.notebook.pipeline import plan_parameters

    layout = Layout(tmp_path / "evidence" / f"{DATE}-cmp")
    plan = notebook_plan(layout, compare.DEFAULT_ENTRANTS, PROTOCOL)
    assert [name for _, name, _ in plan] == [
        "01-design",
        "04-analysis-gemma3",
        "04-analysis-smollm2",
        "07-compare",
    ]
    for source, _, params in plan:
        plan_parameters([ROOT / "notebooks" / f"{source}.ipynb"], params)  # refuses unknown names
        paths = [v for v in params.values() if isinstance(v, str)]
        assert paths and not any(Path(p).is_absolute() for p in paths), params
    assert plan[-1][2]["run_dirs"] == ["runs/gemma3", "runs/smollm2"]
    assert plan[-1][2]["simulated"] is None  # the live runs are compared, nothing simulated
