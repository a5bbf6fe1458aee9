"""`torchgrade notebooks`: one student notebook (or answer key) per exercise."""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat

from grader.commands.common import UsageError, full_package_only
from grader.intake.plan import chosen_exercises
from grader.course.folder import active_course, default_root


def notebooks(*, out: Path, exercises: list[str] | None = None,
              solutions: bool = False) -> list[Path]:
    """Write one student notebook per exercise into `out`; with `solutions`, answer keys (the
    same notebooks with the reference solutions in the stub cells), for instructors."""
    from grader.release.notebooks import (exercise_notebook, fill_solutions, solution_path,
                                  visible_targets, write_notebooks)

    # (release: notebooks/)
    full_package_only("notebooks --solutions" if solutions else "notebooks")
    chosen = chosen_exercises(exercises)
    # Notebooks of a course other than the installed default name it in their check cells,
    # so that checking in Jupyter (whose kernel starts anywhere) grades with that course.
    course = active_course()
    named = None if course.root == default_root() else str(course.root)
    if not solutions:
        return write_notebooks(Path(out), chosen, course=named)
    targets = visible_targets(chosen)
    paths = []
    for exercise in chosen:
        source = solution_path(exercise)
        if source is None:
            raise UsageError(f"no reference solution for {exercise}")
        nb = fill_solutions(exercise_notebook(exercise, checks=targets[exercise], course=named),
                            source.read_text(encoding="utf-8"))
        path = Path(out) / f"{exercise}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
        paths.append(path)
    return paths



def main(args: argparse.Namespace) -> int:
    paths = notebooks(out=args.out, exercises=args.exercises, solutions=args.solutions)
    print("\n".join(str(p) for p in paths))
    return 0
