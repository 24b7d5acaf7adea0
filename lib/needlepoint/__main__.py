"""Allow `python -m needlepoint`."""

from needlepoint.cli import main

raise SystemExit(main())
