"""`torchgrade grade SUBMISSIONS --out OUT`: a class, graded in a pool of grading processes.

The pipeline of one submission, declared as data (`STEPS`), runs in each grading process:
intake (read the student's files), running (the checks), scoring (the result), outputs (its
files). The parent only finds the students, fingerprints them and writes the class files.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel

from grader.commands.common import (GraderUnavailable, UsageError, default_jobs, isolation_warning,
                                    limits_of, plan_of, roster_of)
from grader.commands.variants import read_variants
from grader.course.bughunt import apply_variants
from grader.course.folder import active_course
from grader.course.registry import known_exercises
from grader.errors import InterruptedGrading
from grader.intake.assignment import Assignment, from_exercises, roster_aliases, submission_time
from grader.intake.files import Inode, class_hard_links, own_links
from grader.intake.fingerprint import fingerprint, grading_digest, submission_digest
from grader.intake.lms import STAGING, read_sidecar, staged_names
from grader.intake.shards import Shard
from grader.intake.students import (by_roster_ids, check_folders, class_students, download_layout,
                                   read_class)
from grader.intake.submission import (CANVAS_GRADES, GRADES, INDEX, MOODLE_GRADES,
                                     NOTHING_HANDED_IN, ORIGINAL_NAME, OUT_MARKER, exercises_in,
                                     load_quietly, misfiled)
from grader.intake.submission import SIMILARITY_PAGE
from grader.models import (CheckRun, Submission, SubmissionResult, failed_checks_of_the_grader,
                           is_final, is_grader_failure, lost_checks)
from grader.outputs.exports import NOTE_WARNINGS, canvas_csv, grades_csv, moodle_csv
from grader.outputs.progress import Progress
from grader.outputs.report import render_index
from grader.outputs.folder import PREVIOUS, read_results, write_submission_outputs
from grader.outputs.writing import (OutLock, escaped, interrupts_deferred, printable, read_json,
                                    remove_stale_temp_files, write_atomic)
from grader.running.pool import GradeTask, GradingSteps, PoolSettings
from grader.scoring.results import grader_failure, result_of
from grader.worker.limits import WorkerLimits

log = logging.getLogger("torchgrade")


@dataclass
class GradeSummary:
    out: Path
    results: list[SubmissionResult] = field(default_factory=list)
    exercises: list[str] = field(default_factory=list)
    assignment: Assignment | None = None
    graded: int = 0          # graded by this run
    up_to_date: int = 0      # skipped: their results.json already had the same fingerprint
    failures: int = 0        # the grader could not grade them (recorded, retried next run)
    check_errors: int = 0    # graded, but some check failed itself (not final, retried too)
    # graded, but some check was lost to the machine (its worker killed for memory another
    # process held): not final, graded again by the next run
    lost: list[str] = field(default_factory=list)
    seconds: float = 0.0
    shard: Shard | None = None  # a job array's shard: no class files (`torchgrade index`)
    # Results already in OUT of students with no submission in this run: in the class files
    # (as `torchgrade index` lists them), never counted as graded by this run.
    earlier: list[SubmissionResult] = field(default_factory=list)
    # Students this run grades again who had a grade in OUT (their files, the grading or the
    # assignment changed, or --force): their earlier final score and maximum. The earlier
    # results.json is kept as results.previous.json.
    replaced: dict[str, tuple[float, float]] = field(default_factory=dict)
    # Students this run was to grade and did not (Ctrl-C, or the sandbox failed): their grade
    # is what OUT held before, if anything, and the class files say the run is incomplete.
    not_graded: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / INDEX

    @property
    def full_marks(self) -> int:
        # (the grade's, after any late penalty: as the class index counts them)
        return sum(r.max_score > 0 and r.final_score == r.max_score for r in self.results)


def grade(submissions: Path, *, out: Path, exercises: list[str] | None = None,
          assignment: Path | None = None, jobs: int | None = None, force: bool = False,
          limits: WorkerLimits | None = None,
          on_start: Callable[[int, int], None] | None = None,
          on_result: Callable[[SubmissionResult], None] | None = None,
          variants: Path | None = None, lms: str | None = None,
          shard: Shard | None = None, dask: str | None = None,
          on_begin: Callable[[], None] | None = None) -> GradeSummary:
    """Grade every student in `submissions` with `jobs` grading processes; write each student's
    results.json, report.html and gradescope.json the moment they are graded, then the class
    index and the CSV gradebook into `out`.

    The exercises are those of `assignment` (a TOML file), else `exercises`, else every exercise
    found in the submissions. A student whose `out/<student>/results.json` already carries this
    grading's fingerprint is not graded again unless `force`. `on_begin()` is called once the
    command is known to be no usage error, before the class is fingerprinted;
    `on_start(total, up_to_date)` once before grading, `on_result` with every result as it
    arrives. KeyboardInterrupt stops every grading process, writes the class outputs of what
    was graded, and propagates.
    With `variants` (the manifest `variants()` wrote), each student's bug hunts are scored on
    the faults their own copy holds. `lms` forces the layout of `submissions` (see
    `grader.intake.lms`; default: detected): an LMS download or a class zip is staged into
    `out/.lms/`, never unpacked where it lies. Every roster student is graded (an empty
    submission for one who handed nothing in); an id not in the roster is graded and warned.

    With `shard` (a job array's K/N, `grader.intake.shards`), only the students of that shard
    are graded, and the run shares OUT with the other shards running at once: it writes its
    students' folders and `OUT/.shards/K-of-N.json` (what it graded), never the class files
    nor anything another shard writes; `torchgrade index OUT` builds those once all are done.
    With `dask` (a scheduler's address, tcp://HOST:PORT) the submissions are graded on that
    Dask cluster's workers instead of local grading processes (`grader.running.dask_cluster`),
    with the same results, written here as they arrive; `jobs` is then unused.
    """
    started = time.monotonic()
    submissions, out = Path(submissions), Path(out)
    check_folders(submissions, out)
    layout = download_layout(submissions, lms)
    # Without an assignment file, the assignment is named after the class folder (the CSV's
    # `assignment`, the index's title), whether --exercises chose the exercises or not.
    unnamed = submissions.stem if layout != "folders" else submissions.name
    plan = plan_of(assignment, exercises)
    if plan is not None and assignment is None:
        plan = plan.model_copy(update={"name": unnamed})
    found = read_class(submissions, layout, plan.zone if plan is not None else None)
    if jobs is not None and jobs < 1:
        raise UsageError("-j must be at least 1")
    if shard is not None and plan is None and layout != "folders":
        # A shard stages only its own students: it cannot see which exercises the class
        # handed in, and each shard would grade another set (and fingerprint it so).
        raise UsageError("--shard of an LMS download or a class zip needs --exercises or "
                         "--assignment (the same for every shard)")
    if dask is not None:  # an unreachable scheduler is said before any submission is read
        from grader.running.dask_cluster import reach

        reach(dask)
    roster = roster_of(plan) if plan is not None else {}
    renamed: dict[str, str] = {}  # a roster row's id -> the class folder named by another
    if plan is not None and roster:
        plan = plan.with_aliases(roster_aliases(roster))
        found, renamed, clashes = by_roster_ids(found, roster)
        if clashes:
            log.warning("torchgrade: warning: %d folder(s) name a roster student who has a "
                        "folder under their own id too, and are graded apart, as not in the "
                        "roster: %s. Keep one folder per student.", len(clashes),
                        ", ".join(f"{f} (the row of {k})" for f, k in list(clashes.items())[:10])
                        + (" ..." if len(clashes) > 10 else ""))
    manifest = read_variants(variants) if variants is not None else None
    if on_begin is not None:
        on_begin()
    summary = GradeSummary(out=out, shard=shard)
    locks = out_locks(out, shard)
    try:
        if shard is None:
            remove_stale_temp_files(out)  # left by a run that was killed mid-write
        write_atomic(out / OUT_MARKER, "This folder holds the results of `torchgrade grade`.\n")
        keep = shard.holds if shard is not None else None
        students = class_students(found, out / STAGING, roster, keep,
                                  handed_in_before=lambda sid: handed_in_before(out / sid))
        links = class_hard_links(students)

        def holds(sid: str, path: Path, wanted: list[str], *, any_link: bool = False) -> set[str]:
            """The exercises of `wanted` the student has a file of that will be graded (with
            `any_link`, hard links to files elsewhere included)."""
            with own_links(None if any_link else links.get(sid, set())):
                return exercises_in(path, wanted)

        if plan is None:  # the exercises found in the submissions, by file names only
            known = known_exercises()
            present = set().union(*(holds(sid, path, known) for sid, path in students))
            plan = from_exercises([e for e in known if e in present] or known, name=unnamed)
        chosen = plan.exercise_names
        if students and not any(holds(sid, path, chosen) for sid, path in students):
            course = active_course()
            if any(holds(sid, path, chosen, any_link=True) for sid, path in students):
                log.warning("torchgrade: warning: every exercise file handed in is a hard link "
                            "to a file that also lies outside the class (a copy made with `cp "
                            "-al`, `rsync --link-dest` or a snapshot?): none is graded, since a "
                            "student could link a file they may not read, and every student "
                            "will score 0. Grade a copy without hard links (`cp -a`, `rsync "
                            "-a`).")
            else:
                log.warning("torchgrade: warning: no submission holds a file of any exercise "
                            "graded (%s) of the course %r (%s): every student will score 0. "
                            "The wrong course (--course, $TORCHGRADE_COURSE) or the wrong "
                            "folder?", ", ".join(chosen), course.name, course.root)
        scoring = plan.scoring_key()
        if manifest is not None:  # another key, another grading: results are not reused
            scoring += "\nvariants " + manifest.model_dump_json()
        grading = grading_digest(exercises=chosen, scoring=scoring,
                                 limits=(limits or WorkerLimits()).model_dump_json())
        summary.exercises, summary.assignment = chosen, plan
        tasks = []
        everyone = {sid for sid, _ in students}
        if shard is not None:  # (links: decided over the whole class, as in one run)
            everyone |= {s.sid if hasattr(s, "sid") else s[0] for s in found} | set(roster)
            students = [(sid, path) for sid, path in students if shard.holds(sid)]
            remove_stale_temp_files(out, [sid for sid, _ in students])
        strangers = [sid for sid, _ in students if roster and sid not in roster]
        if strangers:
            log.warning("torchgrade: warning: %d submission(s) not in the roster, graded and "
                        "marked \"not in the roster\": %s. Add each that is a student of the "
                        "class to the roster (as a row's lms_id, student_id or email)",
                        len(strangers),
                        ", ".join(strangers[:10]) + (" ..." if len(strangers) > 10 else ""))
        warn_unknown_students(plan, everyone)
        set_aside_renamed(out, {k: f for k, f in renamed.items() if shard is None
                                or shard.holds(k)})
        for sid, path in students:
            # The parent reads no student file beyond fingerprints (bounded, regular files
            # only): the grading processes load the submissions, in parallel.
            own = (f"\nstudent {plan.student_key(sid)}\nroster {bool(roster)} "
                   f"{sid in roster}")
            with own_links(links.get(sid, ())):
                mark = fingerprint(submission_digest(path), grading + own)
            earlier = earlier_result(out / sid)
            if not force and earlier is not None and is_current(earlier, out / sid, mark):
                summary.results.append(earlier)
                continue
            if earlier is not None and earlier.checks:  # (kept when the new one is written)
                summary.replaced[sid] = (earlier.final_score, earlier.max_score)
            task = task_for(sid, mark, path, links.get(sid, set()),
                            staged=path.parent == out / STAGING)
            if sid in renamed:
                task.notes.append(f"{HANDED_IN_AS}{renamed[sid]}: graded under the id {sid} of "
                                  f"the roster's row for {renamed[sid]}")
            if roster and sid not in roster:
                # (said to the student too: what to do about it is the instructor's, in the
                # warning above)
                task.notes.append("not in the roster: graded under the id the submission "
                                  "gives")
            tasks.append(task)
        summary.up_to_date = len(summary.results)
        if on_start is not None:
            on_start(len(students), summary.up_to_date)

        def collect(result: SubmissionResult) -> None:
            summary.results.append(result)
            summary.graded += 1
            summary.failures += is_grader_failure(result)
            summary.check_errors += bool(failed_checks_of_the_grader(result))
            if lost_checks(result):
                summary.lost.append(result.student)
            if on_result is not None:
                on_result(result)

        from grader.running.pool import PoolBroken, grade_in_pool

        settings = PoolSettings(out=out, exercises=chosen, assignment=plan, limits=limits,
                                variants=manifest, submissions=submissions)
        try:
            if dask is not None:  # distributed is imported only on this path
                from grader.running.dask_cluster import grade_on_dask

                grade_on_dask(tasks, address=dask, settings=settings, steps=STEPS,
                              intake=load_task, on_result=collect,
                              write=partial(write_into, out),
                              on_isolation=isolation_warning)
            else:
                grade_in_pool(tasks, settings=settings, steps=STEPS,
                              jobs=min(jobs or default_jobs(), 64),
                              on_result=collect, on_isolation=isolation_warning)
            warn_unknown_targets(plan, summary.results)
            warn_of_notes(summary.results)
        except PoolBroken as exc:
            raise GraderUnavailable(str(exc)) from None
        finally:
            remove_stale_temp_files(out, None if shard is None else [t.student for t in tasks])
            summary.seconds = time.monotonic() - started
            # On Ctrl-C a grading process may have written a result whose message never
            # reached us: what is on disk with this grading's fingerprint counts too.
            collected = {r.student for r in summary.results}
            summary.results += [done for t in tasks if t.student not in collected
                                and (done := previous_result(out / t.student,
                                                       t.fingerprint)) is not None]
            collected = {r.student for r in summary.results}
            summary.not_graded = [t.student for t in tasks if t.student not in collected]
            with interrupts_deferred():  # (a Ctrl-C at the very end left no class files)
                if shard is None:  # this run writes the class files itself: the shards'
                    shutil.rmtree(out / SHARDS, ignore_errors=True)  # records are stale
                write_shard_summary(summary, assignment=assignment)
                if shard is None and (summary.results or summary.not_graded):
                    # also on Ctrl-C: the index of what is graded so far, where a student not
                    # graded yet keeps the grade OUT held (or has none), never drops out (a
                    # shard's class files are `torchgrade index`'s, once all are done)
                    summary.earlier = earlier_results(out, everyone) + [
                        done for sid in summary.not_graded
                        if (done := earlier_result(out / sid)) is not None]
                    warn_of_other_totals(summary)
                    write_class_outputs(summary, roster=roster)
    finally:
        for lock in reversed(locks):
            lock.__exit__(None, None, None)
    return summary


def out_locks(out: Path, shard: Shard | None) -> list[OutLock]:
    """Take OUT's locks: exclusively for a whole run; for a shard, OUT shared with the other
    shards and its own shard's lock exclusively (the same shard twice would grade the same
    students at once). UsageError, one line, when a run in the way holds them."""
    if shard is None:
        wanted = [OutLock(out)]
    else:
        wanted = [OutLock(out, shared=True),
                  OutLock(out, name=f".torchgrade.shard-{shard.name}.lock")]
    taken: list[OutLock] = []
    try:
        for lock in wanted:
            taken.append(lock.__enter__())
    except BlockingIOError:
        for lock in reversed(taken):
            lock.__exit__(None, None, None)
        what = (f"shard {shard} of another `torchgrade grade` run" if shard is not None and taken
                else "another `torchgrade grade` run (or `torchgrade index`)")
        raise UsageError(f"{out} is being written by {what}") from None
    return taken


SHARDS = ".shards"  # OUT/.shards/K-of-N.json: what each shard of a job array graded


class ShardSummary(BaseModel):
    """What one shard graded (OUT/.shards/K-of-N.json), or a whole run (OUT/RUN_RECORD, shard
    "all"): `torchgrade index` reads these for the exercises and the assignment file of the
    class (when not given them again), and for the students a run stopped before grading."""

    shard: str
    students: list[str]
    graded: int
    up_to_date: int
    failures: int
    seconds: float
    exercises: list[str]
    assignment_name: str = ""
    assignment_file: str | None = None
    finished_at: datetime
    not_graded: list[str] = []  # its students it stopped before grading (Ctrl-C, the sandbox)


# The record of the last whole run (a ShardSummary of shard "all"): `torchgrade index` finds the
# assignment file in it (the roster's names and ids, the due date), and the students the run
# stopped before grading (then it writes no gradebook either: one would read as complete).
RUN_RECORD = ".torchgrade-run.json"


def earlier_results(out: Path, students: set[str]) -> list[SubmissionResult]:
    """The results in OUT of students who are not among `students` (this run's: the folder's
    and the roster's), said in a warning: a student missing from this download (a withdrawal,
    or an LMS export of new submissions only) keeps the grade OUT holds, in the class files
    too, as `torchgrade index` would list it; never silently dropped from grades.csv."""
    earlier = read_results(out, besides=students)
    if earlier:
        names = [r.student for r in earlier]
        log.warning("torchgrade: warning: %d earlier result(s) in %s have no submission in "
                    "this run: %s. They stay in index.html and the CSVs as graded before; "
                    "remove their folders from %s to leave them out.", len(names), out,
                    ", ".join(names[:10]) + (" ..." if len(names) > 10 else ""), out)
    return earlier


HANDED_IN_AS = "handed in as "  # the note of a class folder graded under a roster row's id
RENAMED = ".renamed"  # OUT/.renamed/<folder>/: results of a folder now graded under a roster id


def set_aside_renamed(out: Path, renamed: dict[str, str]) -> None:
    """Move OUT/<folder> of each class folder now graded under a roster row's id (`renamed`:
    id -> folder; the roster was added, or got an lms_id, since) to OUT/.renamed/: kept, never
    listed beside the same student's new results (`torchgrade index` skips dot-folders)."""
    moved = []
    for key, folder in renamed.items():
        old = out / folder
        if folder == key or not (old / "results.json").is_file() or old.is_symlink():
            continue
        target = out / RENAMED / folder
        if target.exists():
            target = target.with_name(f"{folder}.{time.strftime('%Y%m%dT%H%M%S')}")
        target.parent.mkdir(exist_ok=True)
        old.rename(target)
        moved.append(f"{folder} -> {key}")
    if moved:
        log.warning("torchgrade: warning: %d student(s) are now graded under their roster id, "
                    "not their folder's name: %s. Their earlier results were moved to %s.",
                    len(moved), ", ".join(moved[:10]) + (" ..." if len(moved) > 10 else ""),
                    out / RENAMED)


