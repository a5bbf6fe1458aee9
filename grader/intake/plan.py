"""The assignment a command is asked to grade: an assignment file, a list of exercises, or the
exercises found; and its roster. Problems with the user's request raise `UsageError`."""

from __future__ import annotations

from pathlib import Path

from grader.course.registry import known_exercises
from grader.errors import UsageError
from grader.intake.assignment import (Assignment, AssignmentError, from_exercises, load_assignment,
                                      read_roster)


def plan_of(assignment: Path | None, exercises: list[str] | None) -> Assignment | None:
    """The assignment asked for: a file, a list of exercises, or None (those found)."""
    if assignment is not None and exercises is not None:
        raise UsageError("give either --assignment or --exercises, not both")
    if assignment is not None:
        try:
            plan = load_assignment(assignment)
        except AssignmentError as exc:
            raise UsageError(str(exc)) from None
        chosen_exercises(plan.exercise_names)
        return plan
    if exercises is not None:
        return from_exercises(chosen_exercises(exercises))
    return None


def roster_of(plan: Assignment) -> dict:
    """The roster of `plan`'s assignment file ({} without one), by student id."""
    if plan.roster is None:
        return {}
    try:
        return read_roster(plan.roster)
    except AssignmentError as exc:
        raise UsageError(str(exc)) from None


def chosen_exercises(exercises: list[str] | None) -> list[str]:
    """`exercises` (every exercise of the course when None), each known to the course."""
    known = known_exercises()
    if exercises is None:
        return known
    if not exercises:
        raise UsageError("no exercise named")
    unknown = [e for e in exercises if e not in known]
    if unknown:
        raise UsageError(f"unknown exercise {unknown[0]!r}; known: {', '.join(known)}")
    return list(exercises)
