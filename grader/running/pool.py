"""The pool of grading processes behind `torchgrade grade -j N`.

Processes and what they hold:

    torchgrade (parent)   finds and fingerprints submissions, dispatches them, shows
      |                   progress, writes the class outputs; never imports torch
      +- zygote template  bwrap + python -m grader.worker.template, started first: imports
      |    |              torch (and the probes) once, in the workers' view, while the fork
      |    |              server imports its own; checks never enter it
      |    +- trainer     forked from it when the exercises may build an optimizer; imports
      |    |    |         torch._dynamo meanwhile
      |    |    +- zygote x N  for the exercises that train, one per grading process
      |    +- zygote x N  one forked per grading process, on its request (see below)
      +- forkserver       multiprocessing's fork server: imported torch, pytest and the checks
           |              once (`PRELOAD`; `torchgrade grade` starts it first thing, without
           |              the checks: `grader.running.prestart`); each grading process is a
           |              fork of it
           +- grading process x N   one pytest session for all its submissions
                |                   (grader.running.batch),
                |                   its own warm worker parent; writes each submission's outputs
                |                   (reads each submission itself: the parent parses nothing)
                +- (its zygote: forked by the template, spoken to over its control socket)
                     +- worker      one per student module, forked in ~10 ms

One zygote per grading process (two when some of its exercises train and some do not: the
exercises that build no optimizer start without waiting for the trainer's import of
torch._dynamo, `grader.checking.plugin.Zygotes`): a zygote's control socket serves one client
(its `Zygote` object is not process-safe), and sharing one would need a broker in front of it
(passing every worker's socket between processes, and its exit notes back). Each is forked from
the run's zygote template (`grader.worker.client.ZygoteTemplate`, where the machine gives root
and bubblewrap), or from its trainer: its imports are the template's, its start is its
self-tests (~0.1 s), not ~3 s of CPU per grading process importing torch and torch._dynamo at
once on few cores. It keeps its
own session, mount namespace (/tmp, /dev/shm), uid range, cgroup folder (under the run's) and
scratch folder (under the run's, bound once into the template's view). Without a template (not
root, no bubblewrap, TORCHGRADE_ZYGOTE_TEMPLATE=0), or once it is gone, a grading process
launches its zygote itself, as before. A zygote costs ~220 MB of private memory (USS); a grading
process ~75 MB of its own beside the pages it shares with the fork server.

Like any multiprocessing program, a script that calls `grade_in_pool` (or `grading.run`)
must guard its main module with `if __name__ == "__main__":` (the fork server imports it).

Dispatch is one submission at a time per process, so the parent always knows which submission a
process was grading: if a process dies (it should not; student code runs in workers, not here),
that submission is retried once in a fresh process, then recorded as a grader failure, and the
batch goes on. Only a process that dies before its sandbox started (before it said "isolation")
counts towards `PoolBroken`: a submission can make its grading process die only after that.
Grading processes ignore SIGINT: on Ctrl-C the parent stops them with SIGTERM
(which ends their pytest session as an interrupt; `write_atomic` removes any half-written temp
file) and waits for them, and every process below dies with its parent (PR_SET_PDEATHSIG), so
nothing is left behind even after a `kill -9` of the parent: the template dies with the parent
(bwrap --die-with-parent), a forked zygote when its grading process closes its socket (by dying
too), and `grade_in_pool` ends the template when it returns.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import logging
import multiprocessing
import os
import resource
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, model_validator

from grader.course.folder import (Course, active_course, import_checks_from, load_course,
                                  use_course)
from grader.course.registry import check_files
from grader.intake.assignment import Assignment
from grader.models import CheckRun, Submission, SubmissionResult
from grader.running import prestart
from grader.running.prestart import PRELOAD, TEMPLATE_ENV
from grader.worker.limits import WorkerLimits, die_with_parent

if TYPE_CHECKING:
    from grader.worker.client import Zygote

log = logging.getLogger("torchgrade")

# What the reports' pictures import (matplotlib, ~0.6 s; grader.outputs.plots imports it lazily
# so that a `torchgrade check` without failures never pays for it): imported by each grading
# process in a thread while it waits for its zygote, not by the fork server, whose imports every
# run waits for before its first grading process starts.
PICTURE_IMPORTS = ["matplotlib.figure", "matplotlib.backends.backend_svg", "matplotlib.patches",
                   "grader.outputs.plots"]
# torch._dynamo is not preloaded, even for exercises that train: the grading processes' checks
# run with it deferred (`grader.worker.deferred_dynamo`, which answers what optimizers and
# torch.func ask of it in eager execution), so none imports it. Preloaded, it was ~1.1 s more
# of the fork server's imports, which every run waits for before its first grading process.
MAX_ATTEMPTS = 2            # a submission whose grading process died twice is a grader failure
# A grading process busy this long on one submission is stuck (or twice the submission's budget,
# if longer): student code cannot take it (WorkerLimits.submission_budget, 15 min by default,
# ends it with its verdicts).
TASK_TIMEOUT = 30 * 60.0
STOP_TIMEOUT = 10.0         # seconds a stopping grading process gets before SIGKILL


def default_jobs() -> int:
    """How many grading processes a run starts unless told: one per core this process may
    use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def preload(course: Course, exercises: list[str]) -> list[str]:
    """What the fork server imports for grading `exercises` of `course`, unless it was started
    early (`grader.running.prestart`): PRELOAD and the checks' modules (by name: pytest finds
    them already imported)."""
    return PRELOAD + [f.stem for f in check_files(exercises, checks_dir=course.checks_dir)]