def warn_of_notes(results: list[SubmissionResult]) -> None:
    """One warning for each of NOTE_WARNINGS that concerns some of `results`, naming them:
    their reports say it to each student; the instructor's run says it too."""
    for marker, says in NOTE_WARNINGS:
        named = sorted(r.student for r in results if any(marker in n for n in r.notes))
        if named:
            log.warning("torchgrade: warning: %d submission(s) %s: %s.", len(named), says,
                        ", ".join(named[:10]) + (" ..." if len(named) > 10 else ""))


def write_shard_summary(summary: GradeSummary, *, assignment: Path | None) -> None:
    """OUT/.shards/K-of-N.json for a shard (only it writes that name), else OUT/RUN_RECORD;
    atomically."""
    plan = summary.assignment
    path = (summary.out / SHARDS / f"{summary.shard.name}.json" if summary.shard is not None
            else summary.out / RUN_RECORD)
    record = ShardSummary(
        shard=str(summary.shard or "all"), students=sorted(r.student for r in summary.results),
        graded=summary.graded, up_to_date=summary.up_to_date, failures=summary.failures,
        seconds=round(summary.seconds, 3), exercises=list(summary.exercises),
        assignment_name=plan.name if plan else "",
        assignment_file=str(Path(assignment).resolve()) if assignment is not None else None,
        finished_at=datetime.now(timezone.utc), not_graded=sorted(summary.not_graded))
    write_atomic(path, record.model_dump_json(indent=2))


