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