class GradeTask(BaseModel):
    """One submission to grade: where it is (the grading process reads it: the parent never
    parses a student's files), or a submission already loaded."""

    student: str = ""
    path: Path | None = None
    submission: Submission | None = None
    fingerprint: str | None = None
    submitted_at: datetime | None = None
    own_links: list[tuple[int, int]] = Field([], description="hard-linked files this student "
                                              "may hand in as their own (grader.intake.files)")
    notes: list[str] = Field([], description="what the class's intake says about this "
                             "submission (the LMS, the roster): added to its notes")
    late_marker: bool = Field(False, description="the LMS marked it late without a time")
    renamed_from: str | None = Field(None, description="the class folder graded under this "
                                     "roster id (a note of `notes` says so to the student)")

    @model_validator(mode="after")
    def _named(self) -> GradeTask:
        if self.submission is not None and not self.student:
            self.student = self.submission.student
        if self.submission is None and self.path is None:
            raise ValueError("a task needs a path or a submission")
        return self


class PoolSettings(BaseModel):
    """What every grading process needs besides its tasks."""

    out: Path
    exercises: list[str]
    assignment: Assignment
    limits: WorkerLimits | None = None
    variants: Any = Field(None, description="a grader.course.bughunt.VariantManifest, or None")
    submissions: Path | None = Field(None, description="the class folder: the zygote's start-up "
                                     "self-test proves that no worker can see it, nor `out`")
    course: Path = Field(default_factory=lambda: active_course().root,
                         description="the course folder whose checks grade (no worker sees it)")
    # A live socket, passed to the grading processes as a duplicated descriptor; never part
    # of the settings' JSON (a dask job's key, a remote worker's settings).
    template: Any = Field(None, exclude=True, description="the run's zygote template "
                          "(grader.worker.client.TemplateLink), set by `grade_in_pool`")
    logged_errors: Path | None = Field(None, exclude=True, description="a folder the run's "
                                       "grading processes share, set by `grade_in_pool`: see "
                                       "grader.checking.plugin.share_logged_errors")


# What a grading process tells the parent, in this order: its sandbox could not start, or it
# started (isolation level, what is missing); then one `Graded` per task it was sent.
@dataclass(frozen=True)
class SandboxBroken:
    reason: str


