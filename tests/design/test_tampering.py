"""A prepared folder mutated in many ways: verify or audit must fail and name the problem.

Most mutations are "careful" forgeries: after editing, the plan hashes and the manifest are
recomputed, so the audit's content rules (not just a hash) have to catch them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.jsonio import canonical_bytes, file_sha256, sha256_hex


def _requests(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "requests.jsonl").read_text("utf-8").splitlines()]


def _keys(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "answer_key.jsonl").read_text("utf-8").splitlines()]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in rows))


def _plan(folder: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((folder / "plan.csv").read_text("utf-8"))))


def _write_plan(folder: Path, rows: list[dict]) -> None:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (folder / "plan.csv").write_text(out.getvalue(), "utf-8")


def rehash(folder: Path) -> None:
    """Make a forgery self-consistent: recompute plan hashes and the manifest's file hashes."""
    reqs = _requests(folder)
    plan = _plan(folder)
    for row, req in zip(plan, reqs, strict=False):
        row["request_sha256"] = sha256_hex(canonical_bytes(req["body"]))
    _write_plan(folder, plan)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    for name in manifest["files"]:
        manifest["files"][name] = file_sha256(folder / name)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), "utf-8")


def edit_user(folder: Path, seq: int, fn: Callable[[list[str]], list[str]]) -> None:
    """Apply ``fn`` to the record lines (and question) of one request's user message."""
    reqs = _requests(folder)
    msg = reqs[seq - 1]["body"]["messages"][1]
    msg["content"] = "\n".join(fn(msg["content"].split("\n")))
    _write_jsonl(folder / "requests.jsonl", reqs)


def _block_seqs(folder: Path, seq: int) -> list[int]:
    plan = _plan(folder)
    block = plan[seq - 1]["block"]
    return [int(r["seq"]) for r in plan if r["block"] == block]


