"""One submission's steps in a grading process, for `grader.running.pool` (and a Dask worker's
grading process): read its files, load them, score the run of its checks and write the result,
or record why it could not be graded. `STEPS` is the typed object the pool receives
(`grader.running.pool.GradingSteps`): the pool never imports this stage.

`task_for` makes the task of one student in the parent (which reads no student file beyond
fingerprints and an LMS's sidecar)."""

from __future__ import annotations

import logging
from pathlib import Path

from grader.course.bughunt import apply_variants
from grader.grading.finish import Finishing
from grader.grading.writer import write_result
from grader.intake.assignment import submission_time
from grader.intake.files import Inode, own_links
from grader.intake.lms import read_sidecar
from grader.intake.submission import load_quietly, original_name_note
from grader.models import CheckRun, Submission, SubmissionResult
from grader.outputs.writing import printable
from grader.running.pool import GradeTask, GradingSteps, PoolSettings
from grader.scoring.results import grader_failure, result_of

log = logging.getLogger("torchgrade")


def task_for(student: str, mark: str, path: Path, links: set[Inode], *,
             staged: bool = False, renamed_from: str | None = None,
             notes: list[str] | None = None) -> GradeTask:
    """The task of one student; a folder torchgrade `staged` has a sidecar (what the LMS
    said), which gives its notes and late marker (a student's own folder is never asked:
    a sidecar there would be the student's word). `renamed_from`: the class folder graded
    under the id `student` of a roster row; `notes`: what the class's intake says besides."""
    sidecar = read_sidecar(path) if staged else None
    submitted_at, note = submission_time(path) if path.is_dir() else (None, None)
    return GradeTask(student=student, path=path, fingerprint=mark, own_links=sorted(links),
                     submitted_at=submitted_at,
                     notes=((list(sidecar.notes) if sidecar else []) + ([note] if note else [])
                            + list(notes or [])),
                     late_marker=bool(sidecar and sidecar.late_marker),
                     renamed_from=renamed_from)


def read_task(task: GradeTask, settings: PoolSettings) -> Submission:
    """The task's submission, read in the grading process (the parent never parses a student's
    files) unless it came loaded, with the student's bug-hunt variants applied; never raises
    for anything in the student's files."""
    submission = task.submission if task.submission is not None else load_task(task, settings)
    if settings.variants is not None:
        submission = apply_variants(submission, settings.variants)
    return submission


def load_task(task: GradeTask, settings: PoolSettings) -> Submission:
    """The intake of a task: its submission's files read (with the notes of the class's
    intake), nothing applied yet. Run by the grading process, or on a Dask run by the client
    (the cluster's workers see no path of the client's). Never raises for anything in the
    student's files."""
    assert task.path is not None  # a task comes with its submission or its path
    with own_links(task.own_links):
        submission = load_quietly(task.path, task.student, settings.exercises)
    if task.renamed_from is not None:  # (the class's note says why the id differs)
        named = original_name_note(task.path, submission.student)
        submission.notes = [n for n in submission.notes if n != named]
    # (An absent roster student's sidecar says "nothing handed in", and so does the intake of
    # the empty folder it has: once.)
    submission.notes[:0] = [n for n in task.notes if n not in submission.notes]
    return submission


def finish_task(outcome: CheckRun | BaseException, task: GradeTask, settings: PoolSettings
                ) -> SubmissionResult:
    """Score `outcome` and write the submission's outputs (`grader.grading.writer`); never
    raises. What cannot be written as it is is written with its text escaped (same verdicts,
    same fingerprint); when not even that can be written, a grader failure (no fingerprint:
    the next run retries) is returned, written if possible: the run then says NOT GRADED and
    exits 1."""
    try:
        if isinstance(outcome, BaseException):
            made = grader_failure(task.student, type(outcome).__name__,
                                  submitted_at=task.submitted_at)
        else:
            made = result_of(outcome, assignment=settings.assignment,
                             submitted_at=task.submitted_at, late_marker=task.late_marker)
        return write_result(made, settings.out, Finishing(fingerprint=task.fingerprint),
                            escape_if_unwritable=True)
    except Exception as exc:  # noqa: BLE001 - one submission's outputs, never the process
        log.exception("torchgrade: writing the results of %s failed", task.student)
        return fail_task(task, f"its results could not be written: {type(exc).__name__}: "
                               f"{exc}"[:400], settings)


def fail_task(task: GradeTask, reason: str, settings: PoolSettings) -> SubmissionResult:
    """The result of a submission the grader could not grade (no fingerprint: the next run
    grades it again), written if possible."""
    failed = grader_failure(task.student, printable(reason), submitted_at=task.submitted_at)
    try:
        return write_result(failed, settings.out, Finishing())
    except Exception:  # noqa: BLE001 - the parent still counts it as not graded
        log.exception("torchgrade: even the failure note of %s could not be written",
                      task.student)
    return failed


STEPS = GradingSteps(read=read_task, finish=finish_task, fail=fail_task)
