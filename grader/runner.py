"""Grade one loaded submission: run its checks in a pytest session, assemble the result."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

import grader
from grader.bughunt import is_bughunt, select_scored
from grader.diagnose import diagnose
from grader.models import CheckResult, ExerciseResult, Submission, SubmissionResult
from grader.plugin import GradingSession, ResultCollector
from grader.registry import CHECKS_DIR, check_files
from grader.student import StudentModule
from grader.submission import not_submitted
from grader.worker.client import Zygote
from grader.worker.limits import WorkerLimits

if TYPE_CHECKING:
    from grader.selection import CheckSelection


# pytest as a check runner: only the plugins grading needs. Each one left out saves work on
# every check (warnings, skipping, debugging wrap every test), or at session end
# (unraisableexception and threadexception collect garbage: 0.1 s each with torch loaded).
# `-s`: the grader's own stdout is not the student's (theirs is captured by the worker).
PYTEST_OPTIONS = [
    "--disable-plugin-autoload", "-p", "grader.plugin", "-s",
    *[arg for plugin in ("terminal", "cacheprovider", "faulthandler", "pastebin", "junitxml",
                         "doctest", "legacypath", "logging", "unraisableexception",
                         "threadexception", "warnings", "skipping", "debugging", "stepwise",
                         "setuponly", "setupplan", "python_path")
      for arg in ("-p", f"no:{plugin}")],
]
MAX_NOTES = 20  # a notebook of 10,000 failing cells still gets a readable report


def run_checks(submission: Submission, *, exercises: list[str],
               limits: WorkerLimits | None = None, zygote: Zygote | None = None,
               checks_dir: Path = CHECKS_DIR, select: CheckSelection | None = None
               ) -> SubmissionResult:
    """Run the checks of `exercises` against `submission` and return its result.

    Student code runs only in workers forked by `zygote` (one is started when none is given).
    Never raises for anything the submission does. `select` (a `grader.selection.CheckSelection`)
    runs only some of the checks and records the hidden ones it left out; default: all.
    """
    # References are computed single-threaded, like the workers, so that seeded runs agree.
    torch.set_num_threads(1)
    session = GradingSession(submission, limits=limits, zygote=zygote)
    collector = ResultCollector()
    files = check_files(exercises, checks_dir=checks_dir)
    args = [str(f) for f in files] + ["-c", str(checks_dir / "pytest.ini"),
                                      "--rootdir", str(checks_dir), *PYTEST_OPTIONS]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(args, plugins=[session, collector] + ([select] if select else []))
    finally:
        isolation = session.isolation
        session.close()
    result = assemble_result(submission, session.modules, collector.results, exercises)
    result.isolation = isolation
    return result


def assemble_result(submission: Submission, modules: Mapping[str, StudentModule],
                    checks: list[CheckResult], exercises: list[str] | None = None
                    ) -> SubmissionResult:
    """The submission's result from its check results and what loading its modules showed:
    for bug hunts only the checks that count (`grader.bughunt.select_scored`), and every
    failing check diagnosed (`grader.diagnose`)."""
    if exercises is None:
        exercises = list(dict.fromkeys(c.exercise for c in checks))
    checks_s = round(sum(c.duration_s for c in checks), 4)
    checks = scored_checks(submission, modules, checks)
    parts = []
    for exercise in exercises:
        mine = [c for c in checks if c.exercise == exercise]
        source = submission.modules.get(exercise)
        module = modules.get(exercise)
        notes = list(source.notes) if source else [
            not_submitted(exercise)]
        if source and source.fatal:
            notes.append(source.fatal)
        if module is not None:
            notes += module.notes
        if len(notes) > MAX_NOTES:
            notes = notes[:MAX_NOTES] + [f"... and {len(notes) - MAX_NOTES} more notes"]
        parts.append(ExerciseResult(
            exercise=exercise, path=source.path if source else None,
            score=round(sum(c.points for c in mine), 6),
            max_score=round(sum(c.max_points for c in mine), 6), notes=notes,
            output=module.import_output if module is not None else ""))
    return diagnose(SubmissionResult(student=submission.student,
                                     grader_version=grader.__version__, exercises=parts,
                                     checks=checks, notes=list(submission.notes),
                                     checks_s=checks_s))


def scored_checks(submission: Submission, modules: Mapping[str, StudentModule],
                  checks: list[CheckResult]) -> list[CheckResult]:
    """Bug hunts score the faults of the student's copy, plus whatever else they broke. Only
    hidden checks are selected: a bug hunt's visible checks always show (and a student
    release, which has no other, knows none of the faults)."""
    hunts = {c.exercise for c in checks if is_bughunt(c.exercise) and c.visibility == "hidden"}
    if not hunts:
        return checks
    faults_of = {e: (submission.modules[e].faults if e in submission.modules else None)
                 for e in hunts}
    broken = {e for e in hunts if e not in submission.modules or submission.modules[e].fatal
              or (e in modules and modules[e].unavailable)}
    return select_scored(checks, faults_of, broken)