def warn_unknown_students(plan: Assignment, students: set[str]) -> None:
    """Warn (once per run) of each override line and extension naming a student who is in no
    result of this class (a typo, a student under another id): it is applied to nobody."""
    for row in plan.override_rows:
        if row.student not in students:
            log.warning("torchgrade: warning: the overrides file%s names student %r, who is not "
                        "in this class: not applied to anyone (%s %s)",
                        f", line {row.line}," if row.line else "", row.student, row.target,
                        row.reason or "no reason")
    for student in plan.extensions:
        if student not in students:
            log.warning("torchgrade: warning: the extension of %r names a student who is not in "
                        "this class: given to nobody", student)


def warn_unknown_targets(plan: Assignment, results: list[SubmissionResult]) -> None:
    """Warn (once per run, after grading: check ids are known then) of each override line whose
    target is no exercise and no check of this grading; the student's report says it too."""
    known = set(plan.exercise_names) | {c.id for r in results for c in r.checks}
    graded = {r.student for r in results}
    for row in plan.override_rows:
        if row.student in graded and row.target not in known:
            log.warning("torchgrade: warning: the overrides file%s names %r for student %r: no "
                        "exercise or check of this assignment has that name, not applied",
                        f", line {row.line}," if row.line else "", row.target, row.student)


