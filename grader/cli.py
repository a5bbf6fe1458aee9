"""The `torchgrade` command line: parse, call a function in `grader.commands`, print.

Exit codes: 0 success (for `check`: every check passed; for `grade`: every submission graded,
whatever the scores), 1 `check` found failing checks, `grade` could not grade some submission, or
the grader could not start, 2 usage error (one line on stderr), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import grader
from grader import commands, terminal
from grader.models import SubmissionResult
from grader.outcomes import OUTCOMES
from grader.progress import Progress
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
    p.add_argument("--assignment", type=Path, metavar="FILE",
                   help="assignment.toml: exercises, points, due date, late policy, roster")
    p.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                   help="grading processes (default: one per core)")
    p.add_argument("--force", action="store_true",
                   help="grade again submissions whose results are up to date")
    p.add_argument("--variants", type=Path, metavar="MANIFEST",
                   help="manifest.json of `torchgrade variants`: score each student's bug hunts "
                        "on the faults of their own copy")
    _common(p)

    p = sub.add_parser("check", help="check your work (a .py, .ipynb, folder or .zip): the "
                       "visible checks, with why each one failed")
    p.add_argument("path", type=Path, metavar="PATH")
    p.add_argument("--out", type=Path, default=Path("torchgrade-check"), metavar="OUT",
                   help="where to write the report (default: ./torchgrade-check)")
    p.add_argument("--hidden", action="store_true",
                   help="run the hidden checks too (full package only; for self-learners)")
    p.add_argument("--only", metavar="NAME,NAME", type=_names,
                   help="only the checks of these functions or classes")
    _color(p)
    _common(p)

    p = sub.add_parser("demo", help="grade the bundled sample class and say where the index is")
    p.add_argument("--out", type=Path, default=Path("torchgrade-demo"), metavar="OUT",
                   help="working folder (default: ./torchgrade-demo)")
    p.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                   help="grading processes (default: one per core)")

    p = sub.add_parser("variants", help="write each student their own bug-hunt files (a "
                       "deterministic subset of faults) and the instructor's manifest")
    p.add_argument("--roster", type=Path, required=True, metavar="CSV",
                   help="roster CSV with a student_id column (as for assignments)")
    p.add_argument("--seed", type=int, required=True, metavar="S",
                   help="same roster and seed: same files")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="DIR/<student>/bughunt/*.py and DIR/manifest.json")
    p = sub.add_parser("release", help="build the student release: stubs, notebooks, visible "
                       "checks and the grader to run them, nothing that gives answers away")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="exercise modules to release (default: all)")
    p.add_argument("--force", action="store_true", help="replace DIR if it is not empty")

    p = sub.add_parser("notebooks", help="write one student notebook per exercise module")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="exercise modules (default: all)")
    p.add_argument("--solutions", action="store_true",
                   help="answer keys: the reference solutions in the stub cells (instructors)")

    p = sub.add_parser("solution", help="show the reference solution of an exercise you have "
                       "tried (self-learners with the full package)")
    p.add_argument("exercise", metavar="EXERCISE")
    p.add_argument("--attempts", type=Path, default=Path("torchgrade-check"), metavar="DIR",
                   help="where your `torchgrade check` results are (default: ./torchgrade-check)")
    p.add_argument("--i-have-tried", action="store_true",
                   help="show it without a graded attempt")

    p = sub.add_parser("gradescope-bundle", help="build a Gradescope autograder zip")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where the zip goes")
    p.add_argument("--assignment", type=Path, metavar="FILE",
                   help="assignment.toml (default: every exercise at its declared points)")
    p.add_argument("--exercises", metavar="A,B", type=_names, help="exercise modules to grade")

    p = sub.add_parser("gradescope-run", help="(inside Gradescope) grade ROOT/submission, write "
                       "ROOT/results/results.json")
    p.add_argument("--root", type=Path, metavar="ROOT",
                   help="default: $TORCHGRADE_AUTOGRADER_ROOT or /autograder")
    p.add_argument("--assignment", type=Path, metavar="FILE")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def _color(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the summary (default: auto, when printing to a terminal)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="exercise modules to grade (default: those found in the submissions)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="default deadline of each call into student code (default 5)")


def _limits(args: argparse.Namespace) -> WorkerLimits:
    timeout = getattr(args, "timeout", None)
    if timeout is not None and timeout <= 0:
        raise commands.UsageError("--timeout must be positive")
    return WorkerLimits(call_timeout=timeout) if timeout else WorkerLimits()


def _print_checks(result: SubmissionResult) -> None:
    for part in result.exercises:
        print(f"\n{part.exercise}: {part.score:g} / {part.max_score:g}"
              + (f"  ({part.path})" if part.path else ""))
        for note in part.notes:
            print(f"  note: {note}")
        for c in (c for c in result.checks if c.exercise == part.exercise):
            label = OUTCOMES[c.status].word
            print(f"  [{label:^9}] {c.title}  ({c.points:g}/{c.max_points:g}, {c.visibility})")
            if c.status != "passed":
                for line in c.message.splitlines():
                    print(f"              {line}")
                _print_diagnoses(c)


def _print_diagnoses(check) -> None:
    """The check's diagnoses, as much as it reveals (as in the HTML report)."""
    from grader.report import diagnosis_views

    for d in diagnosis_views(check):
        if not d.known:
            continue
        print(f"              {'likely cause: ' + d.title if d.cause else 'known symptom'}: "
              f"{d.symptom}")
        if d.fix:
            print(f"              fix: {d.fix}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = build_parser().parse_args(argv)
    progress = Progress()
    try:
        if args.command == "grade":
            print(f"Grading {args.submissions} ...", flush=True)
            summary = commands.grade(args.submissions, out=args.out, exercises=args.exercises,
                                     assignment=args.assignment, jobs=args.jobs,
                                     force=args.force, limits=_limits(args),
                                     on_start=progress.start, on_result=progress.result,
                                     variants=args.variants)
            progress.close()
            print(_summary_line(summary))
            return 1 if summary.failures else 0
        if args.command == "check":
            work = commands.check_work(args.path, out=args.out, exercises=args.exercises,
                                       hidden=args.hidden, only=args.only, limits=_limits(args))
            print(terminal.summary(work.result, pending=work.pending,
                                   report=[str(r) for r in work.reports],
                                   color=terminal.use_color(args.color)))
            return 0 if work.result.all_passed else 1
        if args.command == "demo":
            print(f"Grading the sample class in {args.out} ...", flush=True)
            summary = commands.demo(out=args.out, jobs=args.jobs, on_start=progress.start,
                                    on_result=progress.result)
            progress.close()
            print(f"Done. Open the class index: {summary.index}")
            return 1 if summary.failures else 0
        if args.command == "variants":
            manifest = commands.variants(roster=args.roster, seed=args.seed, out=args.out)
            print(f"Bug-hunt copies for each student in {args.out}; keep the key (do not hand it "
                  f"out): {manifest}")
            return 0
        if args.command == "release":
            built = commands.release(out=args.out, exercises=args.exercises, force=args.force)
            print(release_summary(built))
            return 0
        if args.command == "notebooks":
            paths = commands.notebooks(out=args.out, exercises=args.exercises,
                                       solutions=args.solutions)
            print("\n".join(str(p) for p in paths))
            return 0
        if args.command == "solution":
            print(commands.solution(args.exercise, attempts=args.attempts,
                                    i_have_tried=args.i_have_tried), end="")
            return 0
        if args.command == "gradescope-bundle":
            path = commands.gradescope_bundle(out=args.out, assignment=args.assignment,
                                              exercises=args.exercises)
            print(f"Gradescope autograder: {path}")
            return 0
        if args.command == "gradescope-run":
            result, path = commands.gradescope_run(root=args.root, assignment=args.assignment)
            _print_checks(result)
            print(f"\nScore: {result.score:g} / {result.max_score:g}. Gradescope results: {path}")
            return 0
    except commands.UsageError as exc:
        progress.close()
        print(f"torchgrade: error: {exc}", file=sys.stderr)
        return 2
    except commands.GraderUnavailable as exc:
        progress.close()
        print(f"torchgrade: the sandbox could not start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.close()
        print("torchgrade: interrupted; what was graded is kept, run the same command again to "
              "finish", file=sys.stderr)
        return 130
    return 2


def release_summary(built) -> str:
    recorded = ", ".join(f"{n} ({k} calls)" for n, k in built.recorded.items()) or "none needed"
    lines = [f"Student release of {', '.join(built.exercises)} in {built.out}: "
             f"{len(built.files)} files.",
             f"  notebooks: {built.out / 'notebooks'}; stubs: {built.out / 'exercises'}",
             f"  reference values recorded for the visible checks: {recorded}",
             f"  hidden checks listed by title only: {built.hidden}",
             f"  leak scan: {built.secrets} secrets (solution code, reference code, hidden "
             "checks) looked for in every file: none found"]
    lines += [f"  shipped on purpose: {a}" for a in built.allowed]
    lines.append(f"Students: pip install -c {built.out / 'constraints.txt'} {built.out}  "
                 f"(see {built.out / 'README.md'})")
    return "\n".join(lines)


def _summary_line(summary: commands.GradeSummary) -> str:
    n = len(summary.results)
    done = f"{summary.graded} graded now, {summary.up_to_date} up to date" if summary.up_to_date \
        else f"{summary.graded} graded"
    rate = (f", {summary.seconds / summary.graded:.2f} s each" if summary.graded else "")
    failures = (f", {summary.failures} NOT GRADED (grader failures; run again)"
                if summary.failures else "")
    return (f"Graded {n} submission{'' if n == 1 else 's'} ({done}) in {summary.seconds:.1f} s"
            f"{rate}: {summary.full_marks} with full marks{failures}. "
            f"Class index: {summary.index}")


if __name__ == "__main__":
    sys.exit(main())
