"""An assignment applied to a result: each exercise rescaled to its points, the instructor's
overrides, the late penalty (against the student's own extension, when they have one)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from grader.intake.assignment import Assignment, Override, aware_utc
from grader.models import Adjustment, CheckResult, SubmissionResult


def apply_assignment(result: SubmissionResult, assignment: Assignment, *,
                     late_marker: bool = False) -> SubmissionResult:
    """`result` with each exercise rescaled to the points the assignment gives it, the
    student's overrides applied (recorded in `adjustments`), and the late penalty of its
    `submitted_at` against the student's due date (`late_marker`: the LMS said late but gave
    no time, counted as one started day); `score` stays the sum of the (rescaled, overridden)
    check points plus the exercise overrides."""
    result = result.model_copy(deep=True)
    result.assignment = assignment.name or None
    for part in result.exercises:
        target = assignment.points_of(part.exercise)
        if target is None or part.max_score <= 0:
            continue
        mine = [c for c in result.checks if c.exercise == part.exercise]
        rescale_checks(mine, target)
        part.score = round(sum(c.points for c in mine), 6)
        part.max_score = round(sum(c.max_points for c in mine), 6)
    for row in assignment.override_rows:
        if row.student == result.student:
            apply_override(result, row)
    result.due = assignment.due_of(result.student)
    result.extended = result.student in assignment.extensions
    result.late_marker = late_marker
    # The LMS's marker (no time) is late against the assignment's due date: a student's own
    # extension, which the LMS does not know, outweighs it.
    counted = late_marker and not result.extended
    if late_marker and result.extended and result.submitted_at is None:
        result.notes.append("the LMS marked this submission late (against the common due "
                            "date, without a time); with your extension it is not counted late")
    result.days_late = days_late(result.submitted_at, result.due, assignment, counted)
    result.late_penalty = penalty_of(result.days_late, assignment, result.max_score)
    return result


def rescaled(maxima: list[float], target: float) -> list[float]:
    """`maxima` scaled to add up to `target` (to 6 decimals, as points are kept): each rounded,
    and what the rounding lost or added put on the largest. Rounding each alone made 35 checks
    of an exercise rescaled to 20 points add up to 20.000005 in every export."""
    total = sum(maxima)
    if total <= 0 or not maxima:
        return list(maxima)
    scaled = [round(m * target / total, 6) for m in maxima]
    largest = max(range(len(scaled)), key=lambda i: scaled[i])
    scaled[largest] = round(scaled[largest] + target - sum(scaled), 6)
    return scaled


def rescale_checks(checks: list[CheckResult], target: float) -> None:
    """Set the maxima of `checks` to add up to `target` (`rescaled`), each check keeping its
    share of its points."""
    for check, maximum in zip(checks, rescaled([c.max_points for c in checks], target)):
        share = check.points / check.max_points if check.max_points > 0 else 0.0
        check.points = round(share * maximum, 6)
        check.max_points = maximum


def apply_override(result: SubmissionResult, row: Override) -> None:
    """Set (or add to) the points of the check or exercise `row` names, within 0 and its
    maximum; a target that names nothing becomes a note (nothing is applied)."""
    check = next((c for c in result.checks if c.id == row.target), None)
    part = next((p for p in result.exercises if p.exercise == row.target), None)
    if check is not None:
        before = check.points
        check.points = _within(before + row.points if row.relative else row.points,
                               check.max_points)
        result.adjustments.append(Adjustment(target=row.target, kind="check",
                                             exercise=check.exercise, before=before,
                                             after=check.points, reason=row.reason))
        owner = next((p for p in result.exercises if p.exercise == check.exercise), None)
        if owner is not None:
            owner.score = round(owner.score + check.points - before, 6)
    elif part is not None:
        before = part.score
        part.score = _within(before + row.points if row.relative else row.points,
                             part.max_score)
        result.adjustments.append(Adjustment(target=row.target, kind="exercise",
                                             exercise=part.exercise, before=before,
                                             after=part.score, reason=row.reason))
    else:
        result.notes.append(f"the override of {row.target!r} ({row.reason or 'no reason'}) "
                            "names no exercise or check of this assignment: not applied")


def _within(points: float, maximum: float) -> float:
    return round(min(max(points, 0.0), maximum), 6)


def days_late(submitted_at: datetime | None, due: datetime | None, assignment: Assignment,
              late_marker: bool = False) -> int:
    """Started days past `due` after the grace period; a `late_marker` without a time counts
    as one. No late policy or no due date: 0."""
    policy = assignment.late_policy
    if due is None or policy is None:
        return 0
    if submitted_at is None:
        return 1 if late_marker else 0
    late = aware_utc(submitted_at) - due - timedelta(minutes=policy.grace_minutes)
    if late <= timedelta(0):
        return 0
    return math.ceil(late / timedelta(days=1))


def penalty_of(days: int, assignment: Assignment, max_score: float) -> float:
    policy = assignment.late_policy
    if not days or policy is None:
        return 0.0
    return round(min(policy.max_penalty, days * policy.penalty_per_day) * max_score, 6)


def late_penalty(submitted_at: datetime | None, assignment: Assignment, max_score: float) -> float:
    """Points off: `penalty_per_day` of the maximum per started day past the due time (after the
    grace period), at most `max_penalty` of it. No timestamp, no due date or no policy: none."""
    return penalty_of(days_late(submitted_at, assignment.due_utc, assignment), assignment,
                      max_score)
