"""The ``needlepoint`` command line: one module per command group, dispatched by ``main``."""

from needlepoint.cli.app import main

__all__ = ["main"]
