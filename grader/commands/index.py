"""`torchgrade index OUT`: the class files (index.html, grades.csv and the LMS gradebooks) of
OUT, rebuilt from every results.json in it, without grading anything: after the shards of a job
array (`torchgrade grade --shard K/N`) have all finished, or after results were copied in.

What the class files need besides the results, in this order: `--assignment FILE` (its
exercises, name, due date and roster, as `grade --assignment` uses them) or `--exercises`;
else what the shards recorded in `OUT/.shards/`, or the last whole run in
`OUT/.torchgrade-run.json` (the assignment file they graded with, or their exercises and
assignment name); else what the results themselves say. Where a run or a shard stopped before
grading some of its students, and nothing graded them since, only index.html is written, with
the note that says so (exit 1).
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import datetime
from pathlib import Path

from grader.errors import UsageError
from grader.grading.class_files import write_class_outputs
from grader.grading.summary import RUN_RECORD, SHARDS, GradeSummary, ShardSummary
from grader.course.registry import known_exercises
from grader.intake.assignment import Assignment, from_exercises, roster_aliases
from grader.intake.plan import plan_of, roster_of
from grader.intake.submission import OUT_MARKER
from grader.models import SubmissionResult, is_grader_failure
from grader.outputs.folder import read_results
from grader.outputs.writing import OutLock, remove_stale_temp_files

log = logging.getLogger("torchgrade")


def index(out: Path, *, assignment: Path | None = None,
          exercises: list[str] | None = None) -> GradeSummary:
    """Rewrite OUT's class files from every `OUT/<student>/results.json` (folders whose name
    starts with a dot are torchgrade's own); a results.json that cannot be read is skipped
    with a warning. UsageError when OUT is no torchgrade output folder, holds no result, or a
    `torchgrade grade` run (not a shard: shards share OUT) is writing into it."""
    out = Path(out)
    if not out.is_dir() or not (out / OUT_MARKER).is_file():
        # (strictly by the marker: a folder of the instructor's own index.html and grades.csv
        # is not ours to rewrite)
        raise UsageError(f"{out} is not a folder written by `torchgrade grade` (it has no "
                         f"{OUT_MARKER})")
    try:
        lock = OutLock(out).__enter__()
    except BlockingIOError:
        raise UsageError(f"{out} is being written by a `torchgrade grade` run (a shard still "
                         "running?): run `torchgrade index` once every run has finished") from None
    try:
        remove_stale_temp_files(out)  # nobody writes into OUT while we hold its lock
        summary, roster = class_of(out, assignment=assignment, exercises=exercises)
        write_class_outputs(summary, roster=roster)
    finally:
        lock.__exit__(None, None, None)
    return summary


def class_of(out: Path, *, assignment: Path | None, exercises: list[str] | None
             ) -> tuple[GradeSummary, dict]:
    """The class in OUT: its results and the assignment they were graded with; its roster."""
    results = read_results(out)
    if not results:
        raise UsageError(f"{out} holds no results.json to index")
    shards = read_shard_summaries(out)
    if assignment is None and exercises is None:
        recorded = {s.assignment_file for s in shards if s.assignment_file}
        if len(recorded) == 1 and Path(next(iter(recorded))).is_file():
            assignment = Path(next(iter(recorded)))
        elif len(recorded) > 1:
            log.warning("torchgrade: warning: the shards in %s were graded with different "
                        "assignment files (%s): give --assignment", out,
                        ", ".join(sorted(recorded)))
    plan = plan_of(assignment, exercises) or inferred_plan(results, shards)
    roster = roster_of(plan)
    if roster:
        plan = plan.with_aliases(roster_aliases(roster))
    return GradeSummary(out=out, results=results, exercises=plan.exercise_names,
                        assignment=plan, failures=sum(map(is_grader_failure, results)),
                        not_graded=not_graded(results, shards)), roster


def not_graded(results: list[SubmissionResult], records: list[ShardSummary]) -> list[str]:
    """The students a run (or a shard) stopped before grading, as it recorded them, but those
    graded since (by a later run, or another shard): the class files then say the class is
    incomplete, and no gradebook is written."""
    stopped: dict[str, datetime] = {}
    for record in records:
        stopped |= {sid: record.finished_at for sid in record.not_graded}
    graded_at = {r.student: r.graded_at for r in results}
    return sorted(sid for sid, when in stopped.items()
                  if sid not in graded_at or graded_at[sid] <= when)


def read_shard_summaries(out: Path) -> list[ShardSummary]:
    """The records of OUT's shards, and of its last whole run (`RUN_RECORD`)."""
    summaries = []
    for path in [*sorted((out / SHARDS).glob("*.json")), out / RUN_RECORD]:
        if not path.exists():
            continue
        try:
            summaries.append(ShardSummary.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            log.warning("torchgrade: warning: %s could not be read (ignored)", path)
    return summaries


def inferred_plan(results: list[SubmissionResult], shards: list[ShardSummary]) -> Assignment:
    """The exercises and name the class was graded with, without an assignment file: those the
    shards recorded (the latest), else the exercises in the results, in the course's order."""
    if shards:
        latest = max(shards, key=lambda s: s.finished_at)
        return from_exercises(latest.exercises, name=latest.assignment_name)
    known = known_exercises()
    seen = list(dict.fromkeys(e.exercise for r in results for e in r.exercises))
    # (none seen: every result is a grader failure, which has no exercise: the course's)
    ordered = [e for e in known if e in seen] + [e for e in seen if e not in known] or known
    names = [r.assignment for r in results if r.assignment]
    return from_exercises(ordered, name=max(set(names), key=names.count) if names else "")


def main(args: argparse.Namespace) -> int:
    summary = index(args.out, assignment=args.assignment, exercises=args.exercises)
    n = len(summary.results)
    failures = (f", {summary.failures} NOT GRADED (grader failures: run `torchgrade grade` "
                "again)" if summary.failures else "")
    print(f"Indexed {n} result{'' if n == 1 else 's'}: {summary.full_marks} with full "
          f"marks{failures}. Class index: {summary.index}")
    if summary.not_graded:
        left = summary.not_graded
        print(f"torchgrade: {len(left)} student{'' if len(left) == 1 else 's'} of this class "
              f"{'was' if len(left) == 1 else 'were'} not graded by a run that stopped ("
              + ", ".join(left[:10]) + (" ..." if len(left) > 10 else "")
              + "): grades.csv and the LMS gradebooks were not written (they would miss "
              "them). Run the same `torchgrade grade` command again to finish.",
              file=sys.stderr)
        return 1
    return 0