def edit_background(folder: Path, seq: int, fn: Callable[[list[str]], list[str]]) -> None:
    """Apply ``fn`` to the shared background records of every request in ``seq``'s block."""
    plan = _plan(folder)
    for s in _block_seqs(folder, seq):
        n = int(plan[s - 1]["length"])
        at = {"B": 0, "M": n // 2, "E": n, "A": n // 2}[plan[s - 1]["condition"]]

        def apply(ls: list[str], at: int = at) -> list[str]:
            records = ls[1:-2]
            inserted = records.pop(at)
            records = fn(records)
            records.insert(at, inserted)
            return [ls[0], *records, *ls[-2:]]

        edit_user(folder, s, apply)


def _high_b_seq(folder: Path) -> int:
    return next(
        int(r["seq"]) for r in _plan(folder) if r["similarity"] == "high" and r["condition"] == "B"
    )


# --- the mutations ----------------------------------------------------------------------


def change_one_character(f: Path) -> None:
    edit_user(f, 1, lambda ls: [ls[0], ls[1].replace("名称", "名字", 1), *ls[2:]])
    rehash(f)


def swap_two_lines(f: Path) -> None:
    lines = (f / "requests.jsonl").read_text("utf-8").splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    (f / "requests.jsonl").write_text("".join(lines), "utf-8")


def edit_answer_key(f: Path) -> None:
    keys = _keys(f)
    keys[0]["expected"] = "ZZ-9999"
    _write_jsonl(f / "answer_key.jsonl", keys)
    rehash(f)


def remove_file(f: Path) -> None:
    (f / "answer_key.jsonl").unlink()


def change_order_seed(f: Path) -> None:
    p = json.loads((f / "protocol.json").read_text("utf-8"))
    p["seeds"]["order"] += 1
    (f / "protocol.json").write_text(json.dumps(p, ensure_ascii=False, indent=2), "utf-8")
    rehash(f)


def plant_code_in_system(f: Path) -> None:
    reqs = _requests(f)
    code = _keys(f)[0]["target_code"]
    reqs[0]["body"]["messages"][0]["content"] += f"（参考：{code}）"
    _write_jsonl(f / "requests.jsonl", reqs)
    rehash(f)


def lengthen_record(f: Path) -> None:
    edit_background(f, 1, lambda bg: [bg[0] + "。", *bg[1:]])
    rehash(f)


def duplicate_code(f: Path) -> None:
    def dup(bg: list[str]) -> list[str]:
        bg[3] = bg[3][:-7] + bg[2][-7:]
        return bg

    edit_background(f, 1, dup)
    rehash(f)


def move_near_name(f: Path) -> None:
    def move(bg: list[str]) -> list[str]:
        slot = len(bg) // 12  # the first near-name slot, floor(N/12)
        bg[slot], bg[slot + 1] = bg[slot + 1], bg[slot]
        return bg

    edit_background(f, _high_b_seq(f), move)
    rehash(f)


def add_body_key(f: Path) -> None:
    reqs = _requests(f)
    reqs[5]["body"]["label"] = "M"
    _write_jsonl(f / "requests.jsonl", reqs)
    rehash(f)


def change_model(f: Path) -> None:
    reqs = _requests(f)
    reqs[7]["body"]["model"] = "other-model"
    _write_jsonl(f / "requests.jsonl", reqs)
    rehash(f)


def edit_plan_hash(f: Path) -> None:
    plan = _plan(f)
    plan[2]["request_sha256"] = "0" * 64
    _write_plan(f, plan)


def edit_manifest(f: Path) -> None:
    m = json.loads((f / "manifest.json").read_text("utf-8"))
    m["files"]["plan.csv"] = "f" * 64
    (f / "manifest.json").write_text(json.dumps(m), "utf-8")


def relabel_condition(f: Path) -> None:
    plan = _plan(f)
    plan[0]["condition"], plan[1]["condition"] = plan[1]["condition"], plan[0]["condition"]
    _write_plan(f, plan)
    rehash(f)


def mislabel_near_kind(f: Path) -> None:
    keys = _keys(f)
    k = next(k for k in keys if k["similarity"] == "high")
    k["near_kinds"] = list(reversed(k["near_kinds"]))
    if k["near_kinds"] == list(reversed(k["near_kinds"])):
        k["near_kinds"][0] = "swap" if k["near_kinds"][0] != "swap" else "qualifier"
    _write_jsonl(f / "answer_key.jsonl", keys)
    rehash(f)


def plant_target_word(f: Path) -> None:
    target = _keys(f)[0]["target_name"]

    def plant(bg: list[str]) -> list[str]:
        # give a background record a name that shares the target's place word
        name = bg[1].split("：", 1)[1][:8]
        bg[1] = bg[1].replace(name, target[:2] + name[2:])
        return bg

    edit_background(f, 1, plant)
    rehash(f)


def remove_target(f: Path) -> None:
    plan = _plan(f)
    seq = next(int(r["seq"]) for r in plan if r["condition"] == "M")
    keys = _keys(f)

    def drop(ls: list[str]) -> list[str]:
        code = keys[seq - 1]["target_code"]
        return [line.replace(code, "QQ-0001") for line in ls]

    edit_user(f, seq, drop)
    rehash(f)


def change_high_background(f: Path) -> None:
    def change(bg: list[str]) -> list[str]:
        # one more name differs between low and high: a non-slot record borrows another's name
        bg[2] = bg[2][:3] + bg[9][3:11] + bg[2][11:]
        return bg

    edit_background(f, _high_b_seq(f), change)
    rehash(f)


MUTATIONS = [
    (change_one_character, "record_format", "requests.jsonl seq 1"),
    (swap_two_lines, "canonical_lines", "requests.jsonl seq"),
    (edit_answer_key, "answer_key", "answer_key.jsonl seq 1: expected"),
    (change_order_seed, "case_shuffle", "seeds.order"),
    (plant_code_in_system, "system_message", "requests.jsonl seq 1: body.messages[0].content"),
    (lengthen_record, "record_format", "requests.jsonl seq"),
    (duplicate_code, "unique_codes", "requests.jsonl seq"),
    (move_near_name, "near_slots", "requests.jsonl seq"),
    (add_body_key, "body_keys", "requests.jsonl seq 6: body.label"),
    (change_model, "body_keys", "requests.jsonl seq 8: body.model"),
    (edit_plan_hash, "plan_hashes", "plan.csv seq 3: request_sha256"),
    (edit_manifest, "manifest_hashes", "manifest.json: hash of plan.csv"),
    (relabel_condition, "plan_design", "plan.csv seq 1: condition"),
    (mislabel_near_kind, "answer_key", "answer_key.jsonl seq"),
    (plant_target_word, "unrelated_names", "requests.jsonl seq 1"),
    (remove_target, "target_once", "requests.jsonl seq"),
    (change_high_background, "pair_difference", "requests.jsonl seq"),
]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(
    ("mutate", "check", "verify_text"), MUTATIONS, ids=lambda x: getattr(x, "__name__", "")
)
def test_mutation_is_caught(
    mutate: Callable[[Path], None],
    check: str,
    verify_text: str,
    prepared_copy: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mutate(prepared_copy)
    code, out = _run(["audit", str(prepared_copy)], capsys)
    assert code != 0
    failing = [
        ln.split()[0]
        for ln in out.splitlines()
        if ln and not ln.startswith((" ", "check", "audit")) and ln.split()[2] != "0"
    ]
    assert check in failing, out
    code, out = _run(["verify", str(prepared_copy)], capsys)
    assert code != 0
    assert verify_text in out, out


def test_removed_file(prepared_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remove_file(prepared_copy)
    code, out = _run(["audit", str(prepared_copy)], capsys)
    assert code == 2 and "answer_key.jsonl: file not found" in out
    code, out = _run(["verify", str(prepared_copy)], capsys)
    assert code == 1 and "answer_key.jsonl: missing" in out


def test_changed_seed_in_frozen_v1(prepared_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = json.loads((prepared_copy / "protocol.json").read_text("utf-8"))
    p["seeds"]["materials"] = 1
    (prepared_copy / "protocol.json").write_text(json.dumps(p, ensure_ascii=False), "utf-8")
    code, out = _run(["verify", str(prepared_copy)], capsys)
    assert code == 2 and "seeds.materials differs" in out and len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["verify", "audit", "dry-run"])
def test_bad_input_is_one_line_exit_2(
    command: str, prepared_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run([command, str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "no such prepared folder" in out and len(out.strip().splitlines()) == 1
    (prepared_copy / "protocol.json").write_text("{broken", "utf-8")
    code, out = _run([command, str(prepared_copy)], capsys)
    assert code == 2 and "broken JSON" in out and "Traceback" not in out
    (prepared_copy / "protocol.json").write_text(json.dumps({"format": 99}), "utf-8")
    code, out = _run([command, str(prepared_copy)], capsys)
    assert code == 2 and "unsupported protocol format 99" in out
    assert len(out.strip().splitlines()) == 1
