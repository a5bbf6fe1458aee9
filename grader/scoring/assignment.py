"""An assignment applied to a result: each exercise rescaled to its points, the late penalty."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from grader.intake.assignment import Assignment, aware_utc
from grader.models import SubmissionResult


def apply_assignment(result: SubmissionResult, assignment: Assignment) -> SubmissionResult:
    """`result` with each exercise rescaled to the points the assignment gives it, and the late
    penalty of its `submitted_at`; `score` stays the sum of the (rescaled) check points."""
    result = result.model_copy(deep=True)
    result.assignment = assignment.name or None
    for part in result.exercises:
        target = assignment.points_of(part.exercise)
        if target is None or part.max_score <= 0:
            continue
        factor = target / part.max_score
        for check in result.checks:
            if check.exercise == part.exercise:
                check.points = round(check.points * factor, 6)
                check.max_points = round(check.max_points * factor, 6)
        mine = [c for c in result.checks if c.exercise == part.exercise]
        part.score = round(sum(c.points for c in mine), 6)
        part.max_score = round(sum(c.max_points for c in mine), 6)
    result.late_penalty = late_penalty(result.submitted_at, assignment, result.max_score)
    return result


def late_penalty(submitted_at: datetime | None, assignment: Assignment, max_score: float) -> float:
    """Points off: `penalty_per_day` of the maximum per started day past the due time (after the
    grace period), at most `max_penalty` of it. No timestamp, no due date or no policy: none."""
    policy, due = assignment.late_policy, assignment.due_utc
    if submitted_at is None or due is None or policy is None:
        return 0.0
    late = aware_utc(submitted_at) - due - timedelta(minutes=policy.grace_minutes)
    if late <= timedelta(0):
        return 0.0
    days = math.ceil(late / timedelta(days=1))
    return round(min(policy.max_penalty, days * policy.penalty_per_day) * max_score, 6)
