"""`torchgrade check PATH`: a student's (or self-learner's) own check of their work, with one
report per exercise checked."""

from __future__ import annotations

import argparse
import importlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.commands.common import (UsageError, grade_one, limits_of, one_submission, sandbox,
                                    warn_isolation)
from grader.course.folder import OPTIMIZER_WORDS, active_course
from grader.models import Submission, SubmissionResult
from grader.outputs import terminal
from grader.worker.limits import WorkerLimits


@dataclass
class CheckedWork:
    """What `torchgrade check` shows: the result of the checks that ran, the reports (one per
    exercise checked; `report` is the first), and the hidden checks that run at grading
    (title, points and targets only)."""

    result: SubmissionResult
    report: Path
    pending: list = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    unwritten: str = ""  # why the reports could not be written ("" when they were)
    # The workers had a filesystem view proven private: a check server, which refuses to serve
    # without one, may be left for the next check (False when a given zygote served this one).
    private_view: bool = False


def check_work(path: Path, *, out: Path, exercises: list[str] | None = None,
               hidden: bool = False, only: list[str] | None = None,
               limits: WorkerLimits | None = None, zygote=None,
               prepare: Callable[[], None] | None = None) -> CheckedWork:
    """A student's (or self-learner's) local check: the visible checks of the exercises found
    in `path` (with `only`: the checks about those functions/classes), and, with `hidden` (the
    full package only), the hidden checks too. Hidden checks left out are listed as pending.
    `zygote`: a running worker parent to use (a notebook's check server keeps one warm).
    `prepare`: called before any check runs (the command line's proof that the course's files
    are readable Python), while the zygote starts when there is none."""
    from grader.checking.edition import hidden_in_release, student_release

    release = student_release()
    if hidden and release is not None:
        raise UsageError("the hidden checks are not part of the student release: they run when "
                         "your work is graded")
    submission, chosen = one_submission(path, exercises)
    private_view = False
    if zygote is not None:
        if prepare is not None:
            prepare()
        if release is None:
            warn_isolation(zygote)
        select = _selection(hidden, only)
        result = grade_one(submission, exercises=chosen, limits=limits, zygote=zygote,
                           select=select)
    else:
        # The grader's own `import torch` (grader.running.runner and grader.checking.selection
        # import it) overlaps the zygote's start-up: nothing before `warm.join()` may import
        # them in this thread, or the two imports of torch run one after the other. It starts
        # once the zygote's process is launched: started before, it held the GIL while this
        # thread was still preparing the launch (~0.3 s later).
        warm = threading.Thread(target=_import_grading, daemon=True)

        def launched() -> None:
            if prepare is not None:  # first: a course refused leaves no thread importing
                prepare()
            warm.start()

        with sandbox(optimizers=may_build_optimizers(submission, chosen),
                     launched=launched) as own:
            if release is None:  # on a student's own machine the warning is only noise
                warn_isolation(own)
            warm.join()
            # The report's writer is readied while the checks run: the main thread mostly
            # waits on the worker then, with the GIL free (writing the reports: 0.14 -> 0.03 s).
            report_ready = threading.Thread(target=warm_report, daemon=True)
            report_ready.start()
            select = _selection(hidden, only)
            result = grade_one(submission, exercises=chosen, limits=limits, zygote=own,
                               select=select)
            private_view = bool(own.view and not own.leaks)
        report_ready.join()
    refuse_unknown(only, select, chosen)
    pending = select.pending + hidden_in_release(chosen, set(only) if only else None)
    try:
        reports = write_check_reports(result, Path(out), pending, only=only)
    except OSError as exc:  # a full disk, a read-only or missing folder: the verdict still shows
        return CheckedWork(result=result, report=Path(out), pending=pending, reports=[],
                           private_view=private_view,
                           unwritten=f"{exc.strerror or exc}"
                                     + (f": {exc.filename}" if exc.filename else ""))
    return CheckedWork(result=result, report=reports[0], pending=pending, reports=reports,
                       private_view=private_view)


def refuse_unknown(only: list[str] | None, select, chosen: list[str]) -> None:
    """UsageError when a name of `only` is one no check `select` kept is about, naming those
    it could have been. Even beside one that is: `--only forward,fit_line` checked forward
    alone, silently, and the student took fit_line_gd for checked."""
    unknown = [name for name in only or [] if name not in select.matched]
    if only and (select.selected == 0 or unknown):
        graded = ", ".join(chosen)
        offered = ", ".join(sorted(select.offered)) or "none"
        raise UsageError(f"no visible check of {graded} is about "
                         f"{', '.join(unknown or only)} (give the name of a function or class "
                         f"of the exercise; the checks are about: {offered})")


