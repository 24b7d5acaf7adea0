"""Bad flags and odd terminals: refused before any work in one line (exit 2), never the
last-resort guard (exit 70), never a folder left behind, never a server started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fuzz import SMALL, bad_outcome, run_cli
from support.pilots import design_file, simulated_pilot

from needlepoint.design.prepared import prepare


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flags")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


@pytest.fixture(scope="module")
def pilot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pilot")
    simulated_pilot(root / "pilot", design_file(root))
    return root / "pilot"


def refused(argv: list[str], said: str) -> str:
    code, out, err = run_cli(argv)
    assert bad_outcome(argv, code, out, err) is None, err
    assert code == 2 and said in err, (code, out, err)
    return err


SIM = ["--simulate", "position", "--no-progress"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--timeout-s", "1e308"], "argument --timeout-s"),
        (["--timeout-s", "0"], "argument --timeout-s"),
        (["--timeout-s", "inf"], "not a finite number"),
        (["--min-gap-s", "1e308", "--override-reason", "x"], "argument --min-gap-s"),
        (["--input-rate", "1e308", "--output-rate", "1"], "argument --input-rate"),
        (["--cost-cap", "1e308", "--input-rate", "1", "--output-rate", "1"], "--cost-cap"),
        (["--allow", str(10**12)], "argument --allow"),
        (["--sim-param", "seed=-1"], "--sim-param seed"),
        (["--sim-param", f"seed={2**63}"], "--sim-param seed"),
        (["--sim-param", "p_middle=nan"], "--sim-param p_middle"),
        (["--sim-param", "p_middle=7"], "--sim-param p_middle"),
        (["--sim-param", "latency_s=1e308"], "--sim-param latency_s"),
        (["--sim-param", "latency_s=-1"], "--sim-param latency_s"),
    ],
)
def test_run_flags_out_of_range_are_refused_before_any_file(
    small: Path, tmp_path: Path, extra: list[str], said: str
) -> None:
    argv = ["run", str(small), "--allow", "4", "--run-dir", str(tmp_path / "run"), *SIM]
    if "--allow" in extra:
        argv = argv[:2] + argv[4:]
    refused([*argv, *extra], said)
    assert not (tmp_path / "run").exists(), "a refused run leaves no folder to resume"


def test_a_slow_simulation_stays_resumable(small: Path, tmp_path: Path) -> None:
    """The largest allowed latency still gives a run that resumes."""
    argv = ["run", str(small), "--allow", "2", "--run-dir", str(tmp_path / "run"), *SIM]
    slow = ["--sim-param", "latency_s=86400", "--sim-param", f"seed={2**63 - 1}"]
    assert run_cli([*argv, *slow])[0] in (0, 3)  # its timeouts may stop it: a stop rule
    again = ["run", str(small), "--allow", "4", "--run-dir", str(tmp_path / "run"), *SIM]
    code, out, err = run_cli([*again, *slow])
    assert code in (0, 3) and "4 of 4 allowed (2 this session)" in out, out + err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--max-cases", "1000000000"], "argument --max-cases"),
        (["--simulations", "0"], "argument --simulations"),
        (["--seed", "-1"], "argument --seed"),
        (["--max-cases", "1024", "--simulations", "1000000"], "would simulate about"),
    ],
)
def test_calibrate_search_bounds_are_checked_before_the_search(
    pilot_dir: Path, tmp_path: Path, extra: list[str], said: str
) -> None:
    start = time.perf_counter()
    refused(["calibrate", str(pilot_dir), "--out", str(tmp_path / "v.json"), *extra], said)
    assert time.perf_counter() - start < 30, "refused before the search, not after it"
    assert not (tmp_path / "v.json").exists()


def test_calibrate_names_the_audit_problems_of_a_damaged_pilot(
    pilot_dir: Path, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(pilot_dir, tmp_path / "copy"))
    (copy / "run" / "journal.head.json").write_text('{"format":1,"records":1,"sha256":"x"}')
    err = refused(["calibrate", str(copy), "--out", str(tmp_path / "v.json")], "fails audit-run")
    assert "journal.head.json: says 1 records" in err


def test_calibrate_refuses_one_file_for_report_and_protocol(
    pilot_dir: Path, tmp_path: Path
) -> None:
    same = tmp_path / "x.json"
    refused(["calibrate", str(pilot_dir), "--out", str(same), "--report", str(same)], "same file")
    assert not same.exists()


def test_a_refused_live_pilot_leaves_no_folder(tmp_path: Path) -> None:
    argv = ["pilot", "--protocol", str(design_file(tmp_path)), "--out", str(tmp_path / "p")]
    argv += ["--lengths", "12", "--cases", "4", "--allow", "9"]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--model", "agnes-3.0-flash"]
    refused([*argv, "--api-key-env", "NEEDLEPOINT_UNSET_VARIABLE"], "is not set")
    assert not (tmp_path / "p").exists()


def test_pipeline_checks_parameter_types_before_any_notebook(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    argv = ["pipeline", "--label", "typed", "--evidence-root", str(tmp_path / "evidence")]
    argv += ["--notebooks", str(root / "notebooks"), "--date", "20261201"]
    err = refused([*argv, "-p", "allow", "abc"], "takes an integer")
    assert "03-run" in err and "nothing was run" in err
    assert not (tmp_path / "evidence").exists()


def test_a_long_label_is_refused_naming_the_limit(tmp_path: Path) -> None:
    argv = ["pipeline", "--label", "a" * 62, "--evidence-root", str(tmp_path)]
    refused(argv, "1 to 61 lower-case letters")


def test_evidence_diff_sees_an_extra_link_of_any_kind(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side / "sub").mkdir(parents=True)
        (tmp_path / side / "data.csv").write_text("x\n")
    (tmp_path / "b" / "dangling.csv").symlink_to(tmp_path / "nowhere")
    (tmp_path / "b" / "folder-link").symlink_to(tmp_path / "b" / "sub")
    (tmp_path / "b" / "data-link.csv").symlink_to(tmp_path / "b" / "data.csv")
    code, out, _ = run_cli(["evidence-diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert code == 1
    for name in ("dangling.csv", "folder-link", "data-link.csv"):
        assert f"regenerated but not committed: {name}" in out
    (tmp_path / "b" / "data.csv").unlink()
    (tmp_path / "b" / "data.csv").symlink_to(tmp_path / "a" / "data.csv")  # same bytes, a link
    code, out, _ = run_cli(["evidence-diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert code == 1 and "differs: data.csv (a file committed, a symbolic link now" in out


def test_a_closed_stderr_with_the_progress_bar_on(small: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "needlepoint", "run", str(small), "--allow", "3"]
    argv += ["--run-dir", str(tmp_path / "run"), "--simulate", "perfect"]
    done = subprocess.run(
        argv, stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(2), check=False
    )
    assert done.returncode == 0, done.stdout
    assert "internal error" not in done.stdout and "allowance_spent" in done.stdout


def test_ctrl_c_in_the_first_moments_is_one_line(small: Path) -> None:
    for delay in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4):
        child = subprocess.Popen(
            [str(Path(sys.executable).parent / "needlepoint"), "verify", str(small)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        # An interrupt while the interpreter itself starts (site, the script's first line,
        # before any of this package runs) is Python's to report; from the package's first line
        # on, it is one line and exit 130.
        ours = "/needlepoint/" in err  # a frame in one of the package's files
        assert not ("Traceback" in err and ours), f"after {delay} s: {err}"
        if "Traceback" not in err and "Fatal Python error" not in err:
            assert child.returncode in (0, 130, -signal.SIGINT), (delay, child.returncode, err)


LOCAL_PILOT = ["local-pilot", "--protocol", "D", "--out", "R", "--lengths", "12"]


@pytest.mark.parametrize(
    "argv",
    [
        ["local-run", "P", "--run-dir", "R", "--allow", "0"],
        ["local-run", "P", "--run-dir", "R", "--allow", "4", "--timeout-s", "1e308"],
        ["local-run", "P", "--run-dir", "R", "--allow", "4", "--n-ctx", "0"],
        [*LOCAL_PILOT, "--cases", "0", "--allow", "4"],
        [*LOCAL_PILOT, "--cases", "99999999", "--allow", "4"],  # pilot's own bound
        [*LOCAL_PILOT, "--cases", "4", "--allow", "4", "--timeout-s", "nan"],
        ["local-compare", "--label", "x", "--evidence-root", "R", "--n-ctx", "-1"],
        ["local-compare", "--label", "x", "--evidence-root", "R", "--timeout-s", "1e308"],
        ["local-model", "serve", "--port", "70000"],
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:]),
)
def test_local_flags_out_of_range_are_refused(small: Path, tmp_path: Path, argv: list[str]) -> None:
    names = {"P": str(small), "R": str(tmp_path / "r"), "D": str(design_file(tmp_path))}
    refused([names.get(a, a) for a in argv], "argument")
    assert not (tmp_path / "r").exists()
