"""The session's own small pieces, at their interface (the loop itself is tested in test_loop)."""

from __future__ import annotations

from needlepoint.run.session import Stop


def test_a_stop_reads_as_its_reason_and_keeps_its_detail() -> None:
    stop = Stop("max_consecutive_failures", "3 in a row")
    assert (str(stop), stop.args) == ("max_consecutive_failures", ("max_consecutive_failures",))
    assert (stop.reason, stop.detail) == ("max_consecutive_failures", "3 in a row")
