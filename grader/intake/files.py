"""Reading files a student handed in: regular files only, never blocking, never unbounded.

A student folder can hold anything `unzip` or `cp -a` can make: named pipes (opening one for
reading blocks until a writer comes), device nodes, sockets, symbolic links to files elsewhere,
hard links to a classmate's file. Every read of a submission's file goes through `open_regular`:
O_NONBLOCK (a FIFO opens at once instead of blocking), O_NOFOLLOW (a link is refused, not
followed), then fstat on what was actually opened (no race between a check and the open) and a
refusal of anything that is not a regular file with exactly one link, unless the link is the
student's own (`own_links`, decided for the whole class by `class_hard_links`).
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

Inode = tuple[int, int]  # (st_dev, st_ino)
# The hard-linked files the submission being read may use as its own (see `own_links`); None:
# every one (a student checking their own work on their own machine).
_own_links: frozenset[Inode] | None = frozenset()
MAX_LINK_SCAN = 50_000  # names looked at per student by `class_hard_links`


# Why a hard-linked file is not read (in the student's notes; the run counts them by it).
HARD_LINK_REFUSED = ("is a hard link to a file that also lies elsewhere (in another student's "
                     "folder, or outside the class), not a file of its own")


class Refused(OSError):
    """A file that is not read: the message says why, for the student (it names no path)."""


# A file system gives names of at most 255 bytes; a zip's listing may hold a member name of any
# length, and every later step (matching an exercise, an LMS's pattern, a note) looks at each
# character: a member whose name is longer than these is skipped before anything matches it.
MAX_NAME_CHARS = 255   # one part of a path
MAX_PATH_CHARS = 1024  # the whole path


def overlong(name: str) -> bool:
    """Whether a member name (`a/b/c.py`) is too long to be looked at (`MAX_NAME_CHARS`,
    `MAX_PATH_CHARS`); linear in its length."""
    return len(name) > MAX_PATH_CHARS or any(len(p) > MAX_NAME_CHARS for p in name.split("/"))


def zip_entry_bound(f, bytes_per_entry: int) -> int:
    """How many entries a zip declares, at least (its end record's count, or its listing's size
    over `bytes_per_entry`), read before zipfile parses the listing (which it does whole,
    whatever the count): callers refuse a zip over their limit without that cost."""
    # The stdlib's own end-record reader and its indices: private, so typeshed lists none.
    end = zipfile._EndRecData(f)  # type: ignore[attr-defined]  # noqa: SLF001
    if end is None:
        raise zipfile.BadZipFile("no end of central directory record")
    f.seek(0)
    declared = int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]  # noqa: SLF001
    listing = int(end[zipfile._ECD_SIZE])  # type: ignore[attr-defined]  # noqa: SLF001
    return max(declared, listing // bytes_per_entry)


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
    if st.st_nlink > 1 and _own_links is not None and (st.st_dev, st.st_ino) not in _own_links:
        # A hard link shares its bytes with another file (a classmate's, the solution): it is
        # graded only as the work of the student who had it first (`class_hard_links`).
        return HARD_LINK_REFUSED
    return None


@contextmanager
def own_links(inodes: Iterable[Inode] | None) -> Iterator[None]:
    """While reading one submission: its hard-linked files in `inodes` are read as its own
    (None: every hard link is, as when students check their own work)."""
    global _own_links
    saved = _own_links
    _own_links = None if inodes is None else frozenset(tuple(i) for i in inodes)  # type: ignore[misc]
    try:
        yield
    finally:
        _own_links = saved


def class_hard_links(students: Iterable[tuple[str, Path]]) -> dict[str, set[Inode]]:
    """Which student owns each hard-linked file of a class: {student: inodes they may read}.

    A file with several names is the work of one student only when every one of its names lies
    in this class: then of the student whose name for it sits in the folder changed least
    recently (a link can only be made to a file that already exists, so the copy made by
    `ln` is the later one). A file with a name outside the class (the solution, a file of
    another course) is nobody's. Bounded: at most MAX_LINK_SCAN names per student, symbolic
    links never followed, nothing opened."""
    return link_owners((student, full) for student, path in students
                       for full in _walk(Path(path)))


def link_owners(files: Iterable[tuple[str, str | Path]]) -> dict[str, set[Inode]]:
    """`class_hard_links` over (student, file path) pairs: each hard-linked file whose every
    name is among `files` belongs to the student whose name for it sits in the folder changed
    least recently (then the lowest id); one with a name elsewhere is nobody's. Nothing is
    opened, links are never followed."""
    names: dict[Inode, list[tuple[int, str]]] = {}
    links: dict[Inode, int] = {}
    seen: set[str] = set()
    for student, full in files:
        full = os.fspath(full)
        if full in seen:
            continue
        seen.add(full)
        try:
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
                continue
            folder = os.lstat(os.path.dirname(full) or ".")
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        links[key] = st.st_nlink
        names.setdefault(key, []).append((folder.st_mtime_ns, student))
    owned: dict[str, set[Inode]] = {}
    for key, found in names.items():
        if len(found) < links[key]:
            continue  # a name outside the class
        owner = min(found)[1]
        owned.setdefault(owner, set()).add(key)
    return owned


def _walk(path: Path) -> Iterator[str]:
    if not path.is_dir():
        yield str(path)
        return
    seen = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        seen += len(filenames) + len(dirnames)
        if seen > MAX_LINK_SCAN:
            return
        for name in filenames:
            yield os.path.join(dirpath, name)


def member_name(info: zipfile.ZipInfo) -> str:
    """A zip member's name as a file system would give it: its bytes read as UTF-8, any that
    are not kept as surrogate escapes (`grader.intake.submission.safe_id` makes them `%XX`, as
    for a folder's name). zipfile reads a name without the zip's UTF-8 flag as CP437, which
    made `café` from Linux's `zip` (UTF-8 bytes, no flag) the student `caf├⌐`."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        raw = info.filename.encode("cp437")
    except UnicodeEncodeError:  # (not a name zipfile decoded as CP437)
        return info.filename
    return raw.decode("utf-8", "surrogateescape")


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