@dataclass(frozen=True)
class SandboxStarted:
    isolation: str
    missing: str  # what the sandbox lacks, in words ("" for full isolation)


@dataclass(frozen=True)
class Graded:
    result: SubmissionResult


ProcessMessage = SandboxBroken | SandboxStarted | Graded


class PoolBroken(RuntimeError):
    """The grading processes cannot run at all (an installation problem, not a submission's)."""


@dataclass(frozen=True)
class GradingSteps:
    """What a grading process does with each task: the pipeline of one submission, declared
    by the stage that runs the pool (`grader.grading.steps.STEPS`). Each is a module-level
    function: they travel to the grading processes by reference.

    - `read(task, settings)`: the task's submission (intake); never raises for anything in the
      student's files;
    - `finish(outcome, task, settings)`: the run of its checks (or the exception the grader
      raised on it) scored and written (scoring, outputs); returns the result as written;
      never raises;
    - `fail(task, reason, settings)`: the result of a submission whose grading process died,
      written if possible (no fingerprint: the next run grades it again).
    """

    read: Callable[[GradeTask, PoolSettings], Submission]
    finish: Callable[[CheckRun | BaseException, GradeTask, PoolSettings], SubmissionResult]
    fail: Callable[[GradeTask, str, PoolSettings], SubmissionResult]


# --------------------------------------------------------------------------- grading process


