"""The one place a submission's result is made (`result_of`), from what running its checks
gave (`grader.models.CheckRun`): a bug hunt's scored checks, each exercise's part, every failing
check diagnosed, then the assignment's weights and late penalty. Every path (bulk grading,
`check`, Gradescope, `pytest --submission`, `verify`) calls it; `grader_failure` is the result
of a submission the grader could not grade. A class's results are then finished (the grading's
fingerprint, the grade replaced in OUT) in one place, `grader.grading.finish`."""

from __future__ import annotations

from datetime import datetime

import grader
from grader.course.bughunt import hunt, is_bughunt, select_scored
from grader.course.bughunt import scored_checks as scored_ids
from grader.intake.assignment import Assignment
from grader.intake.submission import not_submitted
from grader.models import CheckResult, CheckRun, ExerciseResult, SubmissionResult
from grader.scoring.assignment import apply_assignment, rescale_checks
from grader.scoring.diagnose import diagnose

MAX_NOTES = 20  # a notebook of 10,000 failing cells still gets a readable report


def result_of(run: CheckRun, *, assignment: Assignment | None = None,
              submitted_at: datetime | None = None, late_marker: bool = False
              ) -> SubmissionResult:
    """The result of `run`: assembled and diagnosed, with the run's isolation and time; with
    `assignment`, rescaled, the student's overrides applied and the late penalty of
    `submitted_at` (or of the LMS's `late_marker`) taken. It carries no fingerprint: a
    class's run stamps one when it finishes the result (`grader.grading.finish`)."""
    result = assemble(run)
    result.isolation = run.isolation
    result.grading_s = round(run.grading_s, 4)
    result.submitted_at = submitted_at
    if assignment is not None:
        result = apply_assignment(result, assignment, late_marker=late_marker)
    return result


def grader_failure(student: str, reason: str, *, submitted_at: datetime | None = None
                   ) -> SubmissionResult:
    """The result of a submission the grader could not grade. It carries no fingerprint, so the
    next run grades it again, and no checks, which is how summaries recognise it."""
    return SubmissionResult(
        student=student, grader_version=grader.__version__, submitted_at=submitted_at,
        notes=[f"the grader failed on this submission ({reason}); this is not the student's "
               "fault: run `torchgrade grade` again, and report it if it persists"])


def assemble(run: CheckRun) -> SubmissionResult:
    """The submission's result from its check results and what loading its modules showed:
    for bug hunts only the checks that count (`grader.course.bughunt.select_scored`), and every
    failing check diagnosed (`grader.scoring.diagnose`)."""
    submission, exercises, modules = run.submission, run.exercises, run.modules
    checks_s = round(sum(c.duration_s for c in run.checks), 4)
    checks = scored_checks(run)
    parts = []
    for exercise in exercises:
        mine = [c for c in checks if c.exercise == exercise]
        source = submission.modules.get(exercise)
        module = modules.get(exercise)
        notes = list(source.notes) if source else [not_submitted(exercise)]
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


def scored_checks(run: CheckRun) -> list[CheckResult]:
    """Bug hunts score the faults of the student's copy, plus whatever else they broke. Only
    hidden checks are selected: a bug hunt's visible checks always show (and a student
    release, which has no other, knows none of the faults)."""
    submission, modules, checks = run.submission, run.modules, run.checks
    hunts = {c.exercise for c in checks if is_bughunt(c.exercise) and c.visibility == "hidden"}
    if not hunts:
        return checks
    faults_of = {e: (submission.modules[e].faults if e in submission.modules else None)
                 for e in hunts}
    broken = {e for e in hunts if e not in submission.modules or submission.modules[e].fatal
              or (e in modules and modules[e].unavailable)}
    selected = select_scored(checks, faults_of, broken)
    # A check of something that worked counts when it fails (the student broke it): as a share
    # of the copy's points, which stay what its faults are worth. Added to the maximum, it gave
    # a student who broke a part the points of a perfect fix in every LMS column (and raised
    # the class's Points Possible, lowering everyone else's percentage).
    for exercise, faults in faults_of.items():
        owed = scored_ids(exercise, hunt(exercise).seeded if faults is None else faults)
        at = [i for i, c in enumerate(selected) if c.exercise == exercise]
        worth = sum(selected[i].max_points for i in at if selected[i].id in owed)
        if worth > 0 and sum(selected[i].max_points for i in at) > worth:
            mine = [selected[i].model_copy() for i in at]  # the run's own results stay as run
            rescale_checks(mine, worth)
            for i, check in zip(at, mine):
                selected[i] = check
    return selected
