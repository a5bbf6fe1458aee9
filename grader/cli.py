"""The `torchgrade` command line: parse, then dispatch to the command's module (`COMMANDS`).

Exit codes: 0 success (for `check`: every check passed; for `grade`: every submission graded,
whatever the scores; for `verify`: every exercise's solution, stub, declared mutants and hollow
implementations hold),
1 `check` found failing checks, `grade` could not grade some submission (or a check failed
itself), `verify` found an exercise that does not hold (with --strict: or a surviving generated
mutant), or the grader could not start, 2 usage error (one line on stderr), 130 interrupted
(Ctrl-C).
Every command takes `--course DIR` (else TORCHGRADE_COURSE, else the shipped curriculum).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

import grader
from grader.errors import GraderUnavailable, InterruptedGrading, UsageError


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints the whole usage)
        self.exit(2, f"torchgrade: error: {message}\n")


def build_parser() -> Parser:
    parser = Parser(prog="torchgrade", description="Grade PyTorch fundamentals exercises.")
    parser.add_argument("--version", action="version", version=f"torchgrade {grader.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("grade", help="grade a class: a folder with one folder (or .zip) per "
                       "student, or an LMS download (Canvas, Moodle, Blackboard; folder or zip)")
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
    p.add_argument("--lms", choices=("canvas", "moodle", "blackboard", "folders"),
                   help="how SUBMISSIONS is laid out (default: detected): an LMS's "
                        "\"download submissions\" folder or zip, or one folder per student")
    p.add_argument("--shard", type=_shard, metavar="K/N",
                   help="grade only the K-th (1..N) of N disjoint shards of the class (a job "
                        "array: Slurm --array=1-N, a Kubernetes Indexed Job); shards may write "
                        "into one OUT at once; then `torchgrade index OUT`")
    p.add_argument("--dask", metavar="tcp://HOST:PORT",
                   help="grade on the Dask cluster whose scheduler is at this address (needs "
                        "pip install 'torchgrade[dask]' here and on every worker; -j is unused)")
    _common(p)

    p = sub.add_parser("index", help="rebuild OUT's index.html and CSVs from every result in "
                       "it, grading nothing (after the shards of `grade --shard K/N`)")
    p.add_argument("out", type=Path, metavar="OUT")
    p.add_argument("--assignment", type=Path, metavar="FILE",
                   help="the assignment.toml graded with (default: the one the shards recorded)")
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="the exercise columns (default: those the shards or results name)")

    p = sub.add_parser("similarity", help="find students who handed in the same work: every "
                       "pair's files of each exercise compared, the starter code left out; "
                       "OUT/similarity.csv and OUT/similarity.html")
    p.add_argument("submissions", type=Path, metavar="CLASS",
                   help="what `grade` takes: a class folder, a class zip or an LMS download")
    p.add_argument("--out", type=Path, required=True, metavar="OUT",
                   help="where similarity.csv and similarity.html go (a graded class's OUT: "
                        "its index.html then links the page)")
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="exercises to compare (default: those found; bug hunts are not "
                        "compared)")
    p.add_argument("--lms", choices=("canvas", "moodle", "blackboard", "folders"),
                   help="how CLASS is laid out (default: detected)")
    p.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                   help="processes reading the files (default: one per core)")
    p.epilog = ("A pair is flagged when at least 40% of the smaller file's own work (its code "
                "beyond the starter code; names, order, comments, docstrings and layout aside) "
                "is shared, or 100 fingerprints (about 25 lines) are, and never under 40 (about "
                "ten lines): independent solutions measured at most 38% and 75 fingerprints, "
                "disguised copies of half a file or more at least 48% (docs/similarity.md).")

    p = sub.add_parser("check", help="check your work (a .py, .ipynb, folder or .zip): the "
                       "visible checks, with why each one failed")
    p.add_argument("path", type=Path, metavar="PATH")
    p.add_argument("--out", type=Path, default=Path("torchgrade-check"), metavar="OUT",
                   help="where to write the report (default: ./torchgrade-check)")
    p.add_argument("--hidden", action="store_true",
                   help="run the hidden checks too (full package only; for self-learners)")
    p.add_argument("--only", metavar="NAME,NAME", type=_names,
                   help="only the checks of these functions or classes")
    p.add_argument("--no-server", action="store_true",
                   help="check in this process, and leave no check server running (default: "
                        "the first check leaves one for later checks, from any terminal; it "
                        "exits after 15 idle minutes; TORCHGRADE_CHECK_SERVER=0 turns it off)")
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

    p = sub.add_parser("new-exercise", help="scaffold an exercise in a course folder: stub, "
                       "solution, visible and hidden check, mutants (creates course.toml)")
    p.add_argument("name", metavar="NAME", help="the exercise: the module students hand in")
    p.add_argument("--course", type=Path, metavar="DIR",
                   help="the course folder (default: $TORCHGRADE_COURSE)")

    p = sub.add_parser("verify", help="prove a course's checks: the solution scores full marks, "
                       "the stub 0, every declared mutant fails exactly its checks, no check "
                       "passes for code that does nothing; generated mutants that survive "
                       "are listed")
    p.add_argument("exercises", nargs="*", metavar="EXERCISE",
                   help="exercises to verify (default: every exercise of the course)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the verdicts as JSON")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="the page of survivors (default: ./torchgrade-verify.html)")
    p.add_argument("--budget", type=_positive_float, metavar="SECONDS",
                   help="time for the whole run; generated mutants not graded by then are "
                        "skipped (the solution, stub, declared mutants and hollow "
                        "implementations always run)")
    p.add_argument("--max-mutants", type=_count, metavar="N",
                   help="generated mutants per exercise at most (the same N every run; 0: "
                        "none)")
    p.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                   help="grading processes (default: one per core)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a generated mutant survives (not marked equivalent)")

    p = sub.add_parser("gradescope-run", help="(inside Gradescope) grade ROOT/submission, write "
                       "ROOT/results/results.json")
    p.add_argument("--root", type=Path, metavar="ROOT",
                   help="default: $TORCHGRADE_AUTOGRADER_ROOT or /autograder")
    p.add_argument("--assignment", type=Path, metavar="FILE")
    p = sub.add_parser("prairielearn", help="write a PrairieLearn external grader: the "
                       "info.json block, the entrypoint and the image recipe")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="the question's exercise modules (default: all)")
    p.add_argument("--assignment", type=Path, metavar="FILE",
                   help="assignment.toml: the exercises and their points")
    p.add_argument("--image", metavar="NAME",
                   help="the image name info.json gives (default: "
                        "torchgrade-prairielearn:VERSION; push it under your own name)")
    p.add_argument("--job-timeout", type=_positive_int, metavar="SECONDS",
                   help="PrairieLearn's timeout of one grading job (default 120, at most 600)")
    p.add_argument("--reveal-hidden", action="store_true",
                   help="show hidden checks' messages to students (default: points only)")

    p = sub.add_parser("prairielearn-run", help="(inside PrairieLearn's grading container) "
                       "grade ROOT/student, write ROOT/results/results.json")
    p.add_argument("--root", type=Path, metavar="ROOT",
                   help="default: $TORCHGRADE_PRAIRIELEARN_ROOT or /grade")
    p.add_argument("--exercises", metavar="A,B", type=_names)
    p.add_argument("--assignment", type=Path, metavar="FILE")
    p.add_argument("--reveal-hidden", action="store_true")
    for name, command in sub.choices.items():
        if name not in WRITES_A_COURSE:
            _course(command)
    return parser


# Commands that make a course folder rather than read one: their own --course, loaded by them.
WRITES_A_COURSE = {"new-exercise"}

# Commands that read a course's Python files, and whether each needs the solutions of the
# exercises it is about (a student release has none; grading only needs those hidden checks
# use, and checks whichever are there). Their files are proved readable UTF-8 Python before the
# command starts (`Course.check_sources`): a broken course is one line naming the file, never
# a traceback, and never a class graded without the checks that did not load. Left out:
# `index` reads results only; `gradescope-run` and `prairielearn-run` grade with a course that
# `gradescope-bundle` and `prairielearn` checked when they built it.
READS_COURSE_FILES = {
    "grade": lambda args: False, "check": lambda args: False,
    "release": lambda args: True, "notebooks": lambda args: args.solutions,
    "variants": lambda args: True, "gradescope-bundle": lambda args: True,
    "demo": lambda args: True, "solution": lambda args: True, "verify": lambda args: True,
    "prairielearn": lambda args: True, "similarity": lambda args: False,
}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def _shard(text: str):
    from grader.intake.shards import parse_shard

    try:
        return parse_shard(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def _color(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the summary (default: auto, when printing to a terminal)")


def _course(p: argparse.ArgumentParser) -> None:
    p.add_argument("--course", metavar="DIR",
                   help="the course folder whose exercises and checks to use (default: "
                        "$TORCHGRADE_COURSE, else the shipped curriculum)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exercises", metavar="A,B", type=_names,
                   help="exercise modules to grade (default: those found in the submissions)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="default deadline of each call into student code (default 5)")


# Each command's module (imported only when it runs: `check` never imports what `grade` needs)
# and the function in it that runs it with the parsed arguments and prints.
COMMANDS: dict[str, str] = {
    "grade": "grader.commands.grade:main",
    "index": "grader.commands.index:main",
    "similarity": "grader.commands.similarity:main",
    "check": "grader.commands.check:main",
    "demo": "grader.commands.demo:main",
    "variants": "grader.commands.variants:main",
    "release": "grader.commands.release:main",
    "notebooks": "grader.commands.notebooks:main",
    "solution": "grader.commands.solution:main",
    "gradescope-bundle": "grader.commands.gradescope:main_bundle",
    "gradescope-run": "grader.commands.gradescope:main_run",
    "new-exercise": "grader.commands.new_exercise:main",
    "verify": "grader.commands.verify:main",
    "prairielearn": "grader.commands.prairielearn:main_build",
    "prairielearn-run": "grader.commands.prairielearn:main_run",
}


# Commands whose main calls `args.check_course_files()` itself, before it reads the course's
# files for anything but the exercises' names.
CHECKS_COURSE_FILES_LATER = {"check"}

# Commands that, run as the program (not `main([...])` in-process), end as soon as their
# output is out: a student waits for `check`'s prompt to come back.
EXITS_AT_ONCE = {"check"}
# Commands that grade in a pool of grading processes: the pool's fork server starts first.
POOLED = {"grade", "demo"}

# Commands this user's check server answers when one is up (`grader.checkserver`), and leaves
# behind when none was: a student repeats `check` every few minutes.
SERVED = {"check"}


def exit_at_once(code: int) -> NoReturn:
    """Exit with `code` once the output is flushed and the atexit handlers (logging, temporary
    files) have run, skipping the interpreter's teardown of every module: with torch loaded,
    ~0.4 s that nothing needs."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say there
            pass
    atexit._run_exitfuncs()
    os._exit(code)


