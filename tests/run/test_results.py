"""results.csv from the journal alone, and audit-run catching every kind of after-the-fact edit."""

from __future__ import annotations

import csv
import io
import json

import pytest

from needlepoint.cli import main
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex
from needlepoint.run.journal import HEAD_NAME, JOURNAL_NAME
from needlepoint.run.options import RunOptions
from needlepoint.run.results import RESULT_COLUMNS, load_run_results, write_results
from needlepoint.run.runner import run_protocol

FORMATS_COLUMNS = (
    "seq,block,pair,case,length,similarity,condition,order,request_sha256,status,kind,"
    "response_text,http_status,latency_s,prompt_tokens,completion_tokens,reasoning_tokens,cost,"
    "simulation,"
    "journal_sha256"
).split(",")


@pytest.fixture(scope="module")
def faulty_run(reference_dir, tmp_path_factory):
    """A simulated run with failures, known costs, unknown costs, then a stop at HTTP 429."""
    run = tmp_path_factory.mktemp("faulty") / "run"
    rates = {"input_rate": 0.5, "output_rate": 1.5}
    run_protocol(
        reference_dir, run, RunOptions(allow=44, simulate="faulty", progress="off", **rates)
    )
    return run


@pytest.fixture
def run(faulty_run, tmp_path):
    """A private copy that a test may tamper with."""
    import shutil

    return shutil.copytree(faulty_run, tmp_path / "run")


def read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text("utf-8"))))


def test_results_csv_has_every_planned_row(run, capsys):
    assert main(["results", str(run)]) == 0
    assert "SIMULATION" in capsys.readouterr().out
    text = (run / "results.csv").read_bytes()
    assert b"\r" not in text and text.endswith(b"\n")
    assert text.split(b"\n")[0].decode().split(",") == FORMATS_COLUMNS == list(RESULT_COLUMNS)
    rows = read_csv(run / "results.csv")
    assert [int(r["seq"]) for r in rows] == list(range(1, 129))
    by_status = {r["status"] for r in rows}
    assert by_status == {"correct", "protocol_failure", "unexecuted"}
    head = json.loads((run / HEAD_NAME).read_text())["sha256"]
    assert {r["journal_sha256"] for r in rows} == {head}
    assert {r["simulation"] for r in rows} == {"true"}
    unexecuted = [r for r in rows if r["status"] == "unexecuted"]
    assert all(r["kind"] == r["http_status"] == r["cost"] == "" for r in unexecuted)
    # Unknown is empty, never 0: a timeout has no tokens, a response without usage no cost.
    timeout = next(r for r in rows if r["kind"] == "indeterminate_timeout")
    assert timeout["http_status"] == timeout["prompt_tokens"] == timeout["cost"] == ""
    no_usage = next(r for r in rows if r["status"] == "correct" and r["cost"] == "")
    assert no_usage["prompt_tokens"] == ""
    priced = next(r for r in rows if r["cost"])
    assert float(priced["cost"]) == pytest.approx(
        (int(priced["prompt_tokens"]) * 0.5 + int(priced["completion_tokens"]) * 1.5) / 1e6
    )


def test_analysis_reads_the_same_columns(run):
    from needlepoint.analysis import inputs as analysis_input

    assert tuple(analysis_input.RESULT_COLUMNS) == RESULT_COLUMNS
    write_results(run)
    loaded = analysis_input.from_run(run)
    assert loaded.simulation is True


def test_edited_results_csv_is_refused(run):
    write_results(run)
    assert len(load_run_results(run).rows) == 128
    path = run / "results.csv"
    text = path.read_text()
    path.write_text(text.replace("protocol_failure,finish_reason", "correct,", 1))
    with pytest.raises(NeedlepointError, match=r"results\.csv:3: differs"):
        load_run_results(run)
    path.write_text(text + text.splitlines()[-1] + "\n")
    with pytest.raises(NeedlepointError, match=r"results\.csv:\d+: differs"):
        load_run_results(run)