def earlier_result(folder: Path) -> SubmissionResult | None:
    """The student's result in OUT, if there is one that can be read."""
    try:
        return read_json(folder / "results.json")
    except (OSError, ValueError):
        return None


def warn_of_other_totals(summary: GradeSummary) -> None:
    """Name the results kept from earlier runs (students missing from this download) whose
    total differs from this run's: the assignment's points changed since. Their gradebook rows
    stay as graded then (nothing is rescaled behind the instructor's back), which an LMS reads
    against this run's Points Possible."""
    totals = Counter(r.max_score for r in summary.results if r.checks)
    if not totals:
        return
    now = totals.most_common(1)[0][0]
    other = [r for r in summary.earlier if r.checks and r.max_score != now]
    if other:
        shown = ", ".join(f"{r.student} ({_num(r.final_score)} of {_num(r.max_score)})"
                          for r in other[:10]) + (" ..." if len(other) > 10 else "")
        log.warning("torchgrade: warning: %d kept result(s) were graded out of another total "
                    "than this run's %s: %s. Their rows in index.html and the gradebooks are "
                    "as graded then, which an LMS reads against Points Possible %s: grade them "
                    "again from a download that holds their submissions, or remove their "
                    "folders from %s.", len(other), _num(now), shown, _num(now), summary.out)


