"""Run the checks of one loaded submission in a pytest session of its own (`run_checks`); a
batch of them shares one session (`grader.running.batch`)."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from grader.checking.plugin import GradingSession, ResultCollector, prepare_checks, session_args
from grader.course.folder import active_course
from grader.course.registry import check_files
from grader.models import CheckRun, Submission
from grader.worker.client import Zygote
from grader.worker.deferred_dynamo import defer as defer_dynamo
from grader.worker.limits import WorkerLimits

if TYPE_CHECKING:
    from grader.checking.selection import CheckSelection


def run_checks(submission: Submission, *, exercises: list[str],
               limits: WorkerLimits | None = None, zygote: Zygote | None = None,
               checks_dir: Path | None = None, select: CheckSelection | None = None
               ) -> CheckRun:
    """Run the checks of `exercises` against `submission`; what they gave, to be scored
    (`grader.scoring.results.result_of`).

    Student code runs only in workers forked by `zygote` (one is started when none is given).
    Never raises for anything the submission does; KeyboardInterrupt when the session was
    interrupted (Ctrl-C), rather than a partial run. `select` (a
    `grader.checking.selection.CheckSelection`) runs only some of the checks and records the
    hidden ones it left out; default: all.
    """
    # References are computed single-threaded, like the workers, so that seeded runs agree.
    torch.set_num_threads(1)
    defer_dynamo()  # as in the workers: an optimizer step need not import torch._dynamo
    session = GradingSession(submission, limits=limits, zygote=zygote)
    collector = ResultCollector()
    checks_dir = checks_dir or active_course().checks_dir
    prepare_checks(checks_dir)
    args = session_args(check_files(exercises, checks_dir=checks_dir), checks_dir)
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(args, plugins=[session, collector] + ([select] if select else []))
        if collector.interrupted:
            # pytest ends the session on Ctrl-C and returns: what ran is partial, not a result
            # to score or write (a check interrupted half-way would read as failed).
            raise KeyboardInterrupt
        modules = session.module_runs()
    finally:
        isolation = session.isolation
        session.close()
    return CheckRun(submission=submission, exercises=exercises, checks=collector.results,
                    modules=modules, isolation=isolation,
                    grading_s=time.perf_counter() - started)
