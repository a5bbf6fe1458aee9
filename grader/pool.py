"""The pool of grading processes behind `torchgrade grade -j N`.

Processes and what they hold:

    torchgrade (parent)   finds and fingerprints submissions, dispatches them, shows
      |                   progress, writes the class outputs; never imports torch
      +- forkserver       multiprocessing's fork server: imported torch, pytest and the checks
           |              once (`PRELOAD`); each grading process is a fork of it
           +- grading process x N   one pytest session for all its submissions (grader.batch),
                |                   its own warm worker parent; writes each submission's outputs
                |                   (reads each submission itself: the parent parses nothing)
                +- zygote           python -m grader.worker.zygote: imported torch once
                     +- worker      one per student module, forked in ~10 ms

One zygote per grading process: a zygote's control socket serves one client (its `Zygote`
object is not process-safe), and sharing one would need a broker in front of it (passing every
worker's socket between processes, and its exit notes back). Measured, a zygote costs ~3 s of
CPU at start-up (torch and torch._dynamo, in parallel with the other grading processes') and
~220 MB of private memory (USS); a grading process ~75 MB of its own beside the pages it shares
with the fork server. A shared zygote would save (N - 1) of each.

Like any multiprocessing program, a script that calls `grade_in_pool` (or `commands.grade`)
must guard its main module with `if __name__ == "__main__":` (the fork server imports it).

Dispatch is one submission at a time per process, so the parent always knows which submission a
process was grading: if a process dies (it should not; student code runs in workers, not here),
that submission is retried once in a fresh process, then recorded as a grader failure, and the
batch goes on. Only a process that dies before its sandbox started (before it said "isolation")
counts towards `PoolBroken`: a submission can make its grading process die only after that.
Grading processes ignore SIGINT: on Ctrl-C the parent stops them with SIGTERM
(which ends their pytest session as an interrupt; `write_atomic` removes any half-written temp
file) and waits for them, and every process below dies with its parent (PR_SET_PDEATHSIG), so
nothing is left behind even after a `kill -9` of the parent.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

import grader
from grader.assignment import Assignment, apply_assignment
from grader.exports import write_submission_outputs
from grader.models import Submission, SubmissionResult
from grader.summary import is_grader_failure
from grader.registry import check_files
from grader.worker.limits import WorkerLimits, die_with_parent

log = logging.getLogger("torchgrade")

# Imported once in the fork server, shared copy-on-write by every grading process (the check
# modules are added by name: pytest finds them already imported). torch._dynamo: the first
# torch.optim optimizer a check builds imports it (2 s), as the zygote does for the workers.
# matplotlib: the first report picture imports it (0.6 s); grader.plots imports it lazily so that
# a `torchgrade check` without failures never pays for it.
PRELOAD = ["grader.batch", "grader.exports", "torch._dynamo", "matplotlib.figure",
           "matplotlib.backends.backend_svg", "matplotlib.patches", "grader.plots"]
MAX_ATTEMPTS = 2            # a submission whose grading process died twice is a grader failure
TASK_TIMEOUT = 30 * 60.0    # a grading process busy this long on one submission is stuck
STOP_TIMEOUT = 10.0         # seconds a stopping grading process gets before SIGKILL


class GradeTask(BaseModel):
    """One submission to grade: where it is (the grading process reads it: the parent never
    parses a student's files), or a submission already loaded."""

    student: str = ""
    path: Path | None = None
    submission: Submission | None = None
    fingerprint: str | None = None
    submitted_at: datetime | None = None
    own_links: list[tuple[int, int]] = Field([], description="hard-linked files this student "
                                              "may hand in as their own (grader.files)")

    @model_validator(mode="after")
    def _named(self) -> "GradeTask":
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
    variants: Any = Field(None, description="a grader.bughunt.VariantManifest, or None")
    submissions: Path | None = Field(None, description="the class folder: the zygote's start-up "
                                     "self-test proves that no worker can see it, nor `out`")


class PoolBroken(RuntimeError):
    """The grading processes cannot run at all (an installation problem, not a submission's)."""


def complete(result: SubmissionResult, task: GradeTask, settings: PoolSettings) -> SubmissionResult:
    """The result as written: rescaled to the assignment, late penalty, fingerprint."""
    result.submitted_at = task.submitted_at
    result = apply_assignment(result, settings.assignment)
    result.fingerprint = task.fingerprint
    return result


def grader_failure(task: GradeTask, reason: str) -> SubmissionResult:
    """The result of a submission the grader could not grade. It carries no fingerprint, so the
    next run grades it again, and no checks, which is how summaries recognise it."""
    return SubmissionResult(
        student=task.student, grader_version=grader.__version__,
        submitted_at=task.submitted_at,
        notes=[f"the grader failed on this submission ({printable(reason)}); this is not the "
               "student's fault: run `torchgrade grade` again, and report it if it persists"])


def prepare(task: GradeTask, settings: PoolSettings) -> Submission:
    """The task's submission, read here (in the grading process) if the parent did not; never
    raises for anything in the student's files."""
    from grader.files import own_links
    from grader.submission import load_quietly

    submission = task.submission
    if submission is None:
        with own_links(task.own_links):
            submission = load_quietly(task.path, task.student, settings.exercises)
    if settings.variants is not None:
        from grader.commands import apply_variants

        submission = apply_variants(submission, settings.variants)
    return submission


def finish_and_write(result: SubmissionResult, task: GradeTask, settings: PoolSettings
                     ) -> SubmissionResult:
    """Complete `result` and write the submission's outputs; never raises. What cannot be
    written as it is is written with its text escaped (same verdicts, same fingerprint); when
    not even that can be written, a grader failure (no fingerprint: the next run retries) is
    returned, written if possible: the run then says NOT GRADED and exits 1."""
    try:
        if is_grader_failure(result):
            result.submitted_at = task.submitted_at
        else:
            result = complete(result, task, settings)
        write_submission_outputs(result, settings.out)
        return result
    except Exception as exc:  # noqa: BLE001 - one submission's outputs, never the process
        log.exception("torchgrade: writing the results of %s failed", task.student)
        first = exc
    if not isinstance(first, OSError) and result.checks:
        try:
            safe = escaped(result)
            safe.notes.append("some text of this result could not be written as it was "
                              f"({type(first).__name__}): it was escaped")
            write_submission_outputs(safe, settings.out)
            return safe
        except Exception:  # noqa: BLE001
            log.exception("torchgrade: writing the escaped results of %s failed", task.student)
    failed = grader_failure(task, "its results could not be written: "
                                  f"{type(first).__name__}: {first}"[:400])
    try:
        write_submission_outputs(failed, settings.out)
    except Exception:  # noqa: BLE001 - the parent still counts it as not graded
        log.exception("torchgrade: even the failure note of %s could not be written", task.student)
    return failed


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


# --------------------------------------------------------------------------- grading process


def serve(conn: Connection, settings: PoolSettings) -> None:
    """A grading process: start a zygote, then grade the tasks `conn` brings (None ends) in one
    pytest session, writing each submission's outputs and sending back its result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt)
    die_with_parent()
    # Stray output of the grading process (a library warning) must not break the progress bar.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        from grader.batch import grade_batch
        from grader.worker.client import Zygote, ZygoteError

        try:
            zygote = Zygote(hidden=[p for p in (settings.out, settings.submissions) if p])
        except ZygoteError as exc:
            conn.send(("broken", str(exc)))
            return
        conn.send(("isolation", (zygote.isolation, zygote.missing)))
        current: list[GradeTask] = []

        def submissions() -> Iterable[Submission]:
            while (task := conn.recv()) is not None:
                current[:] = [task]
                yield prepare(task, settings)

        def finish(_submission: Submission, result: SubmissionResult) -> None:
            conn.send(("done", finish_and_write(result, current[0], settings)))

        with zygote:
            grade_batch(submissions(), finish, exercises=settings.exercises,
                        limits=settings.limits, zygote=zygote)
            # Every worker is closed and the zygote has nothing left to do: its graceful exit
            # is an interpreter tearing down torch (about a second, which the run's last
            # grading process would add to every run). Its workers die with it anyway.
            process = getattr(zygote, "process", None)
            if process is not None:
                process.kill()
    except (KeyboardInterrupt, EOFError, BrokenPipeError):
        pass  # stopped by the parent, or the parent is gone
    # Everything is written (atomically) and the zygote is closed: skip the interpreter's
    # teardown of torch and pytest (up to a second the parent would wait for).
    os._exit(0)


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


def grade_in_pool(tasks: Iterable[GradeTask], *, settings: PoolSettings, jobs: int,
                  on_result: Callable[[SubmissionResult], None] | None = None,
                  on_isolation: Callable[[str, list[str]], None] | None = None,
                  serve: Callable[[Connection, PoolSettings], None] = serve
                  ) -> list[SubmissionResult]:
    """Grade `tasks` in `jobs` grading processes; every result (graded, or a grader failure
    written here when a process died twice on it) goes to `on_result` as it arrives, and the
    isolation level of the first sandbox started (level, what is missing) to `on_isolation`.

    Raises `PoolBroken` when grading processes cannot start; KeyboardInterrupt stops every
    process before it propagates.
    """
    pending = deque(tasks)
    if not pending:
        return []
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD + [f"grader.checks.{f.stem}"
                                          for f in check_files(settings.exercises)])
    attempts: Counter[str] = Counter()
    results: list[SubmissionResult] = []
    slots: list[_Slot] = []       # grading, or ready to
    finishing: list[_Slot] = []   # told to finish: no work left for them
    early_deaths = 0

    def start() -> _Slot:
        ours, theirs = ctx.Pipe()
        process = ctx.Process(target=serve, args=(theirs, settings), name="torchgrade-grading",
                              daemon=True)
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
                failed = grader_failure(task, f"its grading process died: {reason}")
                try:
                    write_submission_outputs(failed, settings.out)
                except Exception:  # noqa: BLE001 - still counted (NOT GRADED, exit 1)
                    log.exception("torchgrade: the failure note of %s could not be written",
                                  student)
                deliver(failed)
        if pending and len(slots) < jobs:
            slots.append(start())

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
            busy = [s.since + TASK_TIMEOUT - now for s in slots if s.task is not None]
            ready = wait([s.conn for s in slots] + [s.process.sentinel for s in slots],
                         timeout=max(min(busy), 0.0) if busy else None)
            for slot in list(slots):
                if slot.conn in ready:
                    try:
                        kind, payload = slot.conn.recv()
                    except (EOFError, OSError):
                        lost(slot, _death(slot.process))
                        continue
                    if kind == "broken":
                        raise PoolBroken(f"the sandbox could not start: {payload}")
                    if kind == "isolation":
                        slot.started = True
                        if on_isolation is not None:
                            on_isolation(*payload)
                            on_isolation = None  # once per run: every process has the same
                        continue
                    slot.task, slot.done = None, slot.done + 1
                    deliver(payload)
                elif slot.process.sentinel in ready:
                    lost(slot, _death(slot.process))
                elif slot.task is not None and time.monotonic() - slot.since > TASK_TIMEOUT:
                    slot.process.kill()
                    lost(slot, f"stuck for {TASK_TIMEOUT:g} s")
    except BaseException:
        _stop(slots + finishing, interrupt=True)
        raise
    _stop(slots + finishing, interrupt=False)
    return results


def _death(process: multiprocessing.process.BaseProcess) -> str:
    process.join(1)
    code = process.exitcode
    if code is None:
        return "it stopped answering"
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
