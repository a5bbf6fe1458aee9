"""What every command shares: choosing exercises and the assignment, the sandbox, one submission
graded in a fresh pytest session. Problems with the *user's* request raise `UsageError`; problems
with a *submission* never raise: they end up in that submission's results."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from grader.course.registry import known_exercises
from grader.errors import GraderUnavailable, UsageError
from grader.intake.assignment import Assignment
from grader.intake.plan import chosen_exercises
from grader.intake.files import own_links
from grader.intake.submission import load_submission
from grader.models import Submission, SubmissionResult
from grader.worker.limits import WorkerLimits

if TYPE_CHECKING:
    from grader.checking.selection import CheckSelection

# Nothing here imports torch at module level: the parent of a bulk run only dispatches, and
# torch's import (~1.5 s of CPU) is paid by the grading processes' fork server instead.

log = logging.getLogger("torchgrade")
SUBMISSION_CALLS = 180  # a submission's budget, in deadlines of `--timeout` (at least)



def limits_of(timeout: float | None) -> WorkerLimits:
    """The worker limits of a command's `--timeout` (default deadline of each call): a longer
    deadline than the default makes the submission's budget longer by as much (180 calls'
    worth at least: 15 min for the default 5 s)."""
    if timeout is not None and timeout <= 0:
        raise UsageError("--timeout must be positive")
    if not timeout:
        return WorkerLimits()
    return WorkerLimits(call_timeout=timeout, submission_budget=max(
        WorkerLimits().submission_budget, SUBMISSION_CALLS * timeout))


def grade_one(submission: Submission, *, exercises: list[str], limits: WorkerLimits | None,
              zygote, select: CheckSelection | None = None,
              assignment: Assignment | None = None) -> SubmissionResult:
    """Run the checks in a fresh pytest session and score them (with `assignment`: its weights
    and late penalty); if the grader itself fails, the result says so instead of vanishing.
    `select` runs only some checks (see `grader.checking.selection`)."""
    from grader.running.runner import run_checks
    from grader.scoring.results import grader_failure, result_of

    try:
        run = run_checks(submission, exercises=exercises, limits=limits, zygote=zygote,
                         select=select)
        return result_of(run, assignment=assignment)
    except Exception as exc:  # noqa: BLE001
        log.exception("torchgrade: grading %s failed", submission.student)
        return grader_failure(submission.student, type(exc).__name__)


def sandbox(*, optimizers: bool = True, launched=None):
    """A started worker parent, as a context manager (GraderUnavailable if it cannot start).
    `optimizers=False`: its workers will build no torch.optim optimizer; `launched`: called
    once its process is started (see `Zygote`)."""
    from grader.course.folder import active_course
    from grader.worker.client import Zygote, ZygoteError

    try:
        return Zygote(optimizers=optimizers, launched=launched, course=active_course().root)
    except ZygoteError as exc:
        raise GraderUnavailable(str(exc)) from None


def one_submission(path: Path, exercises: list[str] | None) -> tuple[Submission, list[str]]:
    """The submission at `path` and the exercises to grade in it: `exercises`, or those found."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    chosen = chosen_exercises(exercises)
    with own_links(None):  # a student's own files, on their own machine
        # Without --exercises, what is checked is what was found: the others' absence is no news.
        submission = load_submission(path, exercises=chosen, note_missing=exercises is not None)
    if exercises is None:
        chosen = [e for e in chosen if e in submission.modules]
        if not chosen:
            names = ", ".join(f"{e}.py" for e in known_exercises())
            raise UsageError(f"no exercise file found in {path} (expected one of {names}, "
                             "or the same names as .ipynb)")
    return submission, chosen


def warn_isolation(zygote) -> None:
    from grader.grading.notices import isolation_warning

    isolation_warning(zygote.isolation, zygote.missing)


def full_package_only(what: str) -> None:
    from grader.checking.edition import student_release

    if student_release() is not None:
        raise UsageError(f"`torchgrade {what}` is not part of the student release")
