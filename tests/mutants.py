"""The shipped curriculum's declared mutants (`mutants/<exercise>/<name>.diff` of the course, each
a patch of the solution naming on its first line the checks it must fail), for the tests: a
mutant's `source()` is the whole wrong module, the solution patched."""

from __future__ import annotations

from grader.course.folder import DeclaredMutant, default_course


def mutants_of(exercise: str) -> list[DeclaredMutant]:
    return default_course().mutants(exercise)
