"""Hostile numbers, times, URLs and files, third round: refused in one line (exit 2), never the
last-resort guard (exit 70), never a block, and nothing written before the refusal.

Each test names the issue-39 class it guards.
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from pathlib import Path

import pytest
from support.contamination import context_file, reference, result, results, runs
from support.fuzz import SMALL, bad_outcome, run_cli


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A prepared folder and the results.csv of a faulty simulated run of it."""
    root = tmp_path_factory.mktemp("ranges")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    assert (
        run_cli(["prepare", "--out", str(root / "p"), "--protocol", str(root / "small.json")])[0]
        == 0
    )
    argv = ["run", str(root / "p"), "--allow", "32", "--run-dir", str(root / "run")]
    argv += ["--simulate", "position", "--input-rate", "1", "--output-rate", "2", "--no-progress"]
    assert run_cli(argv)[0] == 0
    assert run_cli(["results", str(root / "run")])[0] == 0
    return root / "p", root / "run" / "results.csv"


def _refused(argv: list[str]) -> str:
    code, out, err = run_cli(argv)
    assert bad_outcome(argv, code, out, err) is None, (code, err)
    assert code == 2 and len(err.splitlines()) == 1, (code, out, err)
    return err


# Class 9: numbers of a results table past any sane range, before any arithmetic.
@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("latency_s", "1e308", "above its limit"),
        ("cost", "1e308", "above its limit"),
        ("cost", "1.7976931348623157e308", "above its limit"),
        ("prompt_tokens", "9" * 4000, "characters"),
        ("completion_tokens", str(2**53), "above its limit"),
        ("latency_s", "1" + "0" * 400, "characters"),
    ],
)
def test_analyze_refuses_numbers_out_of_range(
    table: tuple[Path, Path], tmp_path: Path, field: str, value: str, said: str
) -> None:
    prepared, source = table
    rows = list(csv.DictReader(io.StringIO(source.read_text("utf-8"), newline="")))
    target = next(r for r in rows if r["status"] in ("correct", "wrong") and r[field] != "")
    target[field] = value
    damaged = tmp_path / "results.csv"
    with damaged.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    argv = ["analyze", "--results", str(damaged), "--prepared", str(prepared)]
    err = _refused([*argv, "--no-figures", "--out", str(tmp_path / "a")])
    assert f"field {field}" in err and said in err, err


# Class 10: base URLs parsed and refused before any folder is written.
BAD_URLS = [
    "http://127.0.0.1:abc/v1",
    "http://[::1/v1",
    "http://127.0.0.1:8080/v1\x7f",
    "http://127.0.0.1:70000/v1",
    "http://127.0.0.1:8080/v\x01",
    "http://exa mple/v1",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_check_endpoint_refuses_a_url_the_client_cannot_use(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NP_KEY", "sk-abcdefgh12345678")
    _refused(["check-endpoint", "--base-url", url, "--api-key-env", "NP_KEY", "--model", "m"])


@pytest.mark.parametrize("url", BAD_URLS)
def test_run_refuses_a_bad_url_before_the_run_folder_exists(
    table: tuple[Path, Path], tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NP_KEY", "sk-abcdefgh12345678")
    prepared, _ = table
    run = tmp_path / "run"
    argv = ["run", str(prepared), "--allow", "2", "--run-dir", str(run), "--no-progress"]
    _refused([*argv, "--base-url", url, "--model", "agnes-3.0-flash", "--api-key-env", "NP_KEY"])
    assert not run.exists(), "a refused URL left a folder bound to it"


# Class 11: valid ISO 8601 instants outside years 1-9999 in UTC.
@pytest.mark.parametrize("started", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
def test_timeline_and_report_refuse_instants_outside_years_1_to_9999(
    tmp_path: Path, started: str
) -> None:
    ws = tmp_path / "ws"
    context_file(ws, "notes/a.md", "nothing here\n", mtime="2025-03-14T11:00:00Z")
    runs_csv = runs(tmp_path / "runs.csv", [("r1", "b", started, "XX-0000")])
    err = _refused(["contamination", "timeline", "--runs", str(runs_csv), "--context", str(ws)])
    assert "started_at" in err and "outside years 1-9999" in err
    ref = reference(tmp_path / "ref.csv", {"R1": "OM-3642"})
    res = results(tmp_path / "results.jsonl", [result(answer="x", exact=False)])
    argv = ["contamination", "report", "--reference", str(ref), "--runs", str(runs_csv)]
    argv += ["--results", str(res), "--context", str(ws), "--out", str(tmp_path / "out")]
    assert "outside years 1-9999" in _refused(argv)


# Class 12: declare on a FIFO, as every other input refuses one.
def test_declare_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.md"
    os.mkfifo(fifo)
    (tmp_path / "evidence").mkdir()
    done: list[str] = []

    def go() -> None:
        done.append(
            _refused(["declare", str(fifo), "--out", str(tmp_path / "evidence" / "d.json")])
        )

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # unblock the reader, then fail
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
        pytest.fail("declare blocked on a FIFO")
    assert done and "FIFO" in done[0], done
    assert not (tmp_path / "evidence" / "d.json").exists()
