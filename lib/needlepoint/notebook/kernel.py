"""The `needlepoint` Jupyter kernel: installed once, started quietly, stopped without noise.

Two messages reached a user's terminal that said nothing about their work: the kernel's warning
that it runs over TCP without encryption (once per notebook), and ``KeyboardInterrupt caught in
kernel``, because jupyter_client interrupts a kernel before every shutdown and a kernel still
finishing a message logs the interrupt as an error. Kernels started here get CurveZMQ keys from
their manager, and are shut down with a request, not a signal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

KERNEL = "needlepoint"
# Read by every Jupyter application of this environment (lab, nbconvert, server): kernels they
# start get manager-provisioned CurveZMQ keys where pyzmq supports Curve.
JUPYTER_CONFIG = Path("etc") / "jupyter" / "jupyter_config.json"


def ensure_kernel() -> None:
    """Install the pinned `needlepoint` kernelspec into this environment if it is missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL not in KernelSpecManager().find_kernel_specs():
        from ipykernel.kernelspec import install

        install(prefix=sys.prefix, kernel_name=KERNEL, display_name=KERNEL)


def _policy() -> str:
    import zmq

    return "auto" if zmq.has("curve") else "disabled"


def kernel_config() -> Any:
    """Kernel-manager settings for papermill: CurveZMQ-encrypted kernel channels.

    With keys provisioned by the manager the kernel no longer warns, once per notebook, that
    it runs over TCP without encryption. A pyzmq built without Curve keeps the default (and
    the kernel's warning, which is then true).
    """
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": _policy()}})


def write_jupyter_config(prefix: str | Path = sys.prefix) -> Path:
    """Give this environment's Jupyter applications the same setting (``make setup`` calls it).

    Other settings already in the file are kept; only the kernel manager's encryption policy is
    set.
    """
    path = Path(prefix) / JUPYTER_CONFIG
    config: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            loaded = None
        config = loaded if isinstance(loaded, dict) else {}
    manager = config.get("KernelManager")
    config["KernelManager"] = (manager if isinstance(manager, dict) else {}) | {
        "transport_encryption": _policy()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def quiet_manager_class() -> type:
    """An asynchronous kernel manager that does not interrupt a kernel it is shutting down.

    The shutdown request alone stops an idle kernel (the notebook has finished when papermill
    shuts it down); the interrupt sent before it only made a kernel that was still finishing a
    message log ``KeyboardInterrupt caught in kernel`` to the terminal.
    """
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):  # type: ignore[misc]
        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return QuietShutdownKernelManager


if __name__ == "__main__":  # `python -m needlepoint.notebook.kernel`: what make setup runs
    ensure_kernel()
    print(f"kernel {KERNEL}; Jupyter settings in {write_jupyter_config()}")
