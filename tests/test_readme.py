"""The README: under 200 lines, every command in it run (here, or by CI), its links alive, and
the headline it quotes still the headline of the summary it names.

CI runs `make test` (`.ci/run`). This file runs `make run` itself, and every `needlepoint`
line of the README against a loopback server standing in for "your endpoint": a command that
stops working, or a new command without a way to run it here, fails by name.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.loopback import LoopbackServer, answers_from

from needlepoint.cli.app import main
from needlepoint.design.prepared import load_prepared, prepare

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")
# "your endpoint" in the README, and the loopback server that stands in for it here
EXAMPLE_URL = "http://127.0.0.1:8000/v1"
MAKE = {"make run": "run below", "make test": "CI: .ci/run runs `make test`"}


def commands() -> list[str]:
    """Every command line of the README's ``sh`` blocks, comments and blank lines left out."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len(README.splitlines()) < 200


def test_every_command_is_make_or_needlepoint() -> None:
    found = commands()
    assert [c for c in found if c.startswith("make ")] == list(MAKE)
    others = [c for c in found if not c.startswith(("make ", "needlepoint ", "export "))]
    assert others == [], "a README command this file does not know how to run"
    make = (ROOT / "Makefile").read_text("utf-8")
    assert "make test" in (ROOT / ".ci" / "run").read_text("utf-8")
    assert re.search(r"^run: setup\n\t@\$\(BIN\)/needlepoint pipeline", make, flags=re.M)


def test_every_link_and_image_resolves() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert len(targets) >= 12
    for target in targets:
        assert (ROOT / target).exists(), target


def test_the_quoted_headline_is_the_summary_s() -> None:
    block = re.search(r"<!-- headline: (\S+) -->\n(.*?)<!-- end headline -->", README, re.S)
    assert block, "the README quotes the headline of a live result"
    summary = (ROOT / block.group(1)).read_text("utf-8").splitlines()
    quoted = [line.removeprefix("> ") for line in block.group(2).splitlines()]
    assert len(quoted) >= 3
    for line in quoted:
        assert line in summary, f"not in {block.group(1)}: {line}"
    assert "(SIMULATION" not in block.group(2)


def test_make_run_runs_the_offline_pipeline() -> None:
    """`make run`, as a new user types it (the venv is already set up by then)."""
    before = set((ROOT / "runs").glob("*")) if (ROOT / "runs").exists() else set()
    done = subprocess.run(
        ["make", "-s", "run"], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    made = sorted(set((ROOT / "runs").glob("*")) - before)
    try:
        assert done.returncode == 0, done.stderr[-2000:]
        lines = done.stdout.splitlines()
        assert lines[0].startswith("[1/9] 01-design ok (") and "[9/9] 09-depth ok (" in lines[8]
        assert lines[-2].startswith("decision (SIMULATION — not a model result): ")
        assert len(made) == 1 and (made[0] / "analysis" / "summary.md").is_file()
    finally:
        for folder in made:
            shutil.rmtree(folder)


def test_every_needlepoint_command_runs_against_a_stand_in_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [c for c in commands() if not c.startswith("make ")]
    assert any(" pipeline " in f" {c} " for c in lines)
    # the README's model, answered correctly by a server that serves it under that name
    model = re.search(r"-p model (\S+)", " ".join(lines)).group(1)
    p = load_prepared(prepare(tmp_path / "expected", model=model))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "evidence").symlink_to(ROOT / "evidence")
    monkeypatch.chdir(tmp_path / "work")
    with LoopbackServer(answers_from(p.answer_key, p.bodies), models=[model]) as server:
        for line in lines:
            line = line.replace(EXAMPLE_URL, server.base_url)
            if line.startswith("export "):
                name, _, _ = line.removeprefix("export ").partition("=")
                monkeypatch.setenv(name, "sk-readme-stand-in-key")
                continue
            argv = shlex.split(line)[1:]
            assert main(argv) == 0, f"{line}\n{capsys.readouterr().err}"
        sent = [r.path for r in server.requests]
    # check-endpoint's one GET, then the pipeline's 128 requests; nothing else sent anything
    assert sent == ["/v1/models"] + ["/v1/chat/completions"] * 128
    out = capsys.readouterr().out
    assert "check-endpoint OK" in out and "07-compare skipped: " in out
    assert (tmp_path / "work" / "my-grid" / "grid.png").is_file()
    assert os.environ.get("MY_KEY") == "sk-readme-stand-in-key"