def may_build_optimizers(submission: Submission, exercises: list[str]) -> bool:
    """Whether a worker checking `exercises` of `submission` may build an optimizer: if the
    course says so of one of them (`Course.may_build_optimizers`: its stub names one) or the
    student's own code mentions one. Otherwise the zygote skips its warm import of
    torch._dynamo, which only the cold start would wait for; code that builds one without
    naming it pays that import in its own worker (as it would in a zygote of a torch without
    the warm import), never in another's."""
    if active_course().may_build_optimizers(exercises):
        return True
    for exercise in exercises:
        module = submission.modules.get(exercise)
        code = [chunk.code for chunk in module.chunks] if module is not None else []
        if any(OPTIMIZER_WORDS.search(text) for text in code):
            return True
    return False


def warm_report() -> None:
    """Import the report's writer and compile its template, ahead of the first report (a cold
    check does it while its checks run, a check server in its warm-up)."""
    from grader.outputs import folder  # noqa: F401 - imported for what it costs
    from grader.outputs.report import environment

    environment().get_template("report.html.j2")


def _import_grading() -> None:
    """Import what grading needs (torch, pytest, the plugin), in a thread of its own."""
    for name in ("grader.running.runner", "grader.checking.selection"):
        importlib.import_module(name)


def _selection(hidden: bool, only: list[str] | None):
    """The `CheckSelection` of a local check (imported here: its module imports torch)."""
    from grader.checking.selection import CheckSelection

    return CheckSelection(hidden=hidden, targets=only)


def write_check_reports(result: SubmissionResult, out: Path, pending: list, *,
                        only: list[str] | None = None) -> list[Path]:
    """One report per exercise checked, `out/<exercise>/report.html` titled by the exercise
    (with its results.json and gradescope.json), so that checking one file never overwrites
    the report of another. With `only` (some checks of it), `out/<exercise>/only/report.html`,
    which says so in a note: the report of all its checks is left as it was. A bug hunt's
    report says in a note what its hidden checks are worth (the terminal's `bughunt_line`). A
    result without exercises (the grader failed) is written whole, under the submission's
    name."""
    from grader.course.bughunt import is_bughunt
    # Here, not at the top: it imports jinja2 and the report, not needed before the sandbox.
    from grader.outputs.folder import write_submission_outputs
    from grader.outputs.terminal import BUGHUNT_VISIBLE, bughunt_line, hidden_line, hunt_faults

    # (a student's checks are no grades: a report saying "Regraded: this grade replaces 27 /
    # 35" compared a run with the hidden checks to one without)
    if not result.exercises:
        return [write_submission_outputs(result, out)]
    reports = []
    for part in result.exercises:
        later = [p for p in pending if p.exercise == part.exercise]
        notes = list(part.notes)
        if only:
            notes.append(only_note(only, Path(out) / part.exercise / "report.html"))
        faults_later = ""
        if later and is_bughunt(part.exercise):
            notes.append(bughunt_line(later))
            faults_later = f"{BUGHUNT_VISIBLE} ({hunt_faults(later)})"
        elif later:  # the report's score is of the visible checks: said, as the terminal does
            notes.append(hidden_line(later))
        one = result.model_copy(update={
            "student": part.exercise,
            "exercises": [part.model_copy(update={"notes": notes})],
            "checks": [c for c in result.checks if c.exercise == part.exercise]})
        folder = Path(out) / part.exercise / ONLY if only else None
        reports.append(write_submission_outputs(one, out, folder=folder,
                                                faults_later=faults_later))
    return reports


ONLY = "only"  # out/<exercise>/only/: the report of a check with --only


def only_note(only: list[str], full: Path) -> str:
    """What a report of some checks of an exercise (`--only`) says about itself."""
    return (f"only the checks of {', '.join(only)} (--only): a check without --only writes "
            f"the report of all of them, {full}")



def main(args: argparse.Namespace) -> int:
    work = check_work(args.path, out=args.out, exercises=args.exercises, hidden=args.hidden,
                      only=args.only, limits=limits_of(args.timeout),
                      zygote=getattr(args, "zygote", None),  # a check server's (checkserver)
                      prepare=getattr(args, "check_course_files", None))
    # `cli.main` leaves a check server only where one would serve (`CheckedWork.private_view`).
    args.private_view = work.private_view
    print(terminal.summary(work.result, pending=work.pending,
                           report=[str(r) for r in work.reports] or None,
                           color=terminal.use_color(args.color)))
    if args.only and work.reports:
        full = ", ".join(str(Path(args.out) / p.exercise / "report.html")
                         for p in work.result.exercises)
        print(f"(That report holds only the checks of {', '.join(args.only)}; the report of "
              f"all of them, {full}, is left as it was.)")
    if work.unwritten:
        print(f"torchgrade: error: the report could not be written in {args.out} "
              f"({work.unwritten}); the results above are not saved", file=sys.stderr)
        return 1
    return 0 if work.result.all_passed else 1
