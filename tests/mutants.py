"""The shipped curriculum's declared mutants (`mutants/<exercise>/<name>.py`, each a
whole wrong module naming on its first line the checks it must fail), for the tests."""

from __future__ import annotations

from grader.course.folder import DeclaredMutant, default_course


def mutants_of(exercise: str) -> list[DeclaredMutant]:
    return default_course().mutants(exercise)
