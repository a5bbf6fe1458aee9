"""The worker side of grading on a cluster (`torchgrade grade --dask`): one submission per task,
graded by a warm grading process that lives as long as the cluster's worker.

A cluster worker (a Dask worker, for `grader.running.dask_cluster`) runs `grade_remote(job,
course)` for each submission: `job` carries the submission as the client read it (intake is the
client's: no shared filesystem is needed, and hard links, symbolic links and FIFOs were judged on
the machine that holds them) and the run's `PoolSettings`; `course` is the course folder as a zip
(`CourseBundle`), unpacked once per worker process into a local folder keyed by its digest.

The submission is graded exactly as in a local run: by `grader.running.pool.serve` (a zygote
started once, student code only in the sandboxed workers it forks: the same trust boundary), in a
grading process started on the worker's first task and kept for the next ones (no submission but
the first pays an `import torch`). That process writes the submission's outputs into a
worker-local OUT; `grade_remote` sends them back to the client as text (`RemoteOutcome`), which
writes them into the real OUT.

Nothing here imports dask: the cluster's worker calls a plain function.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from grader.course.location import COURSE_FOLDERS, COURSE_ROOT_FILES
from grader.running.pool import (MAX_ATTEMPTS, TASK_TIMEOUT, GradeTask, Graded, GradingSteps,
                                 PoolSettings, SandboxBroken, SandboxStarted, describe_exit)
from grader.worker import launch

log = logging.getLogger("torchgrade")

# What a submission's folder in OUT holds (grader.outputs.folder), results.json last: it vouches
# for the others, so it is written after them.
RESULT_FILES = ("report.html", "gradescope.json", "results.json")
MAX_COURSE_BYTES = 64 << 20     # a course folder is source code and small data: a few MB
MAX_COURSE_FILES = 20_000
START_TIMEOUT = 5 * 60.0        # a grading process's start: import torch, pytest, the zygote
STOP_TIMEOUT = 10.0
# Never part of a course's grading (fingerprint._digest hashes every .py file elsewhere, so
# everything else goes, hidden folders included: a worker checks it has the client's digest).
SKIPPED_DIRS = {"__pycache__", ".git"}


class CourseTooBig(ValueError):
    pass


@dataclass(frozen=True)
class CourseBundle:
    """A course folder as a zip: what a worker unpacks (once per digest) to grade with it."""

    digest: str
    data: bytes

    @classmethod
    def pack(cls, root: Path) -> CourseBundle:
        """Every file of the course folder `root` (its own: `COURSE_FOLDERS`; a linked file
        by its content; no caches, no linked folders), in a fixed order; the digest covers
        names and bytes, not times. Raises CourseTooBig past MAX_COURSE_BYTES or
        MAX_COURSE_FILES."""
        root = Path(root).resolve()
        h = hashlib.sha256()
        buffer = io.BytesIO()
        total = count = 0
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for dirpath, dirnames, filenames in os.walk(root):
                if Path(dirpath) == root:  # a course's own files only (COURSE_FOLDERS)
                    dirnames[:] = [d for d in dirnames if d in COURSE_FOLDERS]
                    filenames = [f for f in filenames if f in COURSE_ROOT_FILES]
                dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
                for name in sorted(filenames):
                    path = Path(dirpath) / name
                    if not path.is_file() or name.endswith(".pyc"):
                        continue
                    data = path.read_bytes()
                    total, count = total + len(data), count + 1
                    if total > MAX_COURSE_BYTES or count > MAX_COURSE_FILES:
                        raise CourseTooBig(f"the course folder {root} is over "
                                           f"{MAX_COURSE_BYTES >> 20} MB or "
                                           f"{MAX_COURSE_FILES} files: too big to send to the "
                                           "cluster's workers")
                    rel = path.relative_to(root).as_posix()
                    h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
                    h.update(hashlib.sha256(data).digest())
                    info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
                    info.external_attr = 0o644 << 16
                    zf.writestr(info, data, zipfile.ZIP_DEFLATED)
        return cls(digest=h.hexdigest(), data=buffer.getvalue())

    def unpack(self, into: Path) -> Path:
        """The course in `into`/course-<digest> (unpacked the first time: a folder that exists
        was completed, since it is renamed into place only once whole)."""
        target = Path(into) / f"course-{self.digest[:32]}"
        if target.is_dir():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=into, prefix=".course-"))
        with zipfile.ZipFile(io.BytesIO(self.data)) as zf:
            for info in zf.infolist():
                name = Path(info.filename)
                # Our own client made it; still, a name never leaves the folder.
                if name.is_absolute() or ".." in name.parts or info.is_dir():
                    continue
                dest = partial / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(zf.read(info))
        try:
            partial.rename(target)
        except OSError:  # another thread of this worker got there first
            shutil.rmtree(partial, ignore_errors=True)
        return target


@dataclass(frozen=True)
class RemoteJob:
    """One submission to grade on a cluster worker. `task.submission` is loaded (by the
    client); `settings` are the client's (its paths are replaced by worker-local ones);
    `grader` is the client's `grader_digest()`: a worker whose torchgrade or course differs
    refuses to grade rather than grade differently; `key` names the run's grading settings
    (jobs with the same key share a grading process)."""

    task: GradeTask
    settings: PoolSettings
    steps: GradingSteps
    grader: str
    key: str


@dataclass(frozen=True)
class RemoteOutcome:
    """What a worker sends back for one job: the outputs of the submission's folder (text, by
    file name), or why its grading process died MAX_ATTEMPTS times (`died`), or why this worker
    cannot grade at all (`broken`); the isolation level its sandbox has."""

    student: str
    files: dict[str, str] = field(default_factory=dict)
    died: str | None = None
    broken: str | None = None
    isolation: str = "none"
    missing: str = ""
    worker: str = ""


def grade_remote(job: RemoteJob, course: CourseBundle) -> RemoteOutcome:
    """The cluster task: grade one submission on this worker (see the module docstring).
    Never raises for anything the submission does."""
    return station().grade(job, course)


# --------------------------------------------------------------------------- worker process

_station: Station | None = None
_station_lock = threading.Lock()


def station() -> Station:
    """This worker process's grading station (made on its first task)."""
    global _station
    with _station_lock:
        if _station is None:
            _station = Station()
            atexit.register(_station.close)
        return _station


