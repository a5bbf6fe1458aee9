"""The `torchgrade` command line: parse, call a function in `grader.commands`, print.

Exit codes: 0 success (for `check`: every check passed), 1 `check` found failing checks or the
grader could not start, 2 usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import grader
from grader import commands
from grader.models import SubmissionResult
from grader.report import STATUS_LABEL
from grader.worker.client import ZygoteError
from grader.worker.limits import WorkerLimits


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints the whole usage)
        self.exit(2, f"torchgrade: error: {message}\n")


def build_parser() -> Parser:
    parser = Parser(prog="torchgrade", description="Grade PyTorch fundamentals exercises.")
    parser.add_argument("--version", action="version", version=f"torchgrade {grader.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("grade", help="grade a folder with one folder (or .zip) per student")
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    p.add_argument("--out", type=Path, required=True, metavar="OUT",
                   help="where results, reports, index.html and grades.csv go")
    _common(p)

    p = sub.add_parser("check", help="grade one submission (a file or a folder) and print why")
    p.add_argument("path", type=Path, metavar="PATH")
    p.add_argument("--out", type=Path, default=Path("torchgrade-check"), metavar="OUT",
                   help="where to write the report (default: ./torchgrade-check)")
    _common(p)

    p = sub.add_parser("demo", help="grade the bundled sample class and say where the index is")
    p.add_argument("--out", type=Path, default=Path("torchgrade-demo"), metavar="OUT",
                   help="working folder (default: ./torchgrade-demo)")
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exercises", metavar="A,B", type=lambda s: [x for x in s.split(",") if x],
                   help="exercise modules to grade (default: those found in the submissions)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="default deadline of each call into student code (default 5)")


def _limits(args: argparse.Namespace) -> WorkerLimits:
    timeout = getattr(args, "timeout", None)
    if timeout is not None and timeout <= 0:
        raise commands.UsageError("--timeout must be positive")
    return WorkerLimits(call_timeout=timeout) if timeout else WorkerLimits()


def _progress(result: SubmissionResult) -> None:
    flag = "" if result.all_passed else f"  ({sum(c.status != 'passed' for c in result.checks)} not passed)"
    print(f"  {result.student:<24} {result.score:g} / {result.max_score:g}{flag}", flush=True)


def _print_checks(result: SubmissionResult) -> None:
    for part in result.exercises:
        print(f"\n{part.exercise}: {part.score:g} / {part.max_score:g}"
              + (f"  ({part.path})" if part.path else ""))
        for note in part.notes:
            print(f"  note: {note}")
        for c in (c for c in result.checks if c.exercise == part.exercise):
            label = STATUS_LABEL[c.status].upper()
            print(f"  [{label:^9}] {c.title}  ({c.points:g}/{c.max_points:g}, {c.visibility})")
            if c.status != "passed":
                for line in c.message.splitlines():
                    print(f"              {line}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = build_parser().parse_args(argv)
    try:
        if args.command == "grade":
            print(f"Grading {args.submissions} ...", flush=True)
            summary = commands.grade(args.submissions, out=args.out, exercises=args.exercises,
                                     limits=_limits(args), on_result=_progress)
            print(f"Graded {len(summary.results)} submissions. Class index: {summary.index}")
            return 0
        if args.command == "check":
            result, report = commands.check(args.path, out=args.out, exercises=args.exercises,
                                            limits=_limits(args))
            _print_checks(result)
            print(f"\nScore: {result.score:g} / {result.max_score:g}. Report: {report}")
            return 0 if result.all_passed else 1
        if args.command == "demo":
            print(f"Grading the sample class in {args.out} ...", flush=True)
            summary = commands.demo(out=args.out, on_result=_progress)
            print(f"Done. Open the class index: {summary.index}")
            return 0
    except commands.UsageError as exc:
        print(f"torchgrade: error: {exc}", file=sys.stderr)
        return 2
    except ZygoteError as exc:
        print(f"torchgrade: the sandbox could not start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("torchgrade: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
