"""`torchgrade grade SUBMISSIONS --out OUT --dask tcp://HOST:PORT`: the client side of grading
on a Dask cluster the course already runs (dask.distributed, the `dask` extra).

The client (the `torchgrade grade` process) does what a local run's parent does (find the
students, fingerprint them, skip what is up to date) and the intake (it reads each submission's
files, as a grading process does locally: the workers need no shared filesystem); each
submission then travels to a Dask worker as one task (`grader.running.remote.grade_remote`), with
the course folder as a zip made once per run (a task of its own, so that a worker fetches it once
and a lost copy is made again). Results come back as they finish (`as_completed`) and are written
into OUT here, atomically, results.json last, exactly as a local run writes them.

At most a window of submissions is in the cluster at a time (a few per worker thread): the
client's memory and the scheduler's stay bounded for any class size, and a Ctrl-C cancels little.

Failures: a grading process that dies is retried on its worker (MAX_ATTEMPTS, as locally, then a
grader failure); a Dask worker lost mid-task costs a retry of its tasks elsewhere (the
scheduler's, up to `distributed.scheduler.allowed-failures`, then a grader failure here); a
worker that cannot grade (another torchgrade, no sandbox) stops the run (`PoolBroken`); an
unreachable scheduler, or one lost mid-run, is a `UsageError` (exit 2, one line; what was
graded is kept).

distributed is imported only here, and only when `--dask` is given.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any

from grader.errors import UsageError
from grader.intake.fingerprint import grader_digest
from grader.models import Submission, SubmissionResult
from grader.running.pool import GradeTask, GradingSteps, PoolBroken, PoolSettings
from grader.running.remote import (RESULT_FILES, CourseBundle, CourseTooBig, RemoteJob,
                                   RemoteOutcome, grade_remote)

log = logging.getLogger("torchgrade")

CONNECT_TIMEOUT = 5.0      # seconds to reach the scheduler before giving up (exit 2)
PER_THREAD = 4             # submissions in the cluster per worker thread
MIN_WINDOW = 8
# The window is bounded by bytes too: each submission in it is held here, read (a notebook's code
# may be tens of MB), until its result comes back. One more may go beyond it, never two.
WINDOW_BYTES = 256 << 20
TASK_RETRIES = 1           # a task that raised (not a submission's doing: the worker's) runs again
INSTALL = "pip install 'torchgrade[dask]'"


def grade_on_dask(tasks: Iterable[GradeTask], *, address: str, settings: PoolSettings,
                  steps: GradingSteps, intake: Callable[[GradeTask, PoolSettings], Submission],
                  write: Callable[[SubmissionResult, dict[str, str]], None],
                  on_result: Callable[[SubmissionResult], None] | None = None,
                  on_isolation: Callable[[str, str], None] | None = None) -> None:
    """Grade `tasks` on the Dask cluster whose scheduler is at `address`; each result is written
    into `settings.out` (its submission's folder) and given to `on_result` as it arrives;
    the isolation level of the first worker sandbox heard of goes to `on_isolation`.

    `intake(task, settings)` reads a task's submission here (no variants applied: the grading
    process applies them, as locally); `write(result, files)` writes a result and the files a
    worker rendered of it into OUT with the one writer a local run's grading processes use
    (a later stage than running: `grader.grading.writer.write_into`, which keeps the grade it
    replaces). Raises
    UsageError when distributed is missing or the scheduler cannot be reached, PoolBroken when
    the cluster's workers cannot grade.
    KeyboardInterrupt cancels what is in the cluster before it propagates.
    """
    pending = list(tasks)
    if not pending:
        return
    distributed = _distributed()
    try:
        bundle = CourseBundle.pack(settings.course)
    except CourseTooBig as exc:
        raise UsageError(str(exc)) from None
    key = bundle.digest + "\n" + settings.model_dump_json(
        exclude={"out", "course", "submissions"}, warnings=False)
    job_key = uuid.uuid5(uuid.NAMESPACE_OID, key).hex
    grader = grader_digest()
    with _connected(distributed, address) as client:
        run = _Run(client, distributed, settings, steps, write, on_result, on_isolation)
        run.address = address
        # The course as a task's result (not scattered data): the scheduler keeps what makes
        # it, so it is made again should every worker holding it be lost.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "large object in task graph": 1 MB, once
            course = client.submit(_course, bundle, key=f"torchgrade-course-{bundle.digest}",
                                   pure=True)
        run.course = course
        run.grade(pending, lambda task: RemoteJob(task=_loaded(task, settings, intake),
                                                   settings=settings, steps=steps,
                                                   grader=grader, key=job_key))


def _course(bundle: CourseBundle) -> CourseBundle:
    return bundle


def _loaded(task: GradeTask, settings: PoolSettings,
            intake: Callable[[GradeTask, PoolSettings], Submission]) -> GradeTask:
    """`task` with its submission read here (the worker never sees the client's paths)."""
    if task.submission is not None:
        return task
    return task.model_copy(update={"submission": intake(task, settings), "path": None})


class _Run:
    """The submissions of one run in the cluster: a bounded window, refilled as results come."""

    def __init__(self, client: Any, distributed: Any, settings: PoolSettings,
                 steps: GradingSteps, write: Callable[[SubmissionResult, dict[str, str]], None],
                 on_result: Callable[[SubmissionResult], None] | None,
                 on_isolation: Callable[[str, str], None] | None):
        self.client = client
        self.write = write
        self.distributed = distributed
        self.settings = settings
        self.steps = steps
        self.on_result = on_result
        self.on_isolation = on_isolation
        self.course: Any = None
        self.address = ""
        self.running: dict[Any, GradeTask] = {}
        self.held: dict[Any, int] = {}  # bytes of source each future's submission holds
        self.prefix = f"torchgrade-{uuid.uuid4().hex[:12]}"

    def grade(self, pending: list[GradeTask], job_of: Callable[[GradeTask], RemoteJob]) -> None:
        pending.reverse()  # popped from the end: in the order given
        done = self.distributed.as_completed(loop=self.client.loop)
        try:
            self._fill(pending, job_of, done)
            for future in done:
                task = self.running.pop(future)
                self.held.pop(future, None)
                self._finish(future, task)
                self._fill(pending, job_of, done)
        except BaseException:
            self.client.cancel(list(self.running), force=True)
            raise

    def _fill(self, pending: list[GradeTask], job_of: Callable[[GradeTask], RemoteJob],
              done: Any) -> None:
        window = max(MIN_WINDOW, PER_THREAD * sum(self._threads().values()))
        while pending and len(self.running) < window and (
                not self.running or sum(self.held.values()) < WINDOW_BYTES):
            task = pending.pop()
            job = job_of(task)
            future = self.client.submit(grade_remote, job, self.course,
                                        key=f"{self.prefix}-{len(pending)}", pure=False,
                                        retries=TASK_RETRIES)
            self.running[future] = task
            self.held[future] = source_bytes(job.task.submission)
            done.add(future)

    def _threads(self) -> dict[str, int]:
        workers = self.client.scheduler_info().get("workers", {})
        return {address: int(w.get("nthreads", 1)) for address, w in workers.items()}

    def _finish(self, future: Any, task: GradeTask) -> None:
        """Write and deliver the result of `future` (graded, or a grader failure)."""
        if future.status == "cancelled":  # the scheduler is gone (or was restarted)
            raise UsageError(f"lost the Dask scheduler at {self.address} while grading: what "
                             "was graded is kept, run the same command again to finish")
        if future.status == "error":
            exc = future.exception()
            if isinstance(exc, self.distributed.KilledWorker):
                self._deliver(self.steps.fail(task, "the Dask workers grading it died "
                                              f"({exc})"[:400], self.settings))
                return
            raise PoolBroken(f"a Dask worker could not grade {task.student}: "
                             f"{type(exc).__name__}: {exc}"[:600])
        outcome: RemoteOutcome = future.result()
        if outcome.broken:
            raise PoolBroken(outcome.broken)
        if self.on_isolation is not None and outcome.files:
            self.on_isolation(outcome.isolation, outcome.missing)
            self.on_isolation = None  # once per run, as locally
        if outcome.died is not None:
            result = self.steps.fail(task, f"its grading process died: {outcome.died}",
                                     self.settings)
        else:
            try:
                result = write_outcome(outcome, task, self.write)
            except (OSError, ValueError) as exc:
                log.exception("torchgrade: writing the results of %s failed", task.student)
                result = self.steps.fail(task, f"its results could not be written: "
                                         f"{type(exc).__name__}: {exc}"[:400], self.settings)
        self._deliver(result)

    def _deliver(self, result: SubmissionResult) -> None:
        if self.on_result is not None:
            self.on_result(result)


def source_bytes(submission: Submission | None) -> int:
    """How much student source a loaded submission holds (its chunks' code)."""
    if submission is None:
        return 0
    return sum(len(c.code) for m in submission.modules.values() for c in m.chunks)


def write_outcome(outcome: RemoteOutcome, task: GradeTask,
                  write: Callable[[SubmissionResult, dict[str, str]], None]) -> SubmissionResult:
    """Write the files a worker sent for `task` with `write` (OUT's writer); the result they
    hold. Raises ValueError for a reply that is not the outputs of this very submission."""
    files = outcome.files
    if sorted(files) != sorted(RESULT_FILES) or outcome.student != task.student:
        raise ValueError(f"the worker's reply for {task.student} is incomplete "
                         f"({', '.join(sorted(files)) or 'no files'})")
    result = SubmissionResult.model_validate_json(files["results.json"])
    if result.student != task.student or result.fingerprint not in (task.fingerprint, None):
        raise ValueError(f"the worker's reply for {task.student} is another submission's")
    write(result, files)
    return result


# --------------------------------------------------------------------------- connecting


class _Quiet(logging.Filter):
    """Drops the records logged from distributed's and tornado's own source files."""

    def __init__(self, distributed: Any):
        super().__init__()
        import tornado

        self.folders = tuple(os.path.dirname(str(m.__file__)) + os.sep
                             for m in (distributed, tornado))

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.startswith(self.folders)


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError(f"--dask needs dask.distributed, which is not installed: {INSTALL}"
                         ) from None
    return distributed


def reach(address: str) -> None:
    """Fail fast, before any submission is read: UsageError (one line) unless `address` is a
    scheduler address (tcp://HOST:PORT, or another of distributed's protocols) and, for
    TCP-based ones, something accepts a connection there within CONNECT_TIMEOUT."""
    _distributed()
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address, strict=True)
        host, port = parse_host_port(location) if scheme in ("tcp", "tls") else (None, None)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--dask {address}: not a scheduler address (tcp://HOST:PORT): "
                         f"{exc}"[:300]) from None
    if host is None or port is None:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: "
                         f"{exc.strerror or exc or type(exc).__name__}"[:300]) from None


@contextmanager
def _connected(distributed: Any, address: str):
    """A client of the scheduler at `address`; UsageError (one line) when it cannot be
    reached within CONNECT_TIMEOUT."""
    # What goes wrong is said once, in torchgrade's words (the scheduler unreachable or lost, a
    # worker that cannot grade), not as distributed's tracebacks in the middle of the progress;
    # for the rest of this process: a lost scheduler's reconnection is still logged after the
    # client is closed.
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # distributed also logs some errors under loggers named after a bare module ("client"):
    # the handlers of the root logger drop every record made in distributed's or tornado's code.
    quiet = _Quiet(distributed)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _Quiet) for f in handler.filters):
            handler.addFilter(quiet)
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, ValueError, TypeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"cannot reach the Dask scheduler at {address} within "
                         f"{CONNECT_TIMEOUT:g} s: {detail}"[:300]) from None
    try:
        workers = client.scheduler_info().get("workers", {})
        if not workers:
            log.warning("torchgrade: warning: the Dask cluster at %s has no workers yet: the "
                        "submissions wait for some", address)
        yield client
    finally:
        client.close(timeout=CONNECT_TIMEOUT)