def handed_in_before(folder: Path) -> bool:
    """Whether OUT's result in `folder` grades a submission (not an empty one of a roster
    student who had handed in nothing): a later download without the student (an export of
    new submissions only) must not replace it with a 0."""
    earlier = earlier_result(folder)
    return earlier is not None and NOTHING_HANDED_IN not in earlier.notes


def is_current(result: SubmissionResult, folder: Path, mark: str | None) -> bool:
    """Graded exactly as this run would grade it (its report is written before it, so it
    exists too)."""
    return result.fingerprint == mark and (folder / "report.html").is_file()


def previous_result(folder: Path, mark: str | None) -> SubmissionResult | None:
    """The student's earlier result if it `is_current`."""
    result = earlier_result(folder)
    return result if result is not None and is_current(result, folder, mark) else None


def task_for(student: str, mark: str, path: Path, links: set[Inode], *,
             staged: bool = False) -> GradeTask:
    """The task of one student; a folder torchgrade `staged` has a sidecar (what the LMS
    said), which gives its notes and late marker (a student's own folder is never asked:
    a sidecar there would be the student's word)."""
    sidecar = read_sidecar(path) if staged else None
    submitted_at, note = submission_time(path) if path.is_dir() else (None, None)
    return GradeTask(student=student, path=path, fingerprint=mark, own_links=sorted(links),
                     submitted_at=submitted_at,
                     notes=(list(sidecar.notes) if sidecar else []) + ([note] if note else []),
                     late_marker=bool(sidecar and sidecar.late_marker))