def serve(conn: Connection, settings: PoolSettings, steps: GradingSteps) -> None:
    """A grading process: start a zygote, then grade the tasks `conn` brings (None ends) in one
    pytest session, writing each submission's outputs and sending back its result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt)
    die_with_parent()
    hold_to_budget()
    # Stray output of the grading process (a library warning) must not break the progress bar.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        from grader.checking.plugin import Zygotes, share_logged_errors
        from grader.running.batch import grade_batch
        from grader.worker.client import ZygoteError

        # The course crosses into this process by its folder: a forkserver started earlier (for
        # another course) would otherwise give its own.
        use_course(load_course(settings.course))
        share_logged_errors(settings.logged_errors)
        # The zygote starts (its self-tests: ~0.3 s) while pytest configures itself and
        # collects the checks; the first submission waits for it. Its thread only waits on the
        # zygote's socket, so the collection keeps the GIL. With a template, the exercises that
        # may build optimizers get a zygote of their own (`Zygotes`), forked by the template's
        # trainer once it has imported torch._dynamo: the first exercises need not wait for it.
        course = active_course()
        training = [e for e in settings.exercises if course.may_build_optimizers([e])]
        split = (settings.template is not None and settings.template.optimizers
                 and 0 < len(training) < len(settings.exercises))
        starting = _start_zygote(settings, optimizers=bool(training) and not split)
        trainer = _start_zygote(settings, optimizers=True) if split else None
        zygotes = (Zygotes(starting.result, trainer.result, training) if trainer is not None
                   else starting.result)
        current: list[GradeTask] = []

        def tell(message: ProcessMessage) -> bool:
            """Send `message` to the parent; False if it is gone, or stopping the run (Ctrl-C:
            it closed its end), which ends the session quietly (raised inside it, it would be
            pytest's internal error, printed beside the run's "interrupted")."""
            try:
                conn.send(message)
                return True
            except OSError:
                return False

        def submissions() -> Iterable[Submission]:
            # Before any task is read: a process whose sandbox did not start has read none.
            try:
                zygote = starting.result()
            except Exception as exc:  # noqa: BLE001 - said to the parent, never lost
                # Raised here, it would be pytest's internal error, printed to this process's
                # discarded stdout: the parent would only see a process that ended early.
                tell(SandboxBroken(str(exc) if isinstance(exc, ZygoteError)
                                   else f"{type(exc).__name__}: {exc}"))
                return
            if not tell(SandboxStarted(zygote.isolation, zygote.missing)):
                return
            threading.Thread(target=_import_all, args=(PICTURE_IMPORTS,), daemon=True,
                             name="torchgrade-imports").start()
            while True:
                try:
                    task = conn.recv()
                except (EOFError, OSError):
                    return  # the parent is gone (see `tell`)
                if task is None:
                    return
                current[:] = [task]
                yield steps.read(task, settings)

        def finish(_submission: Submission, outcome: CheckRun | BaseException) -> None:
            if not tell(Graded(steps.finish(outcome, current[0], settings))):  # (written)
                raise KeyboardInterrupt  # ends the session as an interrupt does, quietly

        try:
            grade_batch(submissions(), finish, exercises=settings.exercises,
                        limits=settings.limits, zygote=zygotes)
        finally:
            for future in (starting, trainer):
                if future is None or not future.done() or future.exception() is not None:
                    continue
                zygote = future.result()
                # Every worker is closed and the zygote has nothing left to do: its graceful
                # exit is an interpreter tearing down torch (about a second, which the run's
                # last grading process would add to every run). Its workers die with it anyway.
                process = getattr(zygote, "process", None)
                if process is not None:
                    process.kill()
                zygote.close()
    except (KeyboardInterrupt, EOFError, BrokenPipeError):
        pass  # stopped by the parent, or the parent is gone
    # Everything is written (atomically) and the zygote is closed: skip the interpreter's
    # teardown of torch and pytest (up to a second the parent would wait for).
    os._exit(0)


# A grading process holds torch, pytest, the checks and one submission's intake. RLIMIT_DATA
# counts address space (private writable mappings), not resident memory: grading a class of
# every exercise, a grading process's VmData swings between 0.6 and 1.6 GiB while its resident
# peak stays at 0.42 GiB (the checks' reference training and glibc's per-thread arenas reserve far
# more than they touch). The budget sits five times above that swing: past it, its own
# allocations fail with a MemoryError where they happen (reading a file: that file's note, the
# student's own bytes; in a check: the check failed itself, not final), so that no student's
# bytes make it grow until the kernel's OOM killer chooses some process, an honest neighbour's
# worker first; honest grading never comes near it.
GRADING_PROCESS_MEMORY = 8 << 30  # 8 GiB of private address space (RLIMIT_DATA)
# Under memory pressure the kernel kills the highest score first: a worker (1000, set by the
# worker itself: student code), then a grading process (whose submission is graded again),
# never the parent before them (it holds the run).
GRADING_PROCESS_OOM_SCORE = 500


def hold_to_budget() -> None:
    """Bound this grading process's memory (`GRADING_PROCESS_MEMORY`, its soft RLIMIT_DATA:
    what it starts may raise it again, as workers do) and rank it for the OOM killer
    (`GRADING_PROCESS_OOM_SCORE`). Fails soft: a machine that allows neither grades as
    before."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = GRADING_PROCESS_MEMORY if hard == resource.RLIM_INFINITY \
            else min(GRADING_PROCESS_MEMORY, hard)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(GRADING_PROCESS_OOM_SCORE))
    except OSError:
        pass


def _start_zygote(settings: PoolSettings, *, optimizers: bool
                  ) -> concurrent.futures.Future[Zygote]:
    """A zygote for this grading process, started in a thread: its future."""
    from grader.worker.client import Zygote

    starting = concurrent.futures.Future[Zygote]()

    def start() -> None:
        try:
            starting.set_result(Zygote(
                hidden=[p for p in (settings.out, settings.submissions, settings.course) if p],
                optimizers=optimizers, template=settings.template, course=settings.course))
        except BaseException as exc:  # noqa: BLE001 - its user says what it was
            starting.set_exception(exc)

    threading.Thread(target=start, daemon=True, name="torchgrade-zygote").start()
    return starting


def _import_all(names: list[str]) -> None:
    for name in names:
        importlib.import_module(name)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


