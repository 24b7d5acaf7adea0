"""Gemma 3 270M: a GGUF assembled from chunk packages, served as a base model via /v1/completions.

Tests marked ``live`` start the real llama-cpp-python server on the assembled GGUF. Without the
``local`` extra or the Gemma packages they skip with a reason that `pytest -ra` prints.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.local import model as localmodel
from needlepoint.local import server as localserver
from needlepoint.local.model import GEMMA3, Chunk, PackagedModel

ROOT = Path(__file__).resolve().parents[2]


def _missing() -> str | None:
    try:
        localmodel.locate_server()
        localmodel.locate_model(GEMMA3)
    except NeedlepointError as exc:
        return str(exc)
    return None


MISSING = _missing()
live = pytest.mark.skipif(
    MISSING is not None, reason="Gemma packages or local extra not installed (make local)"
)


# --- assembly, with fake chunk packages --------------------------------------------------------


@pytest.fixture
def chunked(tmp_path, monkeypatch) -> tuple[PackagedModel, bytes]:
    """Three chunk packages and a checksum package on sys.path, 'installed' as distributions."""
    pieces = [b"GGUF" + bytes(range(200)), b"\x00" * 1000, b"tail-bytes"]
    whole = b"".join(pieces)
    chunks = []
    for i, piece in enumerate(pieces):
        package = tmp_path / f"np_fake_chunk{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise ImportError('never executed')\n")
        (package / "data" / f"m.gguf.part{i:02d}").write_bytes(piece)
        chunks.append(Chunk(f"np-fake-chunk{i}", package.name, f"data/m.gguf.part{i:02d}"))
    meta = tmp_path / "np_fake_meta"
    (meta / "data").mkdir(parents=True)
    (meta / "__init__.py").write_text("raise ImportError('never executed')\n")
    sums = f"{hashlib.sha256(whole).hexdigest()}  m.gguf\n"
    (meta / "data" / "SHA256SUMS").write_text(sums)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(localmodel, "version_of", lambda name: "1.0")
    monkeypatch.setattr(localmodel, "assembled_path", lambda m: tmp_path / "out" / m.filename)
    spec = PackagedModel(
        "fake", "np-fake-meta", meta.name, "m.gguf", "fake-alias", 512, tuple(chunks),
        "data/SHA256SUMS", True,
    )  # fmt: skip
    return spec, whole


def test_chunks_are_concatenated_in_order_and_checked(chunked):
    spec, whole = chunked
    path = localmodel.locate_model(spec)
    assert path.read_bytes() == whole
    assert localmodel.declared_sha256(spec) == hashlib.sha256(whole).hexdigest()
    mtime = path.stat().st_mtime_ns
    assert localmodel.locate_model(spec) == path and path.stat().st_mtime_ns == mtime  # reused
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.gguf"]  # no temporary left


def test_a_corrupt_assembled_file_is_replaced(chunked):
    spec, whole = chunked
    path = localmodel.assembled_path(spec)
    path.parent.mkdir(parents=True)
    path.write_bytes(whole[:-1] + b"X")
    assert localmodel.locate_model(spec).read_bytes() == whole


def test_a_wrong_stated_checksum_is_one_line_and_leaves_nothing(chunked, tmp_path):
    spec, _ = chunked
    (tmp_path / "np_fake_meta" / "data" / "SHA256SUMS").write_text("0" * 64 + "  m.gguf\n")
    with pytest.raises(NeedlepointError, match=r"^np-fake-meta: the assembled m\.gguf has SHA-256"):
        localmodel.locate_model(spec)
    assert not any((tmp_path / "out").iterdir())


def test_a_missing_chunk_package_names_it_and_the_install_command(chunked, monkeypatch):
    spec, _ = chunked
    monkeypatch.setattr(
        localmodel, "version_of", lambda name: None if name == "np-fake-chunk1" else "1.0"
    )
    with pytest.raises(NeedlepointError) as info:
        localmodel.locate_model(spec)
    message = str(info.value)
    assert message.startswith("np-fake-chunk1 is not installed (it ships part of m.gguf)")
    assert localmodel.INSTALL_COMMAND in message and "\n" not in message


def test_gemma_is_a_known_base_model_pinned_and_installed_by_make():
    assert localmodel.model_spec("gemma3") is GEMMA3 is localmodel.model_spec(GEMMA3.alias)
    assert GEMMA3.base and GEMMA3.window == 32768 and len(GEMMA3.chunks) == 4
    constraints = (ROOT / "constraints.txt").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for name in (GEMMA3.distribution, *(c.distribution for c in GEMMA3.chunks)):
        assert f"{name}==1.0.0" in constraints
        assert name in makefile and name in localmodel.INSTALL_COMMAND


def test_committed_gemma_protocol_is_a_completion_variant_with_a_chat_twin(tmp_path):
    from needlepoint.design.prepared import load_protocol
    from needlepoint.design.protocol import design_fingerprint

    path = ROOT / "protocols" / "local-gemma3.json"
    gemma = load_protocol(path)
    assert gemma["model"] == GEMMA3.alias and gemma["body_profile"] == "completion"
    assert gemma["stop"] == ["\n"] and gemma["answer_cue"] == ""
    assert "description" in json.loads(path.read_text(encoding="utf-8"))
    smol = load_protocol(path, model=localmodel.SMOLLM2.alias, body_profile="chat")
    assert design_fingerprint(smol) == design_fingerprint(gemma)
    assert "answer_cue" not in smol and smol["stop"] == ["\n"]


# --- the real server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("gemma") / "server.log"
    with localserver.served_model(GEMMA3, n_ctx=2048, log_path=log) as running:
        yield running
    with pytest.raises(ProcessLookupError):
        os.kill(running.pid, 0)


@live
def test_facts_name_the_assembled_gguf(server):
    facts = localserver.server_facts(server)
    assert facts["models_response"]["data"][0]["id"] == GEMMA3.alias
    assert facts["gguf"]["file"] == GEMMA3.filename
    assert facts["gguf"]["matches_wheel_record"] is True
    assert [c["package"] for c in facts["gguf"]["assembled_from"]] == [
        c.distribution for c in GEMMA3.chunks
    ]


@live
def test_completions_honour_stop(server):
    import httpx

    prompt = "Records:\nName: Alpha, code: AB-1234\nName: Beta, code: CD-5678\n\nName: Beta, code:"
    body = {"model": server.alias, "prompt": prompt, "max_tokens": 16, "temperature": 0}
    answer = httpx.post(
        server.base_url + "/v1/completions", json=body | {"stop": ["\n"]}, timeout=120
    )
    assert answer.status_code == 200, answer.text
    data = answer.json()
    choice = data["choices"][0]
    assert data["object"] == "text_completion" and data["model"] == server.alias
    assert choice["finish_reason"] == "stop" and "\n" not in choice["text"]
    assert isinstance(data["usage"]["prompt_tokens"], int)


@live
def test_completion_variant_runs_end_to_end(server, tmp_path, monkeypatch):
    from needlepoint.design.prepared import prepare
    from needlepoint.local.server import check_token_counts
    from needlepoint.run.audit import audit_run
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    # The committed copy-style design, small: v1's Chinese instructions and the default answer
    # cue make this base model start with a line feed, which the stop sequence turns into "".
    override = json.loads((ROOT / "protocols" / "local-gemma3.json").read_text(encoding="utf-8"))
    override |= {"version": 904, "cases": 4, "lengths": [12]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(override))
    prepared = prepare(tmp_path / "g", path)
    report = check_token_counts(prepared, server)
    assert max(report.counts.values()) < 1000
    monkeypatch.setenv("NP_GEMMA_KEY", "local-key-not-checked")
    options = RunOptions(
        allow=4, base_url=server.base_url + "/v1", model=GEMMA3.alias,
        api_key_env="NP_GEMMA_KEY", min_gap_s=0, override_reason="test", progress="off",
        timeout_s=300,
    )  # fmt: skip
    summary = run_protocol(prepared, tmp_path / "run", options)
    assert summary.attempts_total == 4
    outcomes = [
        json.loads(line) for line in (tmp_path / "run" / "journal.jsonl").read_text().splitlines()
    ]
    answers = [o for o in outcomes if o["type"] == "outcome"]
    assert {o["classification"]["status"] for o in answers} <= {"correct", "error"}
    assert {json.loads(o["body"])["object"] for o in answers} == {"text_completion"}
    assert audit_run(tmp_path / "run").ok
