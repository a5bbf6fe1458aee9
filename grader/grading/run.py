"""A class graded into OUT (`grade_class`): the students found and fingerprinted, what is up to
date taken from OUT, the rest graded in a pool of grading processes (or on a Dask cluster),
each student's folder written by the one writer (`grader.grading.writer`), then the class
files. `torchgrade grade` and `torchgrade demo` call it; the steps of one submission are
`grader.grading.steps`.

The pipeline of one submission, declared as data (`STEPS`), runs in each grading process:
intake (read the student's files), running (the checks), scoring (the result), the grading
stage's finish and writer (its files). The parent only finds the students, fingerprints them
and writes the class files."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from grader.course.folder import active_course
from grader.course.registry import known_exercises
from grader.errors import GraderUnavailable, UsageError
from grader.grading import notices
from grader.grading.class_files import write_class_outputs
from grader.grading.out import (earlier_result, earlier_results, handed_in_before, is_current,
                                out_locks, previous_result, release, set_aside_renamed)
from grader.grading.steps import STEPS, load_task, task_for
from grader.grading.summary import SHARDS, GradeSummary, write_shard_summary
from grader.grading.writer import write_into
from grader.intake.assignment import Assignment, from_exercises, roster_aliases
from grader.intake.files import Inode, class_hard_links, own_links
from grader.intake.fingerprint import fingerprint, grading_digest, submission_digest
from grader.intake.lms import STAGING
from grader.intake.plan import plan_of, roster_of
from grader.intake.shards import Shard
from grader.intake.students import (by_roster_ids, check_folders, class_students, download_layout,
                                    read_class)
from grader.intake.submission import OUT_MARKER, exercises_in
from grader.intake.variants import read_variants
from grader.models import SubmissionResult, failed_checks_of_the_grader, is_grader_failure, \
    lost_checks
from grader.outputs.writing import interrupts_deferred, remove_stale_temp_files, write_atomic
from grader.running.pool import GradeTask, PoolSettings, default_jobs
from grader.worker.limits import WorkerLimits

log = logging.getLogger("torchgrade")

@dataclass
class _Class:
    """The class as the parent sees it before grading: its students (id, path), the hard
    links among their files, the roster, the folders graded under a roster id."""

    submissions: Path
    out: Path
    plan: Assignment | None
    unnamed: str
    found: list
    roster: dict
    renamed: dict[str, str] = field(default_factory=dict)
    students: list[tuple[str, Path]] = field(default_factory=list)
    links: dict[str, set[Inode]] = field(default_factory=dict)

    def holds(self, sid: str, path: Path, wanted: list[str], *, any_link: bool = False
              ) -> set[str]:
        """The exercises of `wanted` the student has a file of that will be graded (with
        `any_link`, hard links to files elsewhere included)."""
        with own_links(None if any_link else self.links.get(sid, set())):
            return exercises_in(path, wanted)


def grade_class(submissions: Path, *, out: Path, exercises: list[str] | None = None,
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
    was graded, and propagates. UsageError for a request that cannot be graded (said before
    anything is written), GraderUnavailable when the grading processes cannot start.
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
    cls = _request(Path(submissions), Path(out), exercises=exercises, assignment=assignment,
                   jobs=jobs, lms=lms, shard=shard, dask=dask)
    manifest = read_variants(variants) if variants is not None else None
    if on_begin is not None:
        on_begin()
    out = cls.out
    summary = GradeSummary(out=out, shard=shard)
    locks = out_locks(out, shard)
    try:
        if shard is None:
            remove_stale_temp_files(out)  # left by a run that was killed mid-write
        write_atomic(out / OUT_MARKER, "This folder holds the results of `torchgrade grade`.\n")
        keep = shard.holds if shard is not None else None
        cls.students = class_students(cls.found, out / STAGING, cls.roster, keep,
                                      handed_in_before=lambda sid: handed_in_before(out / sid))
        cls.links = class_hard_links(cls.students)
        plan = _exercises_of(cls)
        scoring = plan.scoring_key()
        if manifest is not None:  # another key, another grading: results are not reused
            scoring += "\nvariants " + manifest.model_dump_json()
        grading = grading_digest(exercises=plan.exercise_names, scoring=scoring,
                                 limits=(limits or WorkerLimits()).model_dump_json())
        summary.exercises, summary.assignment = plan.exercise_names, plan
        everyone = {sid for sid, _ in cls.students}
        if shard is not None:  # (links: decided over the whole class, as in one run)
            everyone |= ({s.sid if hasattr(s, "sid") else s[0] for s in cls.found}
                         | set(cls.roster))
            cls.students = [(sid, path) for sid, path in cls.students if shard.holds(sid)]
            remove_stale_temp_files(out, [sid for sid, _ in cls.students])
        notices.warn_of_strangers([sid for sid, _ in cls.students
                                    if cls.roster and sid not in cls.roster])
        notices.warn_unknown_students(plan, everyone)
        set_aside_renamed(out, {k: f for k, f in cls.renamed.items() if shard is None
                                or shard.holds(k)})
        tasks = _tasks(cls, plan, grading, summary, force=force)
        summary.up_to_date = len(summary.results)
        if on_start is not None:
            on_start(len(cls.students), summary.up_to_date)
        settings = PoolSettings(out=out, exercises=plan.exercise_names, assignment=plan,
                                limits=limits, variants=manifest, submissions=cls.submissions)
        try:
            _dispatch(tasks, settings, summary, jobs=jobs, dask=dask, on_result=on_result)
            notices.warn_unknown_targets(plan, summary.results)
            notices.warn_of_notes(summary.results)
        finally:
            remove_stale_temp_files(out, None if shard is None else [t.student for t in tasks])
            summary.seconds = time.monotonic() - started
            _close(summary, tasks, everyone, roster=cls.roster, assignment=assignment)
    finally:
        release(locks)
    return summary


def _request(submissions: Path, out: Path, *, exercises: list[str] | None,
             assignment: Path | None, jobs: int | None, lms: str | None, shard: Shard | None,
             dask: str | None) -> _Class:
    """The class asked for, found (nothing read yet beyond names); UsageError, before anything
    is written, for a request that cannot be graded."""
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
        notices.warn_of_clashes(clashes)
    return _Class(submissions=submissions, out=out, plan=plan, unnamed=unnamed, found=found,
                  roster=roster, renamed=renamed)


def _exercises_of(cls: _Class) -> Assignment:
    """The assignment graded: the one asked for, else the exercises found in the submissions
    (by file names only); warned when no submission holds a file of any of them."""
    plan = cls.plan
    students = cls.students
    if plan is None:
        known = known_exercises()
        present = set().union(*(cls.holds(sid, path, known) for sid, path in students))
        plan = from_exercises([e for e in known if e in present] or known, name=cls.unnamed)
    chosen = plan.exercise_names
    if students and not any(cls.holds(sid, path, chosen) for sid, path in students):
        course = active_course()
        if any(cls.holds(sid, path, chosen, any_link=True) for sid, path in students):
            notices.warn_of_hard_links_only()
        else:
            notices.warn_of_no_exercise_file(chosen, course.name, course.root)
    return plan


def _tasks(cls: _Class, plan: Assignment, grading: str, summary: GradeSummary, *,
           force: bool) -> list[GradeTask]:
    """The task of each student to grade; the up-to-date results of the others go to
    `summary.results`, and the grades this run replaces to `summary.replaced`."""
    tasks = []
    out, roster = cls.out, cls.roster
    for sid, path in cls.students:
        # The parent reads no student file beyond fingerprints (bounded, regular files
        # only): the grading processes load the submissions, in parallel.
        own = f"\nstudent {plan.student_key(sid)}\nroster {bool(roster)} {sid in roster}"
        with own_links(cls.links.get(sid, ())):
            mark = fingerprint(submission_digest(path), grading + own)
        earlier = earlier_result(out / sid)
        if not force and earlier is not None and is_current(earlier, out / sid, mark):
            summary.results.append(earlier)
            continue
        if earlier is not None and earlier.checks:  # (kept when the new one is written)
            summary.replaced[sid] = (earlier.final_score, earlier.max_score)
        notes = []
        if sid in cls.renamed:
            notes.append(f"handed in as {cls.renamed[sid]}: graded under the id {sid} of "
                         f"the roster's row for {cls.renamed[sid]}")
        if roster and sid not in roster:
            # (said to the student too: what to do about it is the instructor's, in the
            # warning of `warn_of_strangers`)
            notes.append("not in the roster: graded under the id the submission gives")
        tasks.append(task_for(sid, mark, path, cls.links.get(sid, set()),
                              staged=path.parent == out / STAGING,
                              renamed_from=cls.renamed.get(sid), notes=notes))
    return tasks


def _dispatch(tasks: list[GradeTask], settings: PoolSettings, summary: GradeSummary, *,
              jobs: int | None, dask: str | None,
              on_result: Callable[[SubmissionResult], None] | None) -> None:
    """Grade `tasks` locally or on Dask; each result counted into `summary` as it arrives."""
    from grader.running.pool import PoolBroken, grade_in_pool

    def collect(result: SubmissionResult) -> None:
        summary.results.append(result)
        summary.graded += 1
        summary.failures += is_grader_failure(result)
        summary.check_errors += bool(failed_checks_of_the_grader(result))
        if lost_checks(result):
            summary.lost.append(result.student)
        if on_result is not None:
            on_result(result)

    try:
        if dask is not None:  # distributed is imported only on this path
            from grader.running.dask_cluster import grade_on_dask

            grade_on_dask(tasks, address=dask, settings=settings, steps=STEPS,
                          intake=load_task, on_result=collect,
                          write=partial(write_into, settings.out),
                          on_isolation=notices.isolation_warning)
        else:
            grade_in_pool(tasks, settings=settings, steps=STEPS,
                          jobs=min(jobs or default_jobs(), 64),
                          on_result=collect, on_isolation=notices.isolation_warning)
    except PoolBroken as exc:
        raise GraderUnavailable(str(exc)) from None


def _close(summary: GradeSummary, tasks: list[GradeTask], everyone: set[str], *, roster: dict,
           assignment: Path | None) -> None:
    """What a run does last, also when stopped (Ctrl-C, the sandbox): count what OUT holds
    of this grading, record the run, and (a whole run) write the class files."""
    out, shard = summary.out, summary.shard
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
            notices.warn_of_other_totals(summary)
            write_class_outputs(summary, roster=roster)
