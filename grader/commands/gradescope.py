"""`torchgrade gradescope-bundle` (an autograder zip) and `torchgrade gradescope-run` (inside
Gradescope's container: grade ROOT/submission)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from grader.commands.common import (UsageError, full_package_only, grade_one, sandbox,
                                     warn_isolation)
from grader.intake.plan import plan_of
from grader.course.registry import known_exercises
from grader.intake.assignment import from_exercises
from grader.intake.submission import load_quietly
from grader.models import SubmissionResult
from grader.outputs import terminal
from grader.worker.limits import WorkerLimits

log = logging.getLogger("torchgrade")


def gradescope_bundle(*, out: Path, assignment: Path | None = None,
                      exercises: list[str] | None = None) -> Path:
    """Build a Gradescope autograder zip for the assignment (default: every exercise)."""
    from grader.release.gradescope_bundle import build_bundle

    full_package_only("gradescope-bundle")
    plan = plan_of(assignment, exercises) or from_exercises(known_exercises())
    return build_bundle(Path(out), name=plan.name or "torchgrade",
                        exercises=[(e.name, e.points) for e in plan.exercises])


def gradescope_run(*, root: Path | None = None, assignment: Path | None = None,
                   limits: WorkerLimits | None = None) -> tuple[SubmissionResult, Path]:
    """Inside a Gradescope container: grade ROOT/submission, write ROOT/results/results.json
    in Gradescope's format (and the torchgrade result and report beside it)."""
    from grader.outputs.gradescope import autograder_root, to_gradescope, write_results

    root = autograder_root(root)
    folder = root / "submission"
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (is this a Gradescope autograder?)")
    plan = (plan_of(assignment, None) if assignment is not None and Path(assignment).exists()
            else from_exercises(known_exercises()))
    assert plan is not None  # plan_of gives None only when given neither file nor exercises
    submission = load_quietly(folder, "submission", plan.exercise_names)
    with sandbox() as zygote:
        warn_isolation(zygote)
        result = grade_one(submission, exercises=plan.exercise_names, limits=limits,
                           zygote=zygote, assignment=plan)
    path = write_results(to_gradescope(result), root)
    write_json_quietly(result, root / "results")
    return result, path


def write_json_quietly(result: SubmissionResult, folder: Path) -> None:
    """The torchgrade result and report next to Gradescope's file, for staff debugging."""
    try:
        from grader.outputs.writing import write_atomic, write_json
        from grader.outputs.report import render_report

        write_json(result, folder / "torchgrade-results.json")
        write_atomic(folder / "torchgrade-report.html", render_report(result))
    except OSError:
        log.warning("torchgrade: could not write the torchgrade report next to results.json")



def main_bundle(args: argparse.Namespace) -> int:
    path = gradescope_bundle(out=args.out, assignment=args.assignment, exercises=args.exercises)
    print(f"Gradescope autograder: {path}")
    return 0


def main_run(args: argparse.Namespace) -> int:
    result, path = gradescope_run(root=args.root, assignment=args.assignment)
    print(terminal.checks_text(result))
    print(f"\nScore: {result.score:g} / {result.max_score:g}. Gradescope results: {path}")
    return 0
