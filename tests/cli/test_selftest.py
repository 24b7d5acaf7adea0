"""self-test runs without pytest and counts its checks."""

from __future__ import annotations

import subprocess
import sys


def test_self_test_runs_as_a_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "needlepoint", "self-test"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    last = out.stdout.strip().splitlines()[-1]
    ran, passed = int(last.split()[1]), int(last.split()[4])
    assert ran == passed and ran > 200


def test_profile_checks_pass_and_notice_a_changed_rule(monkeypatch) -> None:
    from needlepoint.cli import selftest
    from needlepoint.run import scoring

    checks = dict(selftest.profile_checks())
    assert len(checks) == 10 and all(checks.values()), checks
    # Scoring the reasoning too (no think split) must fail the think-block check.
    monkeypatch.setattr(scoring, "answer_of", _answer_without_think_split)
    changed = dict(selftest.profile_checks())
    assert not changed["a leading think block is not scored"]
    assert not changed["length with only reasoning is length_empty"]


def test_a_provider_that_raises_is_one_failed_check_named_by_its_function(monkeypatch) -> None:
    from needlepoint.cli import selftest

    def broken():
        yield "fine", True
        raise ValueError("no vectors")

    monkeypatch.setattr(selftest, "CHECK_PROVIDERS", (broken,))
    name = f"{broken.__module__}:{broken.__qualname__}"
    # The provider's checks count together or not at all: one failed check names it.
    assert selftest.run_checks() == [(f"{name} raised ValueError: no vectors", False)]


def test_the_scoring_checks_are_a_provider_imported_directly() -> None:
    from needlepoint.cli import selftest
    from needlepoint.run.scoring import scoring_selftest_checks

    assert scoring_selftest_checks in selftest.CHECK_PROVIDERS
    assert all(callable(p) for p in selftest.CHECK_PROVIDERS)


def _answer_without_think_split(choice, completion):
    from needlepoint.run.interpret import Answer

    message = choice.get("message") or {}
    content = choice.get("text") if completion else message.get("content")
    return Answer(choice.get("finish_reason"), message.get("role"), content, content, "")
