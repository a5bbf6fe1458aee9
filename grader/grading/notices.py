"""What a run says to the instructor beside its progress: one warning each, naming the students
concerned (their reports say it to each student)."""

from __future__ import annotations

import logging
from collections import Counter

from grader.grading.summary import GradeSummary
from grader.intake.assignment import Assignment
from grader.models import SubmissionResult
from grader.outputs.exports import NOTE_WARNINGS

log = logging.getLogger("torchgrade")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")


def isolation_warning(isolation: str, missing) -> None:
    """Warn when the sandbox on this machine isolates student code less than fully."""
    if isolation != "full":
        log.warning("torchgrade: warning: worker isolation is %s on this machine; missing: %s. "
                    "See 'Isolation levels' in docs/operations.md.", isolation, missing)


def warn_of_clashes(clashes: dict[str, str]) -> None:
    """Folders naming a roster student who has a folder under their own id too (`clashes`:
    folder -> the roster row's id): graded apart, as not in the roster."""
    if clashes:
        log.warning("torchgrade: warning: %d folder(s) name a roster student who has a "
                    "folder under their own id too, and are graded apart, as not in the "
                    "roster: %s. Keep one folder per student.", len(clashes),
                    ", ".join(f"{f} (the row of {k})" for f, k in list(clashes.items())[:10])
                    + (" ..." if len(clashes) > 10 else ""))


def warn_of_strangers(strangers: list[str]) -> None:
    """Submissions whose id is in no row of the roster: graded, and marked so."""
    if strangers:
        log.warning("torchgrade: warning: %d submission(s) not in the roster, graded and "
                    "marked \"not in the roster\": %s. Add each that is a student of the "
                    "class to the roster (as a row's lms_id, student_id or email)",
                    len(strangers), _listed(strangers))


def warn_of_hard_links_only() -> None:
    log.warning("torchgrade: warning: every exercise file handed in is a hard link "
                "to a file that also lies outside the class (a copy made with `cp "
                "-al`, `rsync --link-dest` or a snapshot?): none is graded, since a "
                "student could link a file they may not read, and every student "
                "will score 0. Grade a copy without hard links (`cp -a`, `rsync "
                "-a`).")


def warn_of_no_exercise_file(chosen: list[str], course_name: str, course_root) -> None:
    log.warning("torchgrade: warning: no submission holds a file of any exercise "
                "graded (%s) of the course %r (%s): every student will score 0. "
                "The wrong course (--course, $TORCHGRADE_COURSE) or the wrong "
                "folder?", ", ".join(chosen), course_name, course_root)


def warn_of_notes(results: list[SubmissionResult]) -> None:
    """One warning for each of NOTE_WARNINGS that concerns some of `results`, naming them:
    their reports say it to each student; the instructor's run says it too."""
    for marker, says in NOTE_WARNINGS:
        named = sorted(r.student for r in results if any(marker in n for n in r.notes))
        if named:
            log.warning("torchgrade: warning: %d submission(s) %s: %s.", len(named), says,
                        _listed(named))


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


def _num(value: float) -> str:
    return f"{round(value, 2):g}"
