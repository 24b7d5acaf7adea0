"""Allow `python -m needlepoint`."""

from needlepoint.cli.app import main

raise SystemExit(main())