class GradingProcess:
    """A grading process (`grader.running.pool.serve`) started as a fresh interpreter with a
    socket to it: a cluster worker may be a daemonic, many-threaded process that must not
    fork itself (nor start multiprocessing children)."""

    def __init__(self, settings: PoolSettings, steps: GradingSteps):
        ours, theirs = socket.socketpair()
        env = dict(os.environ, TORCHGRADE_COURSE=str(settings.course))
        try:
            # It asks to die with its parent (PR_SET_PDEATHSIG): see `launch`.
            self.process = launch.popen(
                [sys.executable, "-m", "grader.running.remote", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, env=env, close_fds=True,
                cwd=settings.course.parent)  # the station's private folder
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.conn.send((settings, steps))

    def started(self) -> SandboxStarted | SandboxBroken:
        """Wait for the sandbox's start; raises ProcessDied."""
        message = self._receive(START_TIMEOUT)
        if not isinstance(message, SandboxStarted | SandboxBroken):
            raise ProcessDied(f"it said {type(message).__name__} before starting")
        return message

    def grade(self, task: GradeTask) -> Graded:
        self.conn.send(task)
        message = self._receive(TASK_TIMEOUT)
        if not isinstance(message, Graded):
            raise ProcessDied(f"it said {type(message).__name__} instead of a result")
        return message

    def _receive(self, timeout: float) -> object:
        try:
            if not self.conn.poll(timeout):
                self.kill()
                raise ProcessDied(f"stuck for {timeout:g} s")
            return self.conn.recv()
        except (EOFError, OSError):
            raise ProcessDied(self._death()) from None

    def _death(self) -> str:
        try:
            code = self.process.wait(2)
        except subprocess.TimeoutExpired:
            self.kill()
            return "it stopped answering"
        return describe_exit(code)

    def close(self) -> None:
        """Tell it to finish; kill it after STOP_TIMEOUT."""
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
        self.conn.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


class ProcessDied(RuntimeError):
    pass


class Station:
    """The grading processes of one cluster worker process: idle ones kept by run key, one per
    task being graded (a worker with several threads grades several submissions at once)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="torchgrade-worker-"))
        self.lock = threading.Lock()
        self.idle: dict[str, list[tuple[GradingProcess, SandboxStarted]]] = {}
        self.verified: dict[str, str | None] = {}   # course digest -> why it cannot grade
        self.name = _worker_name()

    def grade(self, job: RemoteJob, course: CourseBundle) -> RemoteOutcome:
        student = job.task.student
        with self.lock:
            course_dir = course.unpack(self.root)
            if course.digest not in self.verified:
                self.verified[course.digest] = self._mismatch(job, course_dir)
            settings = job.settings.model_copy(update={
                "out": self.root / f"out-{job.key[:32]}", "course": course_dir,
                "submissions": None})
        if self.verified[course.digest]:
            return RemoteOutcome(student, broken=self.verified[course.digest], worker=self.name)
        reason = ""
        for _attempt in range(MAX_ATTEMPTS):
            try:
                process, started = self._take(job.key, settings, job.steps)
            except ProcessDied as exc:
                return RemoteOutcome(student, broken=f"a grading process on {self.name} died "
                                     f"before starting its sandbox ({exc})", worker=self.name)
            if isinstance(started, SandboxBroken):
                process.close()
                return RemoteOutcome(student, broken=f"(on the Dask worker {self.name}) "
                                     f"{started.reason}", worker=self.name)
            try:
                graded = process.grade(job.task)
            except ProcessDied as exc:
                reason = str(exc)
                log.warning("torchgrade: the grading process of %s died (%s)", student, reason)
                continue
            files = self._collect(settings.out, graded.result.student)
            with self.lock:
                self.idle.setdefault(job.key, []).append((process, started))
            return RemoteOutcome(student, files=files, isolation=started.isolation,
                                 missing=started.missing, worker=self.name)
        return RemoteOutcome(student, died=reason, worker=self.name)

    def _take(self, key: str, settings: PoolSettings, steps: GradingSteps
              ) -> tuple[GradingProcess, SandboxStarted | SandboxBroken]:
        """An idle grading process of run `key`, else a new one (started: raises
        ProcessDied); idle ones of other runs are stopped (a worker serves one run at a time,
        as a rule)."""
        with self.lock:
            stale = [p for k, ps in self.idle.items() if k != key for p, _ in ps]
            self.idle = {key: self.idle.get(key, [])}
            mine = self.idle[key].pop() if self.idle[key] else None
        for stopped in stale:
            stopped.close()
        if mine is not None and mine[0].process.poll() is None:
            return mine
        process = GradingProcess(settings, steps)
        return process, process.started()

    @staticmethod
    def _mismatch(job: RemoteJob, course_dir: Path) -> str | None:
        """Why this worker would not grade as the client does (another torchgrade, other
        source), or None."""
        import grader
        from grader.intake.fingerprint import _digest

        mine = _digest(course_dir.resolve())
        if mine != job.grader:
            return (f"the Dask worker {_worker_name()} runs torchgrade {grader.__version__} "
                    f"from {Path(grader.__file__).parent}, whose grader digest (torchgrade's "
                    "source, and the course as the worker received it) differs from the "
                    "client's: install the same torchgrade on the client and every worker")
        return None

    @staticmethod
    def _collect(out: Path, student: str) -> dict[str, str]:
        """The outputs the grading process wrote for `student`, read and removed (this worker
        keeps nothing of a submission)."""
        folder = out / student
        try:
            return {name: (folder / name).read_text(encoding="utf-8")
                    for name in RESULT_FILES if (folder / name).is_file()}
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        with self.lock:
            processes = [p for ps in self.idle.values() for p, _ in ps]
            self.idle = {}
        for process in processes:
            process.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _worker_name() -> str:
    try:
        from distributed import get_worker  # only ever imported inside a Dask worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()} (pid {os.getpid()})"


# --------------------------------------------------------------------------- grading process


def main(argv: list[str]) -> None:
    """`python -m grader.running.remote FD`: a grading process on socket FD (see
    GradingProcess): it receives its settings and steps, then serves as a local pool's does."""
    from grader.course.folder import import_checks_from, load_course
    from grader.running.pool import serve

    conn = Connection(int(argv[1]))
    settings, steps = conn.recv()
    # The checks' helpers by plain name, as the local pool's fork server has them.
    import_checks_from(load_course(settings.course).checks_dir)
    serve(conn, settings, steps)


if __name__ == "__main__":
    main(sys.argv)
