"""Progress of a run in a notebook goes to the terminal, never into the saved notebook."""

from __future__ import annotations

import io
import os
import pty
import sys

import pytest

from needlepoint.run.progress import Progress, terminal_stream


def _read_all(fd: int) -> str:
    """Everything written to the terminal so far (a pty hands it over write by write)."""
    import select

    chunks = []
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def test_terminal_mode_draws_on_the_process_stderr_and_clears_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel's sys.stderr goes into the notebook, but its fileno() is the terminal's."""
    master, slave = pty.openpty()

    class KernelStream(io.StringIO):  # what ipykernel's OutStream looks like from here
        def fileno(self) -> int:
            return slave

    captured = KernelStream()
    monkeypatch.setattr(sys, "stderr", captured)
    bar = Progress("terminal", total=3, initial=0, label="SIMULATION")
    bar.sending(1, "-")
    bar.done(1, "correct", 20)
    bar.close("complete")
    drawn = _read_all(master)
    os.close(master)
    os.close(slave)
    assert "SIMULATION" in drawn and "seq=1 last=- sending" in drawn  # on the terminal
    assert drawn.rstrip("\r").endswith(" ") and drawn.endswith("\r")  # then cleared
    assert captured.getvalue() == ""  # nothing went into the notebook


def test_terminal_mode_draws_nothing_into_a_log(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open(tmp_path / "log", "w")  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", log)
    bar = Progress("terminal", total=3, initial=0, label="SIMULATION")
    bar.done(1, "correct", 20)
    bar.close("complete")
    log.close()
    assert (tmp_path / "log").read_text() == "" and bar.mode == "off"


def test_a_stream_without_a_descriptor_falls_back_to_the_real_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert terminal_stream() is sys.__stderr__
