"""Rewrite, or check, the generated tables of a study folder's README.md from its files.

    python tools/study_readme.py evidence/20261201-declared-study          # rewrite the blocks
    python tools/study_readme.py evidence/20261201-declared-study --check  # exit 1 if stale

The narrative stays as written; only the marked blocks (needlepoint.study.readme) change. The
evidence root whose registry is listed is the folder's parent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.study.readme import fill, study_blocks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--check", action="store_true", help="only say whether the blocks are stale")
    args = ap.parse_args(argv)
    readme = args.folder / "README.md"
    try:
        text = readme.read_text(encoding="utf-8")
        new = fill(text, study_blocks(args.folder, args.folder.resolve().parent))
    except (OSError, NeedlepointError) as exc:
        print(f"study_readme: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{readme}: {'up to date' if new == text else 'stale'}")
        return 0 if new == text else 1
    if new != text:
        readme.write_text(new, encoding="utf-8")
    print(f"{readme}: {'rewritten' if new != text else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
