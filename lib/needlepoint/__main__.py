"""Allow `python -m needlepoint`."""

# Through the package's main, which imports the command modules inside its own guard: a Ctrl-C
# while they load is one line and exit 130, not a traceback.
from needlepoint.cli import main

raise SystemExit(main())