# --------------------------------------------------------------------------- parent side


@dataclass
class _Slot:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    task: GradeTask | None = None
    since: float = 0.0
    done: int = 0
    finishing: bool = False
    started: bool = False  # its sandbox started (it said so): a death now is its task's


def grade_in_pool(tasks: Iterable[GradeTask], *, settings: PoolSettings, steps: GradingSteps,
                  jobs: int,
                  on_result: Callable[[SubmissionResult], None] | None = None,
                  on_isolation: Callable[[str, str], None] | None = None,
                  serve: Callable[[Connection, PoolSettings, GradingSteps], None] = serve,
                  template: bool | None = None) -> list[SubmissionResult]:
    """Grade `tasks` in `jobs` grading processes; every result (graded, or a grader failure
    written here when a process died twice on it) goes to `on_result` as it arrives, and the
    isolation level of the first sandbox started (level, what is missing) to `on_isolation`.
    `template`: the grading processes' zygotes are forked from one zygote template started
    here (where the machine allows one), not each launched with its own import of torch;
    by default unless the environment sets TORCHGRADE_ZYGOTE_TEMPLATE=0 (to compare).

    Raises `PoolBroken` when grading processes cannot start; KeyboardInterrupt stops every
    process before it propagates.
    """
    pending = deque(tasks)
    if not pending:
        return []
    zygote_template = None
    if template is None:
        template = os.environ.get(TEMPLATE_ENV, "1") != "0"
    if template:
        from grader.worker.client import ZygoteTemplate

        # First: it imports torch while the fork server imports its own (unless the command
        # started one already, `prestart.start_early`).
        zygote_template = prestart.take_template() or ZygoteTemplate.start(
            optimizers=load_course(settings.course).may_build_optimizers(settings.exercises))
    logged: Path | None = None
    try:
        logged = Path(tempfile.mkdtemp(prefix="torchgrade-logged-"))
        settings = settings.model_copy(update={"logged_errors": logged})
        if zygote_template is not None:
            settings = settings.model_copy(update={"template": zygote_template.link()})
        return _grade_in_pool(pending, settings=settings, steps=steps, jobs=jobs,
                              on_result=on_result, on_isolation=on_isolation, serve=serve)
    finally:
        if logged is not None:
            shutil.rmtree(logged, ignore_errors=True)
        if zygote_template is not None:
            zygote_template.close()


