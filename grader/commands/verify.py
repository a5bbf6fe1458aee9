"""`torchgrade verify [--course DIR] [EXERCISE ...]`: prove a course's checks (wiring only; the
work is `grader.authoring.verify`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grader.authoring.verify import (render_survivors, summary_lines, validate, verdict_line,
                                      verify)
from grader.course.folder import active_course
from grader.errors import UsageError
from grader.outputs.writing import writable_problem, write_atomic

DEFAULT_HTML = Path("torchgrade-verify.html")


def outputs(args: argparse.Namespace) -> dict[str, Path]:
    """Where the run's files go, by option (--html always, --json when given); UsageError
    before anything runs when one of them could not be written."""
    paths = {"--html": Path(args.html if args.html is not None else DEFAULT_HTML)}
    if args.json is not None:
        paths["--json"] = Path(args.json)
    for option, path in paths.items():
        if problem := writable_problem(path):
            raise UsageError(f"{option} {path}: cannot be written there ({problem})")
    if len(set(paths.values())) < len(paths):
        raise UsageError("--html and --json name the same file")
    return paths


def main(args: argparse.Namespace) -> int:
    course = active_course()  # --course DIR, made active by grader.cli
    validate(course, args.exercises or None, budget=args.budget, max_mutants=args.max_mutants)
    paths = outputs(args)  # before the run: it may be long
    print(f"Verifying the course {course.name!r} ({course.root}) ...", flush=True)

    def show(exercise, verdict) -> None:
        print("\n".join(summary_lines(exercise, verdict)), flush=True)

    report = verify(course, args.exercises or None, budget=args.budget,
                    max_mutants=args.max_mutants, jobs=args.jobs, strict=args.strict,
                    on_exercise=show)
    print(verdict_line(report, strict=args.strict), flush=True)
    html = paths["--html"]
    try:  # checked before the run; what changed since is still one line
        if "--json" in paths:
            write_atomic(paths["--json"], report.model_dump_json(indent=2) + "\n")
        write_atomic(html, render_survivors(report, course_name=course.name))
    except OSError as exc:
        raise UsageError(f"{exc.filename or html}: cannot be written "
                         f"({exc.strerror or exc})") from None
    survivors = sum(len(v.generated_mutants.survivors) for v in report.exercises.values())
    # (the page is every exercise's verdict: "Survivors: PATH" read as if some had survived)
    print(f"Verdicts page ({survivors} survivor{'' if survivors == 1 else 's'} listed): "
          f"{os.fspath(html)}" + (f"; JSON: {args.json}" if args.json else ""))
    return report.exit_code()