def write_class_outputs(summary: GradeSummary, *, roster: dict | None = None) -> None:
    """index.html, grades.csv and the LMS gradebooks; only index.html, saying so, when the run
    left students `not_graded` (a gradebook uploaded then would miss their grades, or carry
    grades OUT no longer holds: the earlier files are left as they were). A result whose text
    cannot be written as it is (it should not happen: each was written once already) is escaped
    rather than lose the class files."""
    results = sorted(summary.results + summary.earlier, key=lambda r: r.student)
    try:
        write_class_files(summary, results, roster)
    except (ValueError, UnicodeError):
        log.exception("torchgrade: writing the class outputs failed; retrying with escaped text")
        write_class_files(summary, [escaped(r) for r in results], roster)


def write_class_files(summary: GradeSummary, results: list[SubmissionResult],
                         roster: dict | None) -> None:
    plan = summary.assignment
    name = plan.name if plan else ""
    # Who each id is, for the index and Moodle's worksheet: the roster's names, else the LMS's
    # (a download's folder names).
    names = staged_names(summary.out) | {sid: person.full_name for sid, person in
                                         (roster or {}).items() if person.full_name}
    write_atomic(summary.out / INDEX,
                 render_index(results, summary.exercises, assignment=name,
                              names=names, not_graded=summary.not_graded,
                              similarity=(summary.out / SIMILARITY_PAGE).is_file(),
                              title=(f"torchgrade results: {name}" if name
                                     else "torchgrade results")))
    if summary.not_graded:
        return
    write_atomic(summary.out / GRADES,
                 grades_csv(results, summary.exercises, assignment=name,
                            duedate=plan.due if plan else None, roster=roster))
    write_atomic(summary.out / CANVAS_GRADES,
                 canvas_csv(results, assignment=name or "torchgrade", roster=roster))
    write_atomic(summary.out / MOODLE_GRADES, moodle_csv(results, roster=roster,
                                                                names=names))



