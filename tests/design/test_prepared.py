"""prepare is deterministic, verify regenerates byte for byte, and bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.design.verify import verify_prepared

REFERENCE_FINGERPRINT = "933f444ef0b1c30b34603ec4dee36dd7978f0e5ea7a7153cff0de857cb67366e"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_prepares_are_identical(reference_dir: Path, tmp_path: Path) -> None:
    again = prepare(tmp_path / "again")
    assert _files(again) == _files(reference_dir)


def test_prepared_folder_contents(reference_dir: Path) -> None:
    prepared = load_prepared(reference_dir)
    assert len(prepared.plan) == 128 and len(prepared.bodies) == 128
    assert prepared.protocol["protocol_id"] == "context-position-similar"
    assert prepared.protocol["version"] == 1
    header = (reference_dir / "plan.csv").read_text().splitlines()[0]
    assert header == "seq,block,pair,case,length,similarity,condition,order,request_sha256"
    key = prepared.answer_key[1]
    assert set(key) >= {"expected", "target_code", "codes_present", "near_codes"}
    manifest = json.loads((reference_dir / "manifest.json").read_text())
    assert set(manifest["files"]) == {
        "protocol.json",
        "requests.jsonl",
        "plan.csv",
        "answer_key.jsonl",
    }
    assert "needlepoint/design/generate.py" in manifest["sources"]


def test_verify_passes_and_reports_counts(
    reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(reference_dir)]) == 0
    assert "verify OK: 4 files" in capsys.readouterr().out


def test_changed_source_is_a_warning_not_a_failure(prepared_copy: Path) -> None:
    manifest = json.loads((prepared_copy / "manifest.json").read_text())
    manifest["sources"]["needlepoint/design/generate.py"] = "0" * 64
    (prepared_copy / "manifest.json").write_text(json.dumps(manifest))
    report = verify_prepared(prepared_copy)
    assert report.ok
    assert any("generate.py changed" in w and "still identical" in w for w in report.warnings)


def test_sources_of_an_earlier_layout_are_one_warning(prepared_copy: Path) -> None:
    """Folders prepared before the stage packages name modules that no longer exist."""
    manifest = json.loads((prepared_copy / "manifest.json").read_text())
    manifest["sources"] = {"needlepoint/freeze.py": "0" * 64, "needlepoint/rand.py": "1" * 64}
    (prepared_copy / "manifest.json").write_text(json.dumps(manifest))
    report = verify_prepared(prepared_copy)
    assert report.ok
    assert len(report.warnings) == 1
    assert (
        "another module layout (needlepoint/freeze.py, needlepoint/rand.py)" in report.warnings[0]
    )
    assert "materials still identical" in report.warnings[0]


def test_prepare_refuses_a_non_empty_folder(
    reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prepare", "--out", str(reference_dir)]) == 2
    assert "not an empty folder" in capsys.readouterr().err


def test_protocol_override_needs_a_new_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    override = tmp_path / "p.json"
    override.write_text(json.dumps({"cases": 4}))
    assert main(["prepare", "--out", str(tmp_path / "a"), "--protocol", str(override)]) == 2
    assert "v1 is frozen; cases differs" in capsys.readouterr().err
    override.write_text(json.dumps({"cases": 4, "version": 2, "lengths": [24, 36]}))
    assert main(["prepare", "--out", str(tmp_path / "b"), "--protocol", str(override)]) == 0
    assert main(["verify", str(tmp_path / "b")]) == 0
    assert main(["audit", str(tmp_path / "b")]) == 0
    assert len(load_prepared(tmp_path / "b").plan) == 4 * 2 * 2 * 4


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"version": 2, "cases": 6}, "multiple of the 4 orders"),
        ({"version": 2, "lengths": [8]}, "at least 12 records"),
        ({"version": 2, "bogus": 1}, "unknown protocol field 'bogus'"),
        ({"version": 2, "orders": ["B-M-E"]}, "permutation of B, M, E, A"),
        ({"version": 2, "templates": {"record": "{name}"}}, "templates.record"),
    ],
)
def test_bad_overrides(
    override: dict, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(override))
    assert main(["prepare", "--out", str(tmp_path / "x"), "--protocol", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_dry_run_prints_the_budget_first_and_the_plan_on_request(
    reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dry-run", str(reference_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "requests: 128 (32 blocks, 16 pairs)",
        "characters sent (message content): 500992",
        "request bytes sent: 1227904",
        "max_tokens per request: 1024 (at most 131072 completion tokens)",
        "minimum spacing: 20 s after each completion, so at least 2540 s of waiting",
        "network: none (dry run)",
        "plan: 128 rows in plan.csv (--plan lists them here)",
    ]
    assert main(["dry-run", str(reference_dir), "--plan"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "requests: 128 (32 blocks, 16 pairs)" and out[6:8] == [
        "",
        "seq  block pair case length sim  cond order    chars",
    ]
    assert len(out) == 8 + 128 and out[8].startswith("1    1     1    ")


def test_prepare_says_what_it_made_and_what_comes_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prepare", "--out", str(tmp_path / "p") + "/"]) == 0
    out = capsys.readouterr().out.splitlines()
    shown = str(tmp_path / "p")
    assert out[0] == (
        f"prepared {shown}: 128 requests of context-position-similar v1 for agnes-3.0-flash "
        "(body profile chat)"
    )
    assert out[1] == (
        "  8 cases x lengths 60, 240 records x similarity low/high x conditions B, M, E, A; "
        "32 blocks, 16 pairs"
    )
    # lengths are counted in records; these are the characters each request sends
    assert (
        out[2] == "  request length: 60 records = 1,664 characters, 240 records = 6,164 characters"
    )
    assert out[3] == f"  protocol fingerprint {REFERENCE_FINGERPRINT}"
    assert out[4].startswith("  design fingerprint   ") and len(out[4].split()[-1]) == 64
    assert out[5] == "next:" and out[6].startswith(f"  needlepoint dry-run {shown} ")
    assert f"needlepoint check-endpoint {shown} --base-url URL" in out[8]
