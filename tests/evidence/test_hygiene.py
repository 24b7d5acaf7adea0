"""Committed evidence carries no machine path, host name or secret, and notebooks no outputs."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"
TEXT_SUFFIXES = {".ipynb", ".html", ".json", ".jsonl", ".md", ".csv"}
FILES = sorted(p for p in EVIDENCE.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
SECRET = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|Bearer [A-Za-z0-9._-]{8,}|api[_-]?key\"?\s*[:=]\s*\"[^\"]{8,})"
)


def _forbidden() -> list[str]:
    words = [str(ROOT), str(Path.home()) + "/", "/tmp/", "/work/"]
    host = socket.gethostname()
    if len(host) >= 6:  # a short host name would match ordinary words
        words.append(host)
    return words


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(EVIDENCE)))
def test_no_machine_path_host_or_secret(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for word in _forbidden():
        assert word not in text, f"{path.relative_to(ROOT)} contains {word!r}"
    assert not SECRET.search(text), f"{path.relative_to(ROOT)} looks like it holds a secret"


def test_evidence_run_records_are_relative() -> None:
    for run_json in sorted(EVIDENCE.rglob("run.json")):
        record = json.loads(run_json.read_text(encoding="utf-8"))
        assert not Path(record["prepared_dir"]).is_absolute(), run_json


def test_there_is_reference_evidence() -> None:
    assert len(FILES) > 20
