"""Writing a result: results.json, a submission's files, each written atomically (a temporary
file renamed into place) so that an interrupted run never leaves a half-written result behind;
the lock a `torchgrade grade` run holds on OUT. Writers never change the result they write."""

from __future__ import annotations

import glob
import os
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.models import SubmissionResult


def current_umask() -> int:
    """This process's umask, read without changing it (`os.umask` sets it process-wide, which a
    thread writing a report at the same moment would see); 0o022 where /proc cannot say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C during the block is raised (KeyboardInterrupt) once the block is done: for a few
    files that belong together (the class files: a Ctrl-C at the end of a run left none). Only
    in the main thread (the only one that receives signals), where Ctrl-C is not ignored; a
    no-op elsewhere."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # (a background job's)
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def write_atomic(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    # As `open` would create it: mkstemp's 0600 would hide reports from a web server or a TA,
    # and a fixed 0644 would show them where the user's umask says not to.
    os.fchmod(fd, 0o666 & ~current_umask())
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def writable_problem(path: Path) -> str | None:
    """Why `write_atomic(path, ...)` would fail, or None when it should not: checked before a
    long run whose result goes to `path`, so that a bad output path is said at once, not after
    the work. The nearest existing folder on the way must be a writable folder (tried with a
    file of our own where `path`'s folder exists: root's `os.access` says yes to anything) and
    `path` itself not a folder."""
    path = Path(path)
    if path.is_dir():
        return "is a folder"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if folder != path.parent:
        return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder} is not writable"
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        return f"{folder} is not writable ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(tmp)
    return None


def results_json(result: SubmissionResult) -> str:
    return result.model_dump_json(indent=2)


def write_json(result: SubmissionResult, path: Path) -> None:
    write_atomic(path, results_json(result))


def read_json(path: Path) -> SubmissionResult:
    return SubmissionResult.model_validate_json(Path(path).read_text(encoding="utf-8"))


def remove_stale_temp_files(out: Path, students: Iterable[str] | None = None) -> int:
    """Delete the temporary files `write_atomic` leaves when its process is killed mid-write
    (in OUT and OUT/<student>/); only while no other run writes there (see `OutLock`). With
    `students` (a sharded run, which shares OUT with other shards), only in those students'
    folders: another shard's temporary file is a result being written."""
    removed = 0
    out = Path(out)
    patterns = ((".*.tmp", "*/.*.tmp") if students is None
                else tuple(f"{glob.escape(s)}/.*.tmp" for s in students))
    for pattern in patterns:
        for path in out.glob(pattern):
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
    return removed


class OutLock:
    """A lock on OUT for one `torchgrade grade` run (flock: released by the kernel even when the
    run is killed). Exclusive by default; `shared=True` for the shards of a job array, which
    write into OUT at once (each also holds its own shard's lock exclusively) while an
    unsharded run or `torchgrade index` must wait for all of them. Raises BlockingIOError when
    the lock is taken. An exclusive holder removes the file when done; shared ones leave it."""

    NAME = ".torchgrade.lock"

    def __init__(self, out: Path, *, name: str | None = None, shared: bool = False):
        self.path = Path(out) / (name or self.NAME)
        self.shared = shared
        self.fd: int | None = None

    def __enter__(self) -> OutLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise
            # Another holder may have removed the file between our open and our lock: a lock
            # on that unlinked file would guard nothing. Retry on the file now at the path.
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    self.fd = fd
                    return self
            except FileNotFoundError:
                pass
            os.close(fd)

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        if not self.shared:  # shared holders leave the file: another shard may hold it
            try:
                self.path.unlink()
            except OSError:
                pass
        os.close(self.fd)
        self.fd = None


def printable(text: str) -> str:
    """`text` as valid UTF-8 (lone surrogates and undecodable bytes shown as \\x.. escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def escaped(result: SubmissionResult) -> SubmissionResult:
    """A copy of `result` whose every string (and dict key) is valid UTF-8."""
    def clean(value):
        if isinstance(value, str):
            return printable(value)
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return SubmissionResult.model_validate(clean(result.model_dump()))