def _grade_in_pool(pending: deque[GradeTask], *, settings: PoolSettings, steps: GradingSteps,
                   jobs: int, on_result: Callable[[SubmissionResult], None] | None,
                   on_isolation: Callable[[str, str], None] | None,
                   serve: Callable[[Connection, PoolSettings, GradingSteps], None]
                   ) -> list[SubmissionResult]:
    ctx = multiprocessing.get_context(prestart.CONTEXT)
    # The checks' modules by their plain names: the forkserver starts with this process's
    # sys.path, which `import_checks_from` leads with the course's checks folder.
    course = load_course(settings.course)
    import_checks_from(course.checks_dir)
    # Heeded only by the fork server's first start in this process (multiprocessing keeps one).
    prestart.start_fork_server(preload(course, settings.exercises))
    attempts: Counter[str] = Counter()
    results: list[SubmissionResult] = []
    slots: list[_Slot] = []       # grading, or ready to
    finishing: list[_Slot] = []   # told to finish: no work left for them
    early_deaths = 0

    def start() -> _Slot:
        ours, theirs = ctx.Pipe()
        process = ctx.Process(target=serve, args=(theirs, settings, steps),
                              name="torchgrade-grading", daemon=True)
        process.start()
        theirs.close()
        return _Slot(process, ours)

    def deliver(result: SubmissionResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    def lost(slot: _Slot, reason: str) -> None:
        """`slot`'s process is gone: retry or give up on its task, replace the process."""
        nonlocal early_deaths
        slots.remove(slot)
        slot.conn.close()
        slot.process.join(1)
        task = slot.task
        if not slot.started:
            # Died before its sandbox was up: no submission was read there yet, so this is the
            # machine's or the installation's problem, and its task goes back unharmed.
            early_deaths += 1
            if early_deaths > 2 * jobs + 2:
                raise PoolBroken(f"grading processes keep dying before grading anything ({reason})")
            if task is not None:
                pending.appendleft(task)
        elif task is not None:
            student = task.student
            attempts[student] += 1
            log.warning("torchgrade: the grading process of %s died (%s)", student, reason)
            if attempts[student] < MAX_ATTEMPTS:
                pending.appendleft(task)
            else:
                deliver(steps.fail(task, f"its grading process died: {reason}", settings))
        if pending and len(slots) < jobs:
            slots.append(start())

    stuck_after = max(TASK_TIMEOUT, 2 * (settings.limits or WorkerLimits()).submission_budget)
    try:
        for _ in range(min(jobs, len(pending))):
            slots.append(start())
        while pending or any(s.task is not None for s in slots):
            for slot in list(slots):
                if slot.task is None and pending:
                    slot.task, slot.since = pending.popleft(), time.monotonic()
                    slot.conn.send(slot.task)
                elif slot.task is None:
                    # Nothing left for it: let it wind down (its zygote's exit takes a while)
                    # while the others finish their last submissions.
                    _tell_to_finish(slot)
                    slots.remove(slot)
                    finishing.append(slot)
            now = time.monotonic()
            busy = [s.since + stuck_after - now for s in slots if s.task is not None]
            ready = wait([s.conn for s in slots] + [s.process.sentinel for s in slots],
                         timeout=max(min(busy), 0.0) if busy else None)
            for slot in list(slots):
                if slot.conn in ready:
                    try:
                        message: ProcessMessage = slot.conn.recv()
                    except (EOFError, OSError):
                        lost(slot, _death(slot.process))
                        continue
                    if isinstance(message, SandboxBroken):
                        raise PoolBroken(f"the sandbox could not start: {message.reason}")
                    if isinstance(message, SandboxStarted):
                        slot.started = True
                        if on_isolation is not None:
                            on_isolation(message.isolation, message.missing)
                            on_isolation = None  # once per run: every process has the same
                        continue
                    slot.task, slot.done = None, slot.done + 1
                    deliver(message.result)
                elif slot.process.sentinel in ready:
                    lost(slot, _death(slot.process))
                elif slot.task is not None and time.monotonic() - slot.since > stuck_after:
                    slot.process.kill()
                    lost(slot, f"stuck for {stuck_after:g} s")
    except BaseException:
        _stop(slots + finishing, interrupt=True)
        raise
    _stop(slots + finishing, interrupt=False)
    return results


def _death(process: multiprocessing.process.BaseProcess) -> str:
    process.join(1)
    code = process.exitcode
    return "it stopped answering" if code is None else describe_exit(code)


def describe_exit(code: int) -> str:
    """How a process ended, from its exit code (negative: the signal that killed it)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _tell_to_finish(slot: _Slot) -> None:
    if not slot.finishing:
        slot.finishing = True
        try:
            slot.conn.send(None)
        except (OSError, ValueError):
            pass


def _stop(slots: list[_Slot], *, interrupt: bool) -> None:
    """End every grading process: idle ones are told to finish, busy ones (on interrupt) get
    SIGTERM; any still running after STOP_TIMEOUT is killed."""
    for slot in slots:
        if interrupt and slot.task is not None:
            slot.process.terminate()
        else:
            _tell_to_finish(slot)
    deadline = time.monotonic() + STOP_TIMEOUT
    for slot in slots:
        slot.process.join(max(deadline - time.monotonic(), 0.0))
        if slot.process.is_alive():
            slot.process.kill()
            slot.process.join()
        slot.conn.close()