def check_course_files(args: argparse.Namespace) -> None:
    """CourseError (one line) unless the files of the active course that the command reads
    are readable Python (those of the exercises it names, if it names only known ones: an
    unknown name gets the command's own message; else of the whole course) and its fault
    catalogue is valid (read later, it would fail each graded submission on its own)."""
    from grader.checking.edition import student_release
    from grader.course import faults
    from grader.course.folder import active_course

    course = active_course()
    named = getattr(args, "exercises", None) or (
        [args.exercise] if getattr(args, "exercise", None) else None)
    chosen = named if named and set(named) <= set(course.exercises) else None
    solutions = READS_COURSE_FILES[args.command](args) and student_release() is None
    course.check_sources(chosen, solutions=solutions)
    faults.load()


def main(argv: list[str] | None = None) -> int:
    """Run the command `argv` (else the program's arguments); its exit code (see the module's
    doc). A Ctrl-C at any point of it is the one line of `interrupted` and 130, never a
    traceback: most of a command's first second is imports, where one used to land."""
    began: list[argparse.Namespace] = []  # the command's args, once it has begun
    try:
        return _main(argv, began)
    except KeyboardInterrupt as exc:
        print(interrupted(began[0], exc) if began else INTERRUPTED_EARLY, file=sys.stderr)
        if argv is None:
            exit_at_once(130)
        return 130


