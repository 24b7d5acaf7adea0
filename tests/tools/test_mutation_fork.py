"""mutmut forks each mutant's tests from one process: one killed mid-bar must not block the next.

tests/conftest.py gives tqdm a thread lock for this; with tqdm's default multiprocessing lock the
second child below waits forever (seen as a run of false timeouts in run.session).
"""

from __future__ import annotations

import os
import signal
import time

import tqdm


def _wait(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


def test_a_child_killed_holding_the_bar_lock_does_not_block_a_sibling() -> None:
    with open(os.devnull, "w") as sink, tqdm.tqdm(total=1, file=sink):
        pass  # the parent has drawn a bar, as mutmut's first run of the suite does
    holder = os.fork()
    if holder == 0:  # pragma: no cover - child
        tqdm.tqdm.get_lock().acquire()
        time.sleep(60)
        os._exit(0)
    time.sleep(0.3)
    os.kill(holder, signal.SIGKILL)  # killed at its time limit, the lock still held
    os.waitpid(holder, 0)
    sibling = os.fork()
    if sibling == 0:  # pragma: no cover - child
        with open(os.devnull, "w") as sink, tqdm.tqdm(total=1, file=sink):
            pass
        os._exit(0)
    assert _wait(sibling, 10.0), "the next child waited on a lock its dead sibling held"
