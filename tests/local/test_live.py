"""local-pilot and local-run refuse bad input with one line, before any server starts.

The local live pipeline refuses bad input in one line before starting anything.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from needlepoint.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_missing_protocol_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "local-pipeline",
            "--label",
            "x",
            "--protocol",
            str(tmp_path / "nope.json"),
            "--evidence-root",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "protocol file not found" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is not None,
    reason="llama-cpp-python is installed: the refusal for a missing server cannot be shown",
)
def test_missing_server_package_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "local-pipeline",
            "--label",
            "x",
            "--protocol",
            str(ROOT / "protocols" / "local-smollm2.json"),
            "--evidence-root",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "llama-cpp-python" in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_local_protocol_is_the_reference_design_for_the_served_model() -> None:
    override = json.loads((ROOT / "protocols" / "local-smollm2.json").read_text())
    assert override["version"] != 1 and override["model"] == "smollm2-135m-instruct-q4_1"
    changed = set(override) - {
        "version",
        "description",
        "model",
        "lengths",
        "max_tokens",
        "runner",
        "templates",
    }
    assert not changed, f"the local instance must keep the design: {changed}"


EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "serving" not in captured.out and "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_local_pilot_checks_its_input_first(tmp_path: Path, capsys) -> None:
    base = ["local-pilot", "--out", str(tmp_path / "p"), "--allow", "8", "--model", "nope"]
    missing = [*base, "--protocol", str(tmp_path / "x.json"), "--lengths", "12", "--cases", "4"]
    assert "file not found" in _one_line(missing, capsys)
    (tmp_path / "d.json").write_text('{"version": 9}')
    shape = [*base, "--protocol", str(tmp_path / "d.json"), "--lengths", "12", "--cases", "3"]
    assert "multiple of the 4 orders" in _one_line(shape, capsys)
    lengths = [*base, "--protocol", str(tmp_path / "d.json"), "--lengths", "6", "--cases", "4"]
    assert "at least 12 records" in _one_line(lengths, capsys)
    assert not (tmp_path / "p").exists()


def test_local_run_checks_the_prepared_folder_first(tmp_path: Path, capsys) -> None:
    argv = ["local-run", str(tmp_path / "none"), "--run-dir", str(tmp_path / "r"), "--allow", "8"]
    assert "none" in _one_line([*argv, "--model", "nope"], capsys)
    assert not (tmp_path / "r").exists()


def test_a_resumed_local_run_is_served_on_its_recorded_port(tmp_path: Path) -> None:
    # The runner refuses to pool sessions with another base_url, so a local run can only be
    # resumed if the server comes back on the port its run.json names.
    from needlepoint.local.live import resume_port

    assert resume_port(tmp_path / "new") is None
    committed = json.loads((EVIDENCE / "20261130-local-smollm2/run/run.json").read_text())
    for base_url, port in (
        ("http://127.0.0.1:54079/v1", 54079),
        ("https://api.example.org/v1", None),
        (None, None),
    ):
        (tmp_path / "run.json").write_text(json.dumps({**committed, "base_url": base_url}))
        assert resume_port(tmp_path) == port


def test_local_pilot_passes_the_record_check_and_the_token_check_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The served model's token check goes to ``before_run`` and the caller's version check to
    ``check``: the first live pilot of the declared study failed when one shadowed the other."""
    from contextlib import contextmanager

    from needlepoint.local import live

    seen: dict[str, object] = {}

    def token_check(prepared: Path) -> None:
        raise AssertionError("not called by the spy")

    def version_check(protocol: dict) -> None:
        raise AssertionError("not called by the spy")

    @contextmanager
    def fake_served(*args: object, **kwargs: object):
        yield "options", token_check

    def spy(*args: object, **kwargs: object) -> str:
        seen.update(kwargs, options=args[4])
        return "result"

    monkeypatch.setattr(live, "_served", fake_served)
    monkeypatch.setattr(live, "run_pilot", spy)
    protocol = Path(__file__).parents[2] / "protocols" / "local-gemma3.json"
    result = live.run_local_pilot(
        protocol, tmp_path / "p", (12,), 4, live.Serving(allow=8), version=30, check=version_check
    )
    assert result == "result" and seen["options"] == "options"
    assert seen["before_run"] is token_check and seen["check"] is version_check
    assert seen["version"] == 30
