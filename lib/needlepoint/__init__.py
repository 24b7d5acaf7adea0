"""needlepoint: frozen, audited context-retrieval experiments on LLMs."""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _quiet_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C while the command line is still loading: one line and exit 130, no traceback."""
    if _sys.stderr is not None:
        _sys.stderr.write("needlepoint: interrupted\n")
    _os._exit(130)


# Only for the `needlepoint` console script, whose first act is to import this package: a
# Ctrl-C in its first moments printed a traceback of the imports. The command line restores
# Python's handler (KeyboardInterrupt) before any command runs; a notebook or a library user
# (no such argv[0]) is never touched.
if _sys.argv and _os.path.basename(_sys.argv[0]) == "needlepoint":
    import _signal  # the built-in module: `signal` itself imports enum and functools (slow)

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _quiet_interrupt)
