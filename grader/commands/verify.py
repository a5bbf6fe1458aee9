"""`torchgrade verify [--course DIR] [EXERCISE ...]`: prove a course's checks (wiring only; the
work is `grader.authoring.verify`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grader.authoring.verify import (render_survivors, summary_lines, validate, verdict_line,
                                      verify)
from grader.course.folder import active_course
from grader.outputs.writing import write_atomic


def main(args: argparse.Namespace) -> int:
    course = active_course()  # --course DIR, made active by grader.cli
    validate(course, args.exercises or None, budget=args.budget, max_mutants=args.max_mutants)
    print(f"Verifying the course {course.name!r} ({course.root}) ...", flush=True)

    def show(exercise, verdict) -> None:
        print("\n".join(summary_lines(exercise, verdict)), flush=True)

    report = verify(course, args.exercises or None, budget=args.budget,
                    max_mutants=args.max_mutants, jobs=args.jobs, strict=args.strict,
                    on_exercise=show)
    if args.json is not None:
        write_atomic(Path(args.json), report.model_dump_json(indent=2) + "\n")
    html = args.html if args.html is not None else Path("torchgrade-verify.html")
    write_atomic(Path(html), render_survivors(report, course_name=course.name))
    print(verdict_line(report, strict=args.strict))
    print(f"Survivors: {os.fspath(html)}" + (f"; JSON: {args.json}" if args.json else ""))
    return report.exit_code()
