"""An output folder written whole: the files of one analysis land together or not at all.

``analyze`` and ``compare`` write their documents and figures into a fresh temporary sibling
folder, which then replaces the old output folder in one step (two renames with Ctrl-C held
back between them). An interrupted analysis therefore leaves the earlier one whole, never new
figures beside an old ``analysis.json``; a reader never sees a mix.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.safeio import fsync_dir, umask


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C back for a few system calls that must happen together (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# What a command writes into an output folder it owns: documents, tables and figures.
OUTPUT_SUFFIXES = (".json", ".md", ".png", ".csv")


def is_output_file(name: str) -> bool:
    """Whether ``name`` looks like a file an analysis or comparison writes (and may replace)."""
    return name.endswith(OUTPUT_SUFFIXES) and not name.startswith(".")


@contextlib.contextmanager
def replaced_folder(target: str | os.PathLike[str], owned: Callable[[str], bool]) -> Iterator[Path]:
    """Yield a fresh temporary sibling folder; when the block ends, it replaces ``target``.

    The files of one analysis therefore land together or not at all. An existing ``target``
    is replaced only if every entry in it is a file ``owned(name)`` accepts (an earlier output
    of the same command); anything else there, or a link at ``target``, is refused first.
    """
    out = Path(target)
    if out.is_symlink():
        raise NeedlepointError(f"{out}: is a symbolic link; an output folder is never a link")
    if out.exists():
        if not out.is_dir():
            raise NeedlepointError(f"{out}: exists and is not a folder")
        for name in sorted(os.listdir(out)):
            if not owned(name) or not stat.S_ISREG(os.lstat(out / name).st_mode):
                raise NeedlepointError(
                    f"{out}: holds {name!r}, which this command did not write; it replaces the "
                    "folder whole, so choose an empty or new folder"
                )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".new"))
    except OSError as exc:
        raise NeedlepointError(f"{out}: cannot create ({exc.strerror})") from None
    try:
        os.chmod(fresh, 0o777 & ~umask())
        yield fresh
        _swap(fresh, out)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


def _swap(fresh: Path, out: Path) -> None:
    old = None
    try:
        with _sigint_deferred():
            if out.exists():
                old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
                os.replace(out, old)
            try:
                os.replace(fresh, out)
            except OSError:
                if old is not None:  # put the earlier output back: never neither
                    os.replace(old, out)
                    old = None
                raise
    except OSError as exc:
        raise NeedlepointError(f"{out}: cannot replace ({exc.strerror})") from None
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
