"""Work that grows past the limits, third round: every size limit is a total, checked before
the work it bounds, and what passes a check fits the time and memory the limits promise.

Each test names the issue-39 class it guards.
"""

from __future__ import annotations

import json
import os
import signal
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from support.fuzz import bad_outcome, run_cli

from needlepoint.analysis.record import AnalysisParameters
from needlepoint.analysis.robustness import _from_decision, leave_one_out
from needlepoint.design import schema
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError


def _refused(argv: list[str]) -> str:
    code, out, err = run_cli(argv)
    assert bad_outcome(argv, code, out, err) is None, (code, err)
    assert code == 2 and len(err.splitlines()) == 1, (code, out, err)
    return err


# Class 13: power's size limit is a total, like calibrate's.
def test_power_refuses_a_grid_whose_total_work_is_hours(tmp_path: Path) -> None:
    from support.fuzz import SMALL

    (tmp_path / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    prepared = tmp_path / "p"
    assert (
        run_cli(["prepare", "--out", str(prepared), "--protocol", str(tmp_path / "small.json")])[0]
        == 0
    )
    cases = [str(n) for n in range(2, 52)]  # 50 designs
    effects = [f"{i / 10_000:.4f}" for i in range(1000)]  # 1,000 added losses
    argv = ["power", "--prepared", str(prepared), "--cases", ",".join(cases)]
    argv += ["--effects", ",".join(effects)]
    argv += ["--simulations", "5000", "--out", str(tmp_path / "power")]

    def stuck(signum: int, frame: object) -> None:
        raise TimeoutError("power started hours of work instead of refusing it")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    try:
        err = _refused(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert "case-operations" in err and "limit" in err, err[:300]
    assert not (tmp_path / "power").exists()


def test_power_work_counts_every_point() -> None:
    from needlepoint.analysis.power import MAX_POWER_WORK, PowerStudy, check_size, power_work

    protocol = reference_protocol()
    default = power_work(PowerStudy(), protocol)
    assert default < MAX_POWER_WORK / 10  # the notebook's grid runs in seconds
    wide = PowerStudy(cases=(8, 16, 32), effects=(0.1,) * 26, simulations=1000)
    assert power_work(wide, protocol) == 2 * default  # twice the effects, twice the work
    hours = PowerStudy(cases=tuple(range(2, 52)), effects=(0.01,) * 1000, simulations=5000)
    with pytest.raises(NeedlepointError, match="case-operations"):
        check_size(hours, protocol)


# Class 14: leave-one-out about linear in cases, and the same scenarios as deciding afresh.
@pytest.mark.parametrize("n", [13, 14, 40, 120])
def test_leave_one_out_equals_deciding_again_without_each_case(n: int) -> None:
    params = AnalysisParameters.of(reference_protocol())
    rng = np.random.default_rng(n)
    for _ in range(2):
        nums = [int(x) for x in rng.integers(-3, 5, n)]
        cases = [f"case-{i}" for i in range(n)]
        fresh = tuple(
            _from_decision(
                "leave one out", f"without {c}", (), [*nums[:i], *nums[i + 1 :]], 4, params, "x"
            )
            for i, c in enumerate(cases)
        )
        assert leave_one_out(cases, nums, 4, params, "x") == fresh


def test_leave_one_out_grows_about_linearly_in_cases() -> None:
    params = AnalysisParameters.of(reference_protocol())
    rng = np.random.default_rng(7)
    spent = {}
    for n in (100, 800):
        nums = [int(x) for x in rng.integers(-2, 5, n)]
        cases = [str(i) for i in range(n)]
        start = time.process_time()
        leave_one_out(cases, nums, 4, params, "supported")
        spent[n] = time.process_time() - start
    # 8 times the cases: about 8 times the work (64 times for the old quadratic way). Generous
    # for a loaded machine; benchmarks/bench_leave_one_out.py measures it properly.
    assert spent[800] < 30 * max(spent[100], 0.01), spent


# Class 15: what passes prepare fits the memory the limits promise when audited and run.
def test_a_design_past_the_prepared_limit_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "big.json").write_text(
        json.dumps({"version": 2, "cases": 4, "lengths": [100_000, 99_000]}), encoding="utf-8"
    )
    err = _refused(
        ["prepare", "--out", str(tmp_path / "p"), "--protocol", str(tmp_path / "big.json")]
    )
    assert f"limit {schema.MAX_PREPARED_BYTES // 2**20} MiB" in err
    assert not (tmp_path / "p").exists()


def test_audit_and_run_fit_the_memory_promise_at_the_prepared_limit(tmp_path: Path) -> None:
    protocol = {"version": 2, "cases": 4, "lengths": [3000, 2900]}
    (tmp_path / "p.json").write_text(json.dumps(protocol), encoding="utf-8")
    prepared = tmp_path / "p"
    assert (
        run_cli(["prepare", "--out", str(prepared), "--protocol", str(tmp_path / "p.json")])[0] == 0
    )
    size = sum(os.path.getsize(prepared / f) for f in ("requests.jsonl", "answer_key.jsonl"))
    run = ["run", str(prepared), "--allow", "2", "--run-dir", str(tmp_path / "r")]
    for argv in (
        ["verify", str(prepared)],
        ["audit", str(prepared)],
        [*run, "--simulate", "perfect", "--no-progress"],
    ):
        tracemalloc.start()
        try:
            code = run_cli(argv)[0]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert code == 0
        # Peak memory grows in proportion to the prepared files; at the limit, with the
        # interpreter's own 64 MiB, it must stay within the promise.
        at_limit = peak / size * schema.MAX_PREPARED_BYTES + (64 << 20)
        assert at_limit <= schema.MEMORY_PROMISE, f"{argv[0]}: {at_limit / 2**20:.0f} MiB"
