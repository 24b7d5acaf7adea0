"""What a person reads when something is off: each message names the problem and the way on.

No value that looks like a key is ever printed back; a mistyped flag is named with the nearest
one; a prepared folder given where a run folder belongs is called what it is; `run` complains
about a wrong folder before a wrong key; a resume names every setting that differs from
run.json and carries the recorded gap override; a spent allowance says how to continue.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.errors import NOT_SHOWN, looks_like_secret, redact_secrets

SECRET = "sk-abc123secret"


def _err(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _live(prepared: Path, run: Path, *extra: str) -> list[str]:
    return [
        *["run", str(prepared), "--allow", "4", "--run-dir", str(run)],
        *["--base-url", "https://api.example/v1", "--model", "agnes-3.0-flash", *extra],
    ]


def test_a_key_given_as_the_variable_name_is_never_echoed(
    reference_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(_live(reference_dir, tmp_path / "r", "--api-key-env", SECRET), capsys)
    assert code == 2 and SECRET not in out + err
    assert err == (
        "needlepoint run: error: --api-key-env takes the NAME of the environment variable that "
        "holds the key (letters, digits and _, e.g. OPENAI_API_KEY), not the key itself; the "
        "value given is not shown\n"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "p", "--allow", "4", "--run-dir", "r", "--simulate", SECRET],
        ["run", "p", "--allow", "4", "--run-dir", "r", "--simulate", "perfect", SECRET],
        ["run", "p", "--allow", "4", "--run-dir", "r", f"--token={SECRET}"],
        ["power", "--seed", SECRET],
        ["analyze", "--results", "x.csv", "--prepared", "p", "--out", "o", "--bearer", SECRET],
    ],
    ids=["choice", "extra argument", "unknown flag=value", "typed value", "unknown flag value"],
)
def test_usage_errors_never_echo_a_key(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = _err(argv, capsys)
    assert SECRET not in err and err.count("\n") == 1


def test_refusals_never_echo_a_key(
    reference_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("NP_KEY", "a-long-enough-key")
    argv = _live(reference_dir, tmp_path / "r", "--api-key-env", "NP_KEY")
    argv[argv.index("--model") + 1] = "sk-live-0123456789"  # the key pasted in the wrong place
    code, _, err = _run(argv, capsys)
    assert code == 2 and "differs from the frozen model" in err
    assert "sk-live-0123456789" not in err and NOT_SHOWN in err


def test_what_looks_like_a_key() -> None:
    for key in (SECRET, "sk_live_0123456789", "ghp_0123456789abcdef", "AKIAIOSFODNN7EXAMPLE"):
        assert looks_like_secret(key), key
    assert looks_like_secret("Bearer abc.def") and looks_like_secret("aB3dE5fG7hJ9kL1mN3pQ5rS7")
    for word in ("OPENAI_API_KEY", "Meta-Llama-3.1-8B-Instruct", "agnes-3.0-flash", "sk-abc"):
        assert not looks_like_secret(word), word
    sha = "933f444ef0b1c30b34603ec4dee36dd7978f0e5ea7a7153cff0de857cb67366e"
    assert redact_secrets(f"run 20261201-offline-145607 sha {sha}") == (
        f"run 20261201-offline-145607 sha {sha}"
    )
    assert redact_secrets(f"variable '{SECRET}'.") == f"variable '{NOT_SHOWN}'."


def test_an_unknown_flag_is_named_with_the_nearest_known_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --allow is required: the missing flag used to be reported instead of the typo
    err = _err(["run", "prepared", "--alow", "16", "--run-dir", "run"], capsys)
    assert err == (
        "needlepoint run: error: unknown flag --alow (did you mean --allow?) "
        "(see needlepoint run --help)\n"
    )
    err = _err(["run", "p", "--allow", "16", "--run-dir", "r", "--simulte", "perfect"], capsys)
    assert "unknown flag --simulte (did you mean --simulate?)" in err
    assert "argument" not in err  # the flag's value is not a second problem
    err = _err(["alnyze", "run"], capsys)
    assert err == (
        "needlepoint: error: argument COMMAND: invalid choice: 'alnyze' (did you mean "
        "'analyze'?) (see needlepoint --help)\n"
    )
    err = _err(["run", "p", "--allow", "1", "--run-dir", "r", "--simulate", "postion"], capsys)
    assert "invalid choice: 'postion' (did you mean 'position'?)" in err


def test_analyze_names_a_prepared_folder_for_what_it_is(
    reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["analyze", str(reference_dir)], capsys)
    assert code == 2
    assert err == (
        f"needlepoint analyze: error: {reference_dir}: is a prepared folder (plan.csv, "
        "manifest.json; no run.json), not a run folder: this command takes the run folder that "
        f"`needlepoint run {reference_dir} --run-dir RUNDIR ...` writes\n"
    )
    for command in ("results", "audit-run"):
        code, _, err = _run([command, str(reference_dir)], capsys)
        assert code == 2 and "is a prepared folder" in err, (command, err)


def test_run_complains_about_the_folder_before_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SHORT_KEY", "abc")
    missing = tmp_path / "nope"
    code, _, err = _run(_live(missing, tmp_path / "r", "--api-key-env", "SHORT_KEY"), capsys)
    assert code == 2 and str(missing) in err and "shorter than" not in err, err
    afile = tmp_path / "file"
    afile.write_text("x")
    code, _, err = _run(_live(missing, afile, "--api-key-env", "SHORT_KEY"), capsys)
    assert err == f"needlepoint run: error: {afile}: exists and is not a folder\n"


def _sim(prepared: Path, run: Path, allow: int, *extra: str) -> list[str]:
    return [
        *["run", str(prepared), "--allow", str(allow), "--run-dir", str(run)],
        *["--simulate", "perfect", "--no-progress", *extra],
    ]


def _sessions(run: Path) -> list[dict]:
    lines = (run / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "session"]


def test_a_spent_allowance_says_how_to_continue(
    reference_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code, out, _ = _run(_sim(reference_dir, run, 16), capsys)
    assert code == 0
    assert out.splitlines()[0] == (
        "SIMULATION - not a model result. stopped: allowance_spent: 16 attempts recorded, "
        "--allow 16"
    )
    assert out.splitlines()[-1] == (
        "to continue: run the same command again with a larger total --allow (it counts every "
        "attempt in this run folder): --allow 128 sends the 112 planned requests not yet "
        "attempted"
    )
    code, _, err = _run(_sim(reference_dir, run, 16), capsys)
    assert code == 2 and "resuming never grants fresh budget" in err
    assert "--allow 128 sends the 112 planned requests" in err


def test_a_resume_names_every_setting_that_differs_from_run_json(
    reference_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert _run(_sim(reference_dir, run, 4), capsys)[0] == 0
    code, out, _ = _run(_sim(reference_dir, run, 6, "--timeout-s", "60"), capsys)
    assert code == 0
    assert out.splitlines()[0] == (
        f"resuming {run}; settings that differ from run.json: --allow 6 (run.json: 4); "
        "--timeout-s 60 (run.json: 120); the request deadline (twice --timeout-s) 120 "
        "(run.json: 240)"
    )
    code, out, _ = _run(_sim(reference_dir, run, 6), capsys)  # spent: refused, nothing sent
    code, out, _ = _run(_sim(reference_dir, run, 8, "--timeout-s", "60"), capsys)
    assert out.splitlines()[0].startswith(f"resuming {run}; settings that differ from run.json")


def test_a_resume_carries_the_recorded_gap_override(
    reference_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    lowered = ["--min-gap-s", "1", "--override-reason", "loopback server"]
    assert _run(_sim(reference_dir, run, 4, *lowered), capsys)[0] == 0
    code, out, _ = _run(_sim(reference_dir, run, 8), capsys)  # neither gap flag again
    assert code == 0
    assert out.splitlines()[0] == (
        f"resuming {run}; the recorded gap override is carried: --min-gap-s 1 (protocol 20 s), "
        "reason 'loopback server'; settings that differ from run.json: --allow 8 (run.json: 4)"
    )
    assert [(s["min_gap_s"], s["override_reason"]) for s in _sessions(run)] == [
        (1.0, "loopback server"),
        (1.0, "loopback server"),
    ]
    # asked for the protocol's gap again: done, and said
    code, out, _ = _run(_sim(reference_dir, run, 10, "--min-gap-s", "20"), capsys)
    assert code == 0 and "carried" not in out.splitlines()[0]
    assert (
        "--min-gap-s 20 (run.json: 1); --override-reason none (run.json: 'loopback server')"
        in (out.splitlines()[0])
    )
    assert _sessions(run)[-1]["min_gap_s"] == 20.0
