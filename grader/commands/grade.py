"""`torchgrade grade SUBMISSIONS --out OUT`: a class, graded in a pool of grading processes.

Wiring only: the arguments to `grader.grading.run.grade_class` (the class run, `grade` here),
its progress, and the lines it prints (what changed of earlier grades, the summary)."""

from __future__ import annotations

import argparse

from grader.commands.common import limits_of
from grader.errors import InterruptedGrading
from grader.grading.run import grade_class as grade
from grader.grading.summary import GradeSummary
from grader.models import is_grader_failure
from grader.outputs.exports import remark_kinds
from grader.outputs.folder import PREVIOUS
from grader.outputs.progress import Progress

__all__ = ["grade", "main", "regrade_line", "summary_line"]


def main(args: argparse.Namespace) -> int:
    progress = Progress()
    try:
        # (said once the command is no usage error: one line, the error's, is all it prints)
        summary = grade(args.submissions, out=args.out, exercises=args.exercises,
                        assignment=args.assignment, jobs=args.jobs, force=args.force,
                        limits=limits_of(args.timeout), on_start=progress.start,
                        on_result=progress.result, variants=args.variants, lms=args.lms,
                        shard=args.shard, dask=args.dask,
                        on_begin=lambda: print(f"Grading {args.submissions} ...", flush=True))
    except KeyboardInterrupt as exc:
        if progress.started:
            raise InterruptedGrading from exc
        raise
    finally:
        progress.close()
    regraded = regrade_line(summary)
    if regraded:
        print(regraded)
    print(summary_line(summary))
    return 1 if summary.failures or summary.check_errors or summary.lost else 0


def regrade_line(summary: GradeSummary, *, shown: int = 10) -> str:
    """What this run changed of grades OUT already held: each final score that moved (the
    first `shown`), and how many stayed; empty when it replaced none."""
    now = {r.student: r for r in summary.results if r.student in summary.replaced}
    if not now:
        return ""
    # A grader failure is no grade: its student's earlier one is in results.previous.json.
    moved = [f"{sid} {_num(was)} -> NOT GRADED" if is_grader_failure(r) else
             f"{sid} {_num(was)} -> {_num(r.final_score)}"
             + ("" if r.max_score == top else f" (of {_num(top)} -> {_num(r.max_score)})")
             for sid, r in sorted(now.items())
             for was, top in [summary.replaced[sid]]
             if is_grader_failure(r) or (was, top) != (r.final_score, r.max_score)]
    listed = ", ".join(moved[:shown]) + (f" and {len(moved) - shown} more"
                                         if len(moved) > shown else "")
    same = len(now) - len(moved)
    return (f"Regraded {len(now)} student{'' if len(now) == 1 else 's'} who had a grade: "
            + (f"changed: {listed}" if moved else "no final score changed")
            + (f"; {same} unchanged" if moved and same else "")
            + f". The grades they replaced: {summary.out}/<student>/{PREVIOUS}")


def _num(value: float) -> str:
    return f"{round(value, 2):g}"


def summary_line(summary: GradeSummary) -> str:
    n = len(summary.results)
    # (the split only when some were not graded now: "3 submissions (3 graded)" said it twice)
    done = (f" ({summary.graded} graded now, {summary.up_to_date} up to date)"
            if summary.up_to_date else "")
    rate = (f", {summary.seconds / summary.graded:.2f} s each" if summary.graded else "")
    failures = (f", {summary.failures} NOT GRADED (grader failures; run again)"
                if summary.failures else "")
    if summary.check_errors:  # the course's checks' bug: logged above, named in the reports
        failures += (f", {summary.check_errors} with checks that FAILED THEMSELVES (a bug in "
                     "the course's checks, see the errors above; their scores lack those "
                     "checks' points and are not final: fix the checks, then run again)")
    if summary.lost:  # the machine's doing: said with the students to grade again
        shown = ", ".join(summary.lost[:10]) + (" ..." if len(summary.lost) > 10 else "")
        failures += (f", {len(summary.lost)} with checks LOST to the machine running out of "
                     f"memory (their workers were within their own limits): {shown}; their "
                     "results are not final: run the same command again to grade them")
    where = (f"Class index: {summary.index}" if summary.shard is None else
             f"Shard {summary.shard}: once every shard has finished, run `torchgrade index "
             f"{summary.out}` for the class index and CSVs")
    # Roster students who handed in nothing are graded (0 points, in every class file), but a
    # count of "submissions" that holds them misled instructors: said apart.
    kinds = [remark_kinds(r) for r in summary.results]
    absent = sum("nothing_handed_in" in k for k in kinds)
    empty = f"; {absent} handed in nothing (0 points)" if absent else ""
    # A misnamed file scores as a missing one: counted, so that it is looked at before grades
    # are uploaded (each one's remark, in the CSVs and the index, names the files found).
    unmatched = sum("misfiled" in k for k in kinds)
    misnamed = (f"; {unmatched} with a file no exercise has the name of (misnamed? see the "
                "remarks)" if unmatched else "")
    return (f"Graded {n} submission{'' if n == 1 else 's'}{done} in {summary.seconds:.1f} s"
            f"{rate}: {summary.full_marks} with full marks{failures}{empty}{misnamed}. {where}")
