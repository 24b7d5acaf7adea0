"""Every write into a user's folder, and every read of a record, goes through here.

A run or evidence folder is something people copy, share and unpack, so any name in it may be
a planted symbolic link (``results.csv.tmp -> ~/.bashrc``) or a FIFO. Therefore:

- a whole file is written to a *fresh* temporary sibling (``mkstemp``: ``O_CREAT | O_EXCL |
  O_NOFOLLOW``, a random name), fsynced and renamed over the target; a rename replaces a link
  itself and never writes through it, and a failed write removes its temporary file;
- an append (a journal, ``provenance.jsonl``) opens with ``O_NOFOLLOW``;
- a symbolic link or a non-regular file where a record should be is refused in one line;
- the files of one analysis or comparison are written into a fresh temporary sibling folder
  that then replaces the old output folder in one step (two renames with Ctrl-C held back
  between them), so an interrupted analysis leaves the earlier one whole and a reader never
  sees new figures beside an old ``analysis.json``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from needlepoint.errors import NeedlepointError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Bounds on any walk of a user's folder (an evidence root, a context folder): a symbolic link to
# a large or looping tree must end in one line, not exhaust the machine.
WALK_MAX_ENTRIES = 100_000
WALK_MAX_DEPTH = 64


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO")):
        if test(mode):
            return name
    return f"not a regular file ({stat.filemode(mode)})"


def refuse_special(path: str | os.PathLike[str]) -> None:
    """Refuse a symbolic link or a non-regular file at ``path`` (nothing there is fine)."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NeedlepointError(f"{p}: cannot inspect ({exc.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise NeedlepointError(
            f"{p}: is a symbolic link; a record is never written or read through a link"
        )
    if not stat.S_ISREG(st.st_mode):
        raise NeedlepointError(f"{p}: is {_kind(st.st_mode)} where a record should be")


def umask() -> int:
    # Read once (os.umask sets it too), so files keep the permissions open() would give them.
    with _LOCK:
        global _MASK
        if _MASK is None:
            _MASK = os.umask(0o022)
            os.umask(_MASK)
        return _MASK


_LOCK = threading.Lock()
_MASK: int | None = None


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Write a whole file through a fresh temporary sibling and a rename.

    A crash never leaves half a file; a full disk names ``path`` and leaves no temporary file.
    """
    write_chunks_atomic(path, (data,), fsync=fsync)


def write_chunks_atomic(
    path: str | os.PathLike[str], chunks: Iterable[bytes], *, fsync: bool = True
) -> None:
    """``write_bytes_atomic`` for a file produced piece by piece (never whole in memory)."""
    p = Path(path)
    refuse_special(p)
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        if not p.parent.is_dir():
            raise NeedlepointError(f"{p}: cannot write: {p.parent} is not a folder") from None
        raise NeedlepointError(f"{p}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~umask())
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise NeedlepointError(f"{p}: cannot write ({exc.strerror})") from None
        raise
    if fsync:
        fsync_dir(p.parent)


def open_record(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` for a record file: never through a link, never anything but a regular file.

    ``O_NONBLOCK`` keeps a FIFO planted at the name from blocking the open.
    """
    p = Path(path)
    try:
        fd = os.open(p, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) or (exc.errno == errno.ENXIO):
            refuse_special(p)
        raise NeedlepointError(f"{p}: cannot open ({exc.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NeedlepointError(f"{p}: is {_kind(st.st_mode)} where a record should be")
    os.set_blocking(fd, True)
    return fd


def open_append(path: str | os.PathLike[str]) -> BinaryIO:
    """A record file opened for appending (created if new), refused if it is a link."""
    fd = open_record(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return os.fdopen(fd, "ab")


def append_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Append ``data`` to a record file durably; a full disk names the file."""
    with open_append(path) as fh:
        try:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        except OSError as exc:
            raise NeedlepointError(f"{path}: cannot append ({exc.strerror})") from None


def open_read(
    path: str | os.PathLike[str], *, follow: bool = False, pipes: bool = False
) -> BinaryIO:
    """Open a file for reading: a regular file only (a FIFO planted in a folder never blocks
    the reader).

    Records of a run folder are read with ``follow=False`` (a link is refused); input files a
    user names may be links to regular files, and with ``pipes`` a pipe (``<(...)``, stdin).
    """
    p = Path(path)
    if follow:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise NeedlepointError(f"{p}: cannot read ({exc.strerror})") from None
        st = os.fstat(fd)
        piped = pipes and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode))
        if not stat.S_ISREG(st.st_mode) and not piped:
            os.close(fd)
            raise NeedlepointError(f"{p}: is {_kind(st.st_mode)}, not a file to read")
        os.set_blocking(fd, True)
    else:
        if not os.path.lexists(p):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(p))
        fd = open_record(p, os.O_RDONLY)
    return os.fdopen(fd, "rb")


def read_limited(
    path: str | os.PathLike[str], limit: int, *, follow: bool = True, pipes: bool = False
) -> bytes:
    """A whole input file, refused in one line when it is larger than ``limit`` bytes."""
    p = Path(path)
    try:
        with open_read(p, follow=follow, pipes=pipes) as fh:
            size = os.fstat(fh.fileno()).st_size
            if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) and size > limit:
                raise NeedlepointError(
                    f"{p}: {size} bytes, larger than the limit of {limit} bytes; not read"
                )
            # In pieces: read(limit + 1) would allocate the whole limit up front.
            pieces, total = [], 0
            while total <= limit and (piece := fh.read(min(1 << 20, limit + 1 - total))):
                pieces.append(piece)
                total += len(piece)
            data = b"".join(pieces)
    except FileNotFoundError:
        raise NeedlepointError(f"{p}: file not found") from None
    except OSError as exc:
        raise NeedlepointError(f"{p}: cannot read ({exc.strerror})") from None
    if len(data) > limit:
        raise NeedlepointError(f"{p}: larger than the limit of {limit} bytes; not read")
    return data


@contextlib.contextmanager
def shared_lock(path: str | os.PathLike[str]) -> Iterator[bool]:
    """Hold ``flock(LOCK_SH)`` on a lock file while reading; yield True when a writer holds it
    exclusively (the reader then reads a consistent snapshot instead of waiting).

    A reader never waits, and never creates the lock file: no file means no writer.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            live = False
        except BlockingIOError:
            live = True
        except OSError:
            live = False
        yield live
    finally:
        os.close(fd)


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


def relative_path(target: str | os.PathLike[str], start: str | os.PathLike[str]) -> str:
    """``target`` relative to the folder ``start``, with forward slashes: how records name
    another folder, so that no machine path lands in them."""
    return Path(os.path.relpath(Path(target).resolve(), Path(start).resolve())).as_posix()