def lines(run):
    return (run / JOURNAL_NAME).read_bytes().splitlines(keepends=True)


def rechain(run, records):
    """Forge a journal properly: recompute every prev and the head, as a careful editor would."""
    prev, out = "0" * 64, []
    for n, record in enumerate(records):
        record = {**record, "n": n, "prev": prev}
        out.append(canonical_bytes(record) + b"\n")
        prev = sha256_hex(canonical_bytes(record))
    (run / JOURNAL_NAME).write_bytes(b"".join(out))
    head = {"format": 1, "records": len(records), "sha256": prev}
    (run / HEAD_NAME).write_bytes(canonical_bytes(head) + b"\n")


def records(run):
    return [json.loads(line) for line in lines(run)]


def audit_cli(run, capsys):
    code = main(["audit-run", str(run)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_clean_run_passes_audit(run, capsys):
    write_results(run)
    code, out = audit_cli(run, capsys)
    assert code == 0 and "audit-run: ok" in out and "checked results.csv: 1" in out


@pytest.mark.parametrize("edit", ["edit", "delete", "reorder", "truncate"])
def test_journal_edits_are_detected(run, capsys, edit):
    ls = lines(run)
    if edit == "edit":
        ls[4] = ls[4].replace(b'"status":"protocol_failure"', b'"status":"correct"')
    elif edit == "delete":
        del ls[4]
    elif edit == "reorder":
        ls[3], ls[5] = ls[5], ls[3]
    else:
        ls = ls[:-2]
    assert b"".join(ls) != b"".join(lines(run)), "the edit must change the journal"
    (run / JOURNAL_NAME).write_bytes(b"".join(ls))
    code, out = audit_cli(run, capsys)
    assert code == 1 and "PROBLEM" in out
    with pytest.raises(NeedlepointError, match="journal chain broken"):
        load_run_results(run)


def test_rechained_score_edit_is_caught_by_reclassification(run, capsys):
    rs = records(run)
    outcome = next(r for r in rs if r["type"] == "outcome" and r["classification"]["kind"])
    outcome["classification"] = {**outcome["classification"], "status": "correct", "kind": ""}
    rechain(run, rs)
    code, out = audit_cli(run, capsys)
    assert code == 1 and "recorded classification differs" in out


def test_rechained_double_send_and_skipped_gap_are_caught(run, capsys):
    rs = records(run)
    attempts = [r for r in rs if r["type"] == "attempt"]
    attempts[3]["seq"] = attempts[2]["seq"]
    attempts[5]["gap_s"] = 1.0
    rechain(run, rs)
    code, out = audit_cli(run, capsys)
    assert code == 1
    assert "sent a second time" in out and "below the minimum" in out


def test_rechained_send_after_a_stop_rule_is_caught(run, capsys):
    rs = records(run)
    stop = next(i for i, r in enumerate(rs) if r["type"] == "stop")
    last_outcome = rs[stop - 1]
    extra_attempt = {**rs[stop - 2], "seq": 43, "time": last_outcome["time"], "gap_s": 20.0}
    from needlepoint.design.prepared import load_prepared

    prepared = load_prepared(run / json.loads((run / "run.json").read_text())["prepared_dir"])
    extra_attempt["request_sha256"] = prepared.plan[42].request_sha256
    rs.insert(stop, extra_attempt)
    rechain(run, rs)
    code, out = audit_cli(run, capsys)
    assert code == 1 and "after a stop rule fired" in out


def test_edited_run_json_is_caught(run, capsys):
    meta = json.loads((run / "run.json").read_text())
    meta["simulation"] = False
    (run / "run.json").write_bytes(canonical_bytes(meta) + b"\n")
    code, out = audit_cli(run, capsys)
    assert code == 1 and "run.json was edited" in out


def test_edited_context_manifest_is_caught(run, capsys):
    path = run / "context_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["sent"][0]["request_sha256"] = "0" * 64
    path.write_text(json.dumps(manifest))
    code, out = audit_cli(run, capsys)
    assert code == 1 and "sent list differs" in out


def test_context_manifest_lists_every_body_sent(run):
    manifest = json.loads((run / "context_manifest.json").read_text())
    meta = json.loads((run / "run.json").read_text())
    assert manifest["prepared_manifest_sha256"] == meta["prepared_fingerprint"]
    attempts = [r for r in records(run) if r["type"] == "attempt"]
    assert [(s["seq"], s["request_sha256"]) for s in manifest["sent"]] == [
        (a["seq"], a["request_sha256"]) for a in attempts
    ]
    assert set(manifest["prepared_files"]) >= {"requests.jsonl", "plan.csv"}


def test_missing_run_folder_is_one_line(tmp_path, capsys):
    assert main(["results", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run.json" in err


def test_journal_summary_is_readable_and_deterministic(faulty_run):
    from needlepoint.run.results import journal_summary

    lines = journal_summary(faulty_run)
    assert lines == journal_summary(faulty_run)
    assert lines[0].startswith("session 1 at 2026-01-01T00:00:00.000000Z: allow 44")
    assert any("stop_status: HTTP 429 at seq 42" in line for line in lines)
    assert "gaps: min 20 s, median 20 s" in lines


def test_a_results_table_from_before_reasoning_tokens_reads_it_as_empty(
    run, reference_dir, tmp_path
):
    """A column added later (reasoning_tokens) reads as empty in an older table, as a JSON
    field added later does."""
    write_results(run)
    rows = list(csv.reader(io.StringIO((run / "results.csv").read_text("utf-8"), newline="")))
    drop = rows[0].index("reasoning_tokens")
    old = tmp_path / "old.csv"
    with old.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows([r[:drop] + r[drop + 1 :] for r in rows])
    argv = ["analyze", "--results", str(old), "--prepared", str(reference_dir), "--no-figures"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    doc = json.loads((tmp_path / "a" / "analysis.json").read_text("utf-8"))
    assert doc["simulation"] is True


def test_journal_summary_says_each_session_stop_kind_gap_latency_and_cost(reference_dir, tmp_path):
    """Every line of the summary, exactly: two sessions (the first with an override reason and
    no gap, the second spaced 30 s and priced), each stop, the outcome kinds in sorted order,
    gaps over both sessions, the known and unknown cost and the journal's head."""
    from needlepoint.run.journal import read_chain
    from needlepoint.run.results import journal_summary

    run = tmp_path / "run"
    first = RunOptions(
        allow=3, simulate="faulty", progress="off", min_gap_s=0, override_reason="one client"
    )
    run_protocol(reference_dir, run, first)
    rates = {"input_rate": 0.5, "output_rate": 1.5}
    run_protocol(
        reference_dir,
        run,
        RunOptions(allow=6, simulate="faulty", progress="off", min_gap_s=30, **rates),
    )
    head = read_chain(run, keep=False).head
    assert journal_summary(run) == [
        "session 1 at 2026-01-01T00:00:00.000000Z: allow 3, min gap 0 s, override: one client",
        "  stopped at 2026-01-01T00:00:02.646000Z: allowance_spent: 3 attempts recorded, --allow 3",
        "session 2 at 2026-01-01T00:00:02.646000Z: allow 6, min gap 30 s",
        "  stopped at 2026-01-01T00:01:35.292000Z: allowance_spent: 6 attempts recorded, --allow 6",
        "attempts 6, outcomes 6",
        "  correct: 4",
        "  protocol_failure (finish_reason): 1",
        "  protocol_failure (length_empty): 1",
        "gaps: min 0 s, median 30 s",
        "latency: median 0.882 s",
        "cost: 0.003644 known, 3 unknown",
        f"journal sha256 {head}",
    ]


def test_journal_summary_of_a_broken_chain_is_one_line(run):
    from needlepoint.run.results import journal_summary

    lines = (run / "journal.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[3] = lines[3].replace('"seq":', '"seq": ', 1)
    (run / "journal.jsonl").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(NeedlepointError, match=r"^journal chain broken: "):
        journal_summary(run)


def test_summary_lines_count_each_status_and_label_a_simulation(faulty_run):
    from needlepoint.run.results import RunResults, summary_lines

    results = load_run_results(faulty_run)
    statuses = [row["status"] for row in results.rows]
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    assert counts == {"correct": 23, "protocol_failure": 19, "unexecuted": 86}
    assert summary_lines(results) == [
        "SIMULATION - not a model result. 128 planned rows: correct 23, protocol_failure 19, "
        "unexecuted 86",
        f"journal {results.journal_sha256}",
    ]
    live = RunResults(results.rows, False, "h", results.prepared_fingerprint, results.prepared_dir)
    assert summary_lines(live) == [
        "128 planned rows: correct 23, protocol_failure 19, unexecuted 86",
        "journal h",
    ]


def _rows(*texts: str) -> list[dict[str, str]]:
    return [{name: (t if name == "seq" else "") for name in RESULT_COLUMNS} for t in texts]


def test_differs_at_names_the_first_differing_line(tmp_path):
    from needlepoint.run.results import csv_chunks, differs_at

    rows = _rows("1", "2", "3")
    good = b"".join(csv_chunks(rows))
    path = tmp_path / "results.csv"
    path.write_bytes(good)
    assert differs_at(path, rows) is None
    lines = good.split(b"\n")
    for n in (1, 2, 4):  # the header, the first and the last row (line numbers from 1)
        changed = list(lines)
        changed[n - 1] = changed[n - 1][:-1] + b"X"
        path.write_bytes(b"\n".join(changed))
        assert differs_at(path, rows) == n
    path.write_bytes(good + b"more")  # a longer file differs after the last line
    assert differs_at(path, rows) == 5
    path.write_bytes(good[:-3])  # a shorter one where it ends
    assert differs_at(path, rows) == 4
    path.write_bytes(b"")
    assert differs_at(path, rows) == 1


def test_differs_at_reads_no_further_than_one_byte_past_the_rows(tmp_path):
    import tracemalloc

    from needlepoint.run.results import csv_chunks, differs_at

    rows = _rows("1", "2", "3")
    path = tmp_path / "results.csv"
    path.write_bytes(
        b"".join(csv_chunks(rows)) + b"x" * (32 << 20)
    )  # an edited file, 32 MiB too long
    tracemalloc.start()
    try:
        assert differs_at(path, rows) == 5
        used = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert used < 1 << 20, f"peak {used} bytes: the tail was read, not one byte of it"


def test_journal_summary_of_a_fully_priced_run_names_no_unknown_cost(reference_dir, tmp_path):
    from needlepoint.run.results import journal_summary

    options = RunOptions(
        allow=2, simulate="perfect", progress="off", min_gap_s=0, override_reason="x",
        input_rate=0.5, output_rate=1.5,
    )  # fmt: skip
    run_protocol(reference_dir, tmp_path / "run", options)
    assert journal_summary(tmp_path / "run")[-2] == "cost: 0.001409 known"


def test_journal_summary_names_the_chains_first_problem(run):
    from needlepoint.run.journal import read_chain
    from needlepoint.run.results import journal_summary

    lines = (run / "journal.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    for i in (3, 9):  # two broken records: the first is named
        lines[i] = lines[i].replace('"seq":', '"seq": ', 1)
    (run / "journal.jsonl").write_text("".join(lines), encoding="utf-8")
    problems = read_chain(run, keep=False).problems
    assert len(problems) >= 2
    with pytest.raises(NeedlepointError) as caught:
        journal_summary(run)
    assert str(caught.value) == f"journal chain broken: {problems[0]}"


def test_write_results_reads_the_prepared_folder_it_is_given(run, reference_dir, tmp_path):
    import shutil

    moved = tmp_path / "elsewhere"
    shutil.copytree(reference_dir, moved)
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["prepared_dir"] = "../nowhere"
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(NeedlepointError):
        write_results(run)
    assert write_results(run, moved).prepared_dir == moved


def test_differs_at_counts_the_lines_inside_a_quoted_cell(tmp_path):
    """An answer may hold line feeds: one row is then several lines of the file, and the
    differing line is counted inside the row."""
    from needlepoint.run.results import csv_chunks, differs_at

    rows = _rows("1", "2")
    rows[1]["response_text"] = "first\nsecond\nthird"
    good = b"".join(csv_chunks(rows))
    path = tmp_path / "results.csv"
    for word, line in ((b"first", 3), (b"second", 4), (b"third", 5)):
        path.write_bytes(good.replace(word, word.upper()))
        assert differs_at(path, rows) == line
    path.write_bytes(good)
    assert differs_at(path, rows) is None


def test_a_cell_is_the_value_as_text_and_unknown_is_empty():
    from needlepoint.run.results import _cell

    assert [_cell(v) for v in ("7", 200, 0.1, 1e-07, None, False)] == [
        "7", "200", "0.1", "1e-07", "", ""
    ]  # fmt: skip


def test_a_prepared_folder_of_another_fingerprint_is_refused_by_name(reference_dir, tmp_path):
    from types import SimpleNamespace

    from needlepoint.run.results import load_frozen_plan

    run = SimpleNamespace(prepared_dir="../prepared", prepared_fingerprint="0" * 64)
    with pytest.raises(NeedlepointError) as refused:
        load_frozen_plan(tmp_path / "run", run, reference_dir)  # type: ignore[arg-type]
    assert str(refused.value) == (
        f"{reference_dir}: manifest fingerprint differs from {tmp_path / 'run' / 'run.json'}: "
        "not the prepared folder this run used"
    )


def test_a_prepared_file_edited_after_the_run_is_refused(prepared_copy, tmp_path):
    from needlepoint.run.results import derive

    run = tmp_path / "run"
    run_protocol(prepared_copy, run, RunOptions(allow=3, simulate="perfect", progress="off"))
    key = prepared_copy / "answer_key.jsonl"
    key.write_bytes(key.read_bytes().replace(b"\n", b" \n", 1))  # still valid, not the same bytes
    with pytest.raises(NeedlepointError) as refused:
        derive(run)
    named = run / "../prepared/answer_key.jsonl"  # as run.json names it, relative to the run
    assert str(refused.value) == f"{named}: differs from manifest.json (edited?)"


def test_answer_bytes_blank_the_run_specific_cells_and_read_the_prepared_folder_given(
    run, reference_dir, tmp_path
):
    """Two runs that received the same answers compare equal through ``answer_bytes``: the
    latency and the journal's hash differ between them, so those cells, and only those, are
    emptied; a prepared folder given explicitly is the one read."""
    from needlepoint.run.results import RUN_SPECIFIC_COLUMNS, answer_bytes

    write_results(run)
    full = read_csv(run / "results.csv")
    blanked = list(csv.DictReader(io.StringIO(answer_bytes(run).decode("utf-8"))))
    assert len(blanked) == len(full) > 0
    for whole, kept in zip(full, blanked, strict=True):
        assert all(kept[c] == "" for c in RUN_SPECIFIC_COLUMNS)
        assert {k: v for k, v in kept.items() if k not in RUN_SPECIFIC_COLUMNS} == {
            k: v for k, v in whole.items() if k not in RUN_SPECIFIC_COLUMNS
        }
    assert any(whole["journal_sha256"] for whole in full)
    # run.json names its prepared folder by a relative path: a deeper copy loses it
    import shutil

    moved = shutil.copytree(run, tmp_path / "deeper" / "still" / "run")
    with pytest.raises(NeedlepointError):
        answer_bytes(moved)
    assert answer_bytes(moved, reference_dir) == answer_bytes(run)
