"""The ``needlepoint`` command line: one module per command group, dispatched by ``main``.

The console script imports ``main`` from here; it imports the dispatcher only when called, so
that a Ctrl-C in the first moments (while the modules load) is one line and exit 130, never a
traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command (see ``needlepoint.cli.app.main``)."""
    try:
        from needlepoint.cli.app import main as run
    except KeyboardInterrupt:
        if sys.stderr is not None:
            print("needlepoint: interrupted", file=sys.stderr)
        return 130
    return run(argv)


__all__ = ["main"]
