"""Reading files a student handed in: regular files only, never blocking, never unbounded.

A student folder can hold anything `unzip` or `cp -a` can make: named pipes (opening one for
reading blocks until a writer comes), device nodes, sockets, symbolic links to files elsewhere,
hard links to a classmate's file. Every read of a submission's file goes through `open_regular`:
O_NONBLOCK (a FIFO opens at once instead of blocking), O_NOFOLLOW (a link is refused, not
followed), then fstat on what was actually opened (no race between a check and the open) and a
refusal of anything that is not a regular file with exactly one link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class Refused(OSError):
    """A file that is not read: the message says why, for the student (it names no path)."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def refusal(st: os.stat_result) -> str | None:
    """Why a file with this (l)stat is not read, or None when it may be."""
    if not stat.S_ISREG(st.st_mode):
        return f"is {kind_of(st.st_mode)}, not a regular file"
    if st.st_nlink > 1:
        # A hard link shares its bytes with another file (a classmate's, say): whose work it is
        # cannot be told, so it is not graded as this student's.
        return "is a hard link to another file (it has several names), not a file of its own"
    return None


def open_regular(path: Path | str) -> tuple[int, os.stat_result]:
    """An fd open for reading on `path`, and its fstat; raises `Refused` for a symbolic link, a
    FIFO, a device, a socket, a folder or a hard link, OSError when it cannot be opened.
    Never blocks."""
    # lstat first: opening a device can have effects of its own; fstat after the open decides.
    why = refusal(os.lstat(path))
    if why is not None:
        raise Refused(why)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
                     | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno in (getattr(os, "ELOOP", 40), getattr(os, "EMLINK", 31)):
            raise Refused("is a symbolic link and was not followed") from None
        if exc.errno == getattr(os, "ENXIO", 6):  # a socket, or a FIFO opened write-only
            raise Refused("is a socket, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        why = refusal(st)
        if why is not None:
            raise Refused(why)
        return fd, st
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path | str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the regular file at `path` (so that a caller can tell a file
    over `limit` from one at it); raises `Refused` / OSError like `open_regular`."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit + 1)
