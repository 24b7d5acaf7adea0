"""The kernel is started with encrypted channels and stopped without a signal (no noise)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from jupyter_client.manager import AsyncKernelManager

from needlepoint.notebook import pipeline


def test_a_kernel_being_shut_down_is_not_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupt jupyter_client sends before a shutdown made ipykernel log
    ``KeyboardInterrupt caught in kernel``; a running cell can still be interrupted."""
    sent: list[str] = []

    async def interrupt(self: AsyncKernelManager) -> None:
        sent.append("SIGINT")

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = pipeline.quiet_manager_class()(kernel_name=pipeline.KERNEL)
    asyncio.run(manager._async_interrupt_kernel())
    assert sent == ["SIGINT"]
    manager.shutting_down = True
    asyncio.run(manager._async_interrupt_kernel())
    assert sent == ["SIGINT"]


def test_jupyter_config_sets_encryption_and_keeps_other_settings(tmp_path: Path) -> None:
    path = pipeline.write_jupyter_config(tmp_path)
    assert path == tmp_path / "etc" / "jupyter" / "jupyter_config.json"
    policy = json.loads(path.read_text())["KernelManager"]["transport_encryption"]
    assert policy in ("auto", "disabled")
    path.write_text(json.dumps({"KernelManager": {"shutdown_wait_time": 3}, "Other": {"x": 1}}))
    pipeline.write_jupyter_config(tmp_path)
    assert json.loads(path.read_text()) == {
        "KernelManager": {"shutdown_wait_time": 3, "transport_encryption": policy},
        "Other": {"x": 1},
    }
    path.write_text("not json")
    pipeline.write_jupyter_config(tmp_path)
    assert json.loads(path.read_text()) == {"KernelManager": {"transport_encryption": policy}}
