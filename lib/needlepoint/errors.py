"""The one exception type that the CLI turns into a one-line message and exit status 2."""


class NeedlepointError(Exception):
    """Bad input or a refused operation: shown to the user as one line, never a traceback."""