# --------------------------------------------------------------------------- one submission
# The pipeline each grading process runs per submission (intake -> [running: the pool's
# batch] -> scoring -> outputs), declared here as data for `grader.running.pool`.


def read_task(task: GradeTask, settings: PoolSettings) -> Submission:
    """The task's submission, read in the grading process (the parent never parses a student's
    files) unless it came loaded, with the student's bug-hunt variants applied; never raises
    for anything in the student's files."""
    submission = task.submission if task.submission is not None else load_task(task, settings)
    if settings.variants is not None:
        submission = apply_variants(submission, settings.variants)
    return submission


def load_task(task: GradeTask, settings: PoolSettings) -> Submission:
    """The intake of a task: its submission's files read (with the notes of the class's
    intake), nothing applied yet. Run by the grading process, or on a Dask run by the client
    (the cluster's workers see no path of the client's). Never raises for anything in the
    student's files."""
    assert task.path is not None  # a task comes with its submission or its path
    with own_links(task.own_links):
        submission = load_quietly(task.path, task.student, settings.exercises)
    if any(n.startswith(HANDED_IN_AS) for n in task.notes):  # (which says why the id differs)
        submission.notes = [n for n in submission.notes if ORIGINAL_NAME not in n]
    # (An absent roster student's sidecar says "nothing handed in", and so does the intake of
    # the empty folder it has: once.)
    submission.notes[:0] = [n for n in task.notes if n not in submission.notes]
    return submission


