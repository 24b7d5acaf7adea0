"""The local live pipeline refuses bad input in one line before starting anything."""

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
