"""`torchgrade prairielearn` (a PrairieLearn external grader: info.json block, entrypoint, image
recipe) and `torchgrade prairielearn-run` (inside the grading container: grade ROOT/student,
write ROOT/results/results.json)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from grader.commands.common import (GraderUnavailable, UsageError, full_package_only,
                                     grade_one, sandbox, warn_isolation)
from grader.intake.plan import plan_of
from grader.course.registry import known_exercises
from grader.intake.assignment import Assignment, from_exercises
from grader.intake.files import own_links
from grader.intake.submission import exercises_in, load_quietly

log = logging.getLogger("torchgrade")


def prairielearn(*, out: Path, exercises: list[str] | None = None,
                 assignment: Path | None = None, image: str | None = None,
                 timeout: int | None = None, reveal_hidden: bool = False) -> Path:
    """Write the PrairieLearn grader of the chosen exercises (default: every exercise) into
    `out` (see `grader.release.prairielearn`)."""
    import grader
    from grader.release.prairielearn import DEFAULT_TIMEOUT, MAX_TIMEOUT, build_grader

    full_package_only("prairielearn")
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if not 1 <= timeout <= MAX_TIMEOUT:
        raise UsageError(f"--job-timeout must be 1..{MAX_TIMEOUT} seconds (PrairieLearn's limit)")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file, not a folder")
    plan = plan_of(assignment, exercises) or from_exercises(known_exercises())
    return build_grader(out, name=plan.name or "torchgrade",
                        exercises=[(e.name, e.points) for e in plan.exercises],
                        image=image or f"torchgrade-prairielearn:{grader.__version__}",
                        timeout=timeout, reveal_hidden=reveal_hidden,
                        from_assignment=assignment is not None)


def prairielearn_run(*, root: Path | None = None, exercises: list[str] | None = None,
                     assignment: Path | None = None, reveal_hidden: bool = False):
    """Inside a PrairieLearn grading container: grade ROOT/student and write
    ROOT/results/results.json in PrairieLearn's format. Never raises for the submission nor
    for the sandbox: what cannot be graded is written `gradable: false` with the reason.
    Returns (the results written, their path)."""
    from grader.outputs.prairielearn import (PrairieLearnResults, not_gradable,
                                             prairielearn_root, to_prairielearn, write_results)

    root = prairielearn_root(root)
    plan = plan_of(assignment, exercises) or from_exercises(known_exercises())
    try:
        result = grade_student(root / "student", plan)
        results = (result if isinstance(result, PrairieLearnResults)
                   else to_prairielearn(result, reveal_hidden=reveal_hidden))
    except GraderUnavailable as exc:
        results = not_gradable(f"the grader's sandbox could not start ({exc}); please tell the "
                               "course staff")
    except Exception as exc:  # noqa: BLE001 - the student must still get a results.json
        log.exception("torchgrade: grading %s failed", root / "student")
        results = not_gradable(f"the grader failed ({type(exc).__name__}); please tell the "
                               "course staff")
    return results, write_results(results, root)


def grade_student(folder: Path, plan: Assignment):
    """The torchgrade result of the submission in `folder`, or the not-gradable results of
    one that cannot be graded: no folder, no exercise file, or no file that can be read."""
    from grader.outputs.prairielearn import not_gradable

    exercises = plan.exercise_names
    if not folder.is_dir():
        return not_gradable(f"no files were submitted ({folder} does not exist)")
    expected = ", ".join(f"{e}.py" for e in exercises)
    if not exercises_in(folder, exercises):
        found = sorted(p.name for p in folder.iterdir())[:20]
        return not_gradable(f"no exercise file was submitted: expected {expected} (or the "
                            "same names as .ipynb); found "
                            + (", ".join(found) if found else "no file at all"))
    with own_links(None):  # the container holds only this student's files
        submission = load_quietly(folder, "student", exercises)
    fatal = [m.fatal for m in submission.modules.values() if m.fatal]
    if fatal and len(fatal) == len(submission.modules):
        return not_gradable("; ".join(fatal))
    with sandbox() as zygote:
        warn_isolation(zygote)
        return grade_one(submission, exercises=exercises, limits=None, zygote=zygote,
                         assignment=plan)


def main_build(args: argparse.Namespace) -> int:
    out = prairielearn(out=args.out, exercises=args.exercises, assignment=args.assignment,
                       image=args.image, timeout=args.job_timeout,
                       reveal_hidden=args.reveal_hidden)
    print(f"PrairieLearn grader: {out / 'info.json'} (merge into each question's info.json), "
          f"image recipe in {out / 'image'}; see {out / 'README.md'}")
    return 0


def main_run(args: argparse.Namespace) -> int:
    results, path = prairielearn_run(root=args.root, exercises=args.exercises,
                                     assignment=args.assignment,
                                     reveal_hidden=args.reveal_hidden)
    # stdout may be shown to the student: the score only, never a hidden check's message.
    score = "not gradable" if not results.gradable else f"score {results.score:.4g}"
    print(f"torchgrade: {score}. PrairieLearn results: {path}")
    return 0