def finish_task(outcome: CheckRun | BaseException, task: GradeTask, settings: PoolSettings
                ) -> SubmissionResult:
    """Score `outcome` and write the submission's outputs; never raises. What cannot be
    written as it is is written with its text escaped (same verdicts, same fingerprint); when
    not even that can be written, a grader failure (no fingerprint: the next run retries) is
    returned, written if possible: the run then says NOT GRADED and exits 1."""
    result: SubmissionResult | None = None
    try:
        if isinstance(outcome, BaseException):
            result = grader_failure(task.student, type(outcome).__name__,
                                    submitted_at=task.submitted_at)
        else:
            result = result_of(outcome, assignment=settings.assignment,
                               submitted_at=task.submitted_at, fingerprint=task.fingerprint,
                               late_marker=task.late_marker)
            if not is_final(result):  # no fingerprint: the next run grades it again
                result = result.model_copy(update={"fingerprint": None})
        write_submission_outputs(result, settings.out)
        return result
    except Exception as exc:  # noqa: BLE001 - one submission's outputs, never the process
        log.exception("torchgrade: writing the results of %s failed", task.student)
        first = exc
    if not isinstance(first, OSError) and result is not None and result.checks:
        try:
            safe = escaped(result)
            safe.notes.append("some text of this result could not be written as it was "
                              f"({type(first).__name__}): it was escaped")
            write_submission_outputs(safe, settings.out)
            return safe
        except Exception:  # noqa: BLE001
            log.exception("torchgrade: writing the escaped results of %s failed", task.student)
    return fail_task(task, f"its results could not be written: {type(first).__name__}: "
                           f"{first}"[:400], settings)


def fail_task(task: GradeTask, reason: str, settings: PoolSettings) -> SubmissionResult:
    """The result of a submission the grader could not grade, written if possible."""
    failed = grader_failure(task.student, printable(reason), submitted_at=task.submitted_at)
    try:
        write_submission_outputs(failed, settings.out)
    except Exception:  # noqa: BLE001 - the parent still counts it as not graded
        log.exception("torchgrade: even the failure note of %s could not be written",
                      task.student)
    return failed


def write_into(out: Path, result: SubmissionResult, files: dict[str, str]) -> None:
    """OUT's writer for a result and the files another process rendered of it (a Dask run)."""
    write_submission_outputs(result, out, rendered=files)


STEPS = GradingSteps(read=read_task, finish=finish_task, fail=fail_task)


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
    absent = sum(NOTHING_HANDED_IN in r.notes for r in summary.results)
    empty = f"; {absent} handed in nothing (0 points)" if absent else ""
    # A misnamed file scores as a missing one: counted, so that it is looked at before grades
    # are uploaded (each one's remark, in the CSVs and the index, names the files found).
    unmatched = sum(any(misfiled(n) for n in r.notes) for r in summary.results)
    misnamed = (f"; {unmatched} with a file no exercise has the name of (misnamed? see the "
                "remarks)" if unmatched else "")
    return (f"Graded {n} submission{'' if n == 1 else 's'}{done} in {summary.seconds:.1f} s"
            f"{rate}: {summary.full_marks} with full marks{failures}{empty}{misnamed}. {where}")
