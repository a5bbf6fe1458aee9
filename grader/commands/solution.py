"""`torchgrade solution EXERCISE`: the reference solution, for a self-learner who has tried."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.models import NO_FUNCTION_RAN
from grader.commands.common import UsageError, full_package_only
from grader.intake.plan import chosen_exercises


def solution(exercise: str, *, attempts: Path = Path("torchgrade-check"),
             i_have_tried: bool = False) -> str:
    """The reference solution of `exercise`, for a self-learner who has tried it: refused
    unless `attempts` (where `torchgrade check` writes) holds a graded attempt at it, one in
    which some check got further than "not implemented yet", or `i_have_tried`."""
    from grader.release.notebooks import solution_path

    full_package_only("solution")
    exercise = chosen_exercises([exercise])[0]
    path = solution_path(exercise)
    if path is None:
        raise UsageError(f"there is no reference solution of {exercise}")
    if not i_have_tried and not tried(exercise, Path(attempts)):
        raise UsageError(f"try {exercise} first: fill in its stub and run `torchgrade check "
                         f"{stub_here(exercise)}` (its results in {attempts} unlock the "
                         "solution), or say --i-have-tried")
    return path.read_text(encoding="utf-8")


def stub_here(exercise: str) -> str:
    """Where the stub of `exercise` is, as a path from here: `exercises/<file>` in a clone's root
    or a release folder, else the file's own name (the folder a student works in)."""
    from grader.course.folder import active_course

    name = active_course().student_file(exercise)
    return f"exercises/{name}" if (Path("exercises") / name).is_file() else name


def tried(exercise: str, attempts: Path) -> bool:
    """Whether `attempts` holds a result in which some check of `exercise` ran a function of
    the student's (not one of a module that does not compile or import; for a bug hunt, a
    hidden check: its visible checks pass on the untouched script too)."""
    from grader.course.bughunt import is_bughunt
    from grader.outputs.writing import read_json

    from grader.commands.check import ONLY

    for path in sorted([*Path(attempts).glob("*/results.json"),
                        *Path(attempts).glob(f"*/{ONLY}/results.json")]):
        try:
            result = read_json(path)
        except (OSError, ValueError):
            continue
        for c in result.checks:
            if is_bughunt(exercise) and c.visibility == "visible":
                continue
            if c.exercise == exercise and (c.status == "passed"
                                           or c.reason not in NO_FUNCTION_RAN):
                return True
    return False


def main(args: argparse.Namespace) -> int:
    print(solution(args.exercise, attempts=args.attempts, i_have_tried=args.i_have_tried), end="")
    return 0