def _main(argv: list[str] | None, began: list[argparse.Namespace]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = build_parser().parse_args(argv)
    as_program = argv is None
    if as_program and args.command in POOLED and not getattr(args, "dask", None):
        # First thing: their imports (~1.3 s) then overlap ours and the class's intake.
        from grader.running.prestart import start_early

        start_early()
    if as_program:
        from grader.outputs.terminal import ReaderGone

        sys.stdout = ReaderGone(sys.stdout)  # `torchgrade grade ... | head` grades to the end
    warm_course = _warm_course(args) if as_program else None
    began.append(args)  # (a check a server answers has begun)
    if warm_course is not None:
        from grader.checkserver.client import NoServer, check_warm, leave_server
        from grader.outputs.color import use_color

        try:
            exit_at_once(check_warm(sys.argv[1:], course_root=warm_course,
                                    color=use_color(args.color)))
        except NoServer as exc:  # checked here, as without a server
            if not exc.leave:
                warm_course = None  # a server is up; it sent this check back
    code = run(args, prove=(lambda: check_course_files(args)) if as_program else None)
    # A server is left for the next check only where workers ran behind a view proven private,
    # as the server itself demands: without one they could answer in its place (at isolation
    # "none" they run as this user; a check from a folder they can see, such as a release's
    # own source folder, made a server that exited at once, announced at every check).
    if warm_course is not None and code != 130 and getattr(args, "private_view", False):
        leave_server(warm_course)
    if as_program and args.command in EXITS_AT_ONCE:
        exit_at_once(code)
    return code


INTERRUPTED = ("torchgrade: interrupted; what was graded is kept, run the same command again to "
               "finish")
INTERRUPTED_EARLY = "torchgrade: interrupted before the command began; nothing was written"
# `grade` writes the class's gradebooks only once it has graded everyone (see write_class_outputs)
GRADE_INTERRUPTED = ("torchgrade: interrupted; what was graded is kept (index.html names any "
                     "submission not graded yet; grades.csv and the LMS gradebooks are written "
                     "once every submission is graded): {again}")
GRADE_INTERRUPTED_EARLY = ("torchgrade: interrupted while starting or reading the class, "
                           "before any submission was graded; no grade was written")
AGAIN = "run the same command again to finish"
# with --force, the same command would grade everyone again, those just graded too
AGAIN_WITHOUT_FORCE = ("run it again without --force to grade only what is not up to date (with "
                       "--force it grades every submission again)")
# `check` keeps nothing of an interrupted run (no report: a partial one would read as failed).
CHECK_INTERRUPTED = "torchgrade: interrupted; nothing was written, run the check again"


def interrupted(args: argparse.Namespace, exc: KeyboardInterrupt | None = None) -> str:
    """What an interrupted command (`args`, parsed; `exc`, its interrupt) says on stderr."""
    if args.command == "check":
        return CHECK_INTERRUPTED
    if args.command == "grade" and isinstance(exc, InterruptedGrading):
        return GRADE_INTERRUPTED.format(
            again=AGAIN_WITHOUT_FORCE if getattr(args, "force", False) else AGAIN)
    if args.command == "grade":
        return GRADE_INTERRUPTED_EARLY
    return INTERRUPTED


def _warm_course(args: argparse.Namespace):
    """The course folder whose check server may answer this command, or None: only `check`,
    unless `--no-server` or TORCHGRADE_CHECK_SERVER=0 says otherwise."""
    if args.command not in SERVED or getattr(args, "no_server", False):
        return None
    from grader.checkserver import address
    from grader.course.location import course_root

    return course_root(args.course) if address.enabled() else None


def run(args: argparse.Namespace, *, prove=None) -> int:
    """Run the parsed command in this process; its exit code. `prove`: for a command of
    CHECKS_COURSE_FILES_LATER, how it proves the course's files when it is ready to (run as the
    program: while its zygote starts, ~0.3 s off a cold check; in a check server: once per
    choice of exercises); without it they are proved first, like every other command's."""
    module, function = COMMANDS[args.command].split(":")
    try:
        from grader.course.folder import course_option

        if args.command not in WRITES_A_COURSE:
            course_option(args.course)
        if prove is not None and args.command in CHECKS_COURSE_FILES_LATER:
            args.check_course_files = prove
        elif args.command in READS_COURSE_FILES:
            check_course_files(args)
        return getattr(importlib.import_module(module), function)(args)
    except UsageError as exc:
        print(f"torchgrade: error: {exc}", file=sys.stderr)
        return 2
    except GraderUnavailable as exc:
        print(f"torchgrade: the sandbox could not start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(interrupted(args, exc), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
