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

from grader.checking.plugin import GradingSession, ResultCollector
from grader.course.registry import CHECKS_DIR, check_files
from grader.models import CheckRun, Submission
from grader.worker.client import Zygote
from grader.worker.limits import WorkerLimits

if TYPE_CHECKING:
    from grader.checking.selection import CheckSelection


# pytest as a check runner: only the plugins grading needs. Each one left out saves work on
# every check (warnings, skipping, debugging wrap every test), or at session end
# (unraisableexception and threadexception collect garbage: 0.1 s each with torch loaded).
# `-s`: the grader's own stdout is not the student's (theirs is captured by the worker).
PYTEST_OPTIONS = [
    "--disable-plugin-autoload", "-p", "grader.checking.plugin", "-s",
    *[arg for plugin in ("terminal", "cacheprovider", "faulthandler", "pastebin", "junitxml",
                         "doctest", "legacypath", "logging", "unraisableexception",
                         "threadexception", "warnings", "skipping", "debugging", "stepwise",
                         "setuponly", "setupplan", "python_path")
      for arg in ("-p", f"no:{plugin}")],
]


def run_checks(submission: Submission, *, exercises: list[str],
               limits: WorkerLimits | None = None, zygote: Zygote | None = None,
               checks_dir: Path = CHECKS_DIR, select: CheckSelection | None = None
               ) -> CheckRun:
    """Run the checks of `exercises` against `submission`; what they gave, to be scored
    (`grader.scoring.results.result_of`).

    Student code runs only in workers forked by `zygote` (one is started when none is given).
    Never raises for anything the submission does. `select` (a
    `grader.checking.selection.CheckSelection`) runs only some of the checks and records the
    hidden ones it left out; default: all.
    """
    # References are computed single-threaded, like the workers, so that seeded runs agree.
    torch.set_num_threads(1)
    session = GradingSession(submission, limits=limits, zygote=zygote)
    collector = ResultCollector()
    files = check_files(exercises, checks_dir=checks_dir)
    args = [str(f) for f in files] + ["-c", str(checks_dir / "pytest.ini"),
                                      "--rootdir", str(checks_dir), *PYTEST_OPTIONS]
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(args, plugins=[session, collector] + ([select] if select else []))
        modules = session.module_runs()
    finally:
        isolation = session.isolation
        session.close()
    return CheckRun(submission=submission, exercises=exercises, checks=collector.results,
                    modules=modules, isolation=isolation,
                    grading_s=time.perf_counter() - started)
