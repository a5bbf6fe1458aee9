"""The class's gradebooks: the CSV exports of a list of `SubmissionResult`s."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from grader.intake.assignment import UNREADABLE_TIME
from grader.intake.files import HARD_LINK_REFUSED
from grader.intake.submission import NOTHING_HANDED_IN, misfiled, other_candidates
from grader.models import SubmissionResult


# nbgrader's `nbgrader export` columns (its CsvExportPlugin), in its order.
NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name",
                    "first_name", "email", "raw_score", "late_submission_penalty", "score",
                    "max_score"]


# Notes of a student's result that the instructor must see too: (what the note holds, what the
# run's warning says of the students named). `remarks` repeats each note in the gradebooks.
NOTE_WARNINGS = [
    # A backup or snapshot made with hard links zeroes its students in silence otherwise.
    (HARD_LINK_REFUSED, "hold files that were not graded for being hard links to files that "
                        "also lie elsewhere (a copy made with `cp -al`, `rsync --link-dest` or a "
                        "snapshot?); grade a copy without hard links (`cp -a`, `rsync -a`) if "
                        "these are the students' own"),
    # Lateness that cannot be told is counted as none: the instructor should know whose.
    (UNREADABLE_TIME, "have a timestamp.txt that does not read as a time: not counted late "
                      "(see their remarks in grades.csv)"),
]


def grades_csv(results: list[SubmissionResult], exercises: list[str], *,
               assignment: str = "", duedate: datetime | None = None,
               roster: Mapping[str, Any] | None = None) -> str:
    """One row per student: `student`, the score of each exercise, then nbgrader's export
    columns (`raw_score` the points earned, `score` after the late penalty, never below 0),
    then `remarks` (`remarks()`).
    `roster` maps student ids to objects with last_name, first_name and email."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *exercises, *NBGRADER_COLUMNS, "remarks"])
    for result in sorted(results, key=lambda r: r.student):
        per = {e.exercise: e.score for e in result.exercises}
        person = (roster or {}).get(result.student)
        final = result.final_score
        writer.writerow([
            csv_cell(result.student), *(_num(per.get(e, 0.0)) for e in exercises),
            csv_cell(result.assignment or assignment), _time(duedate),
            _time(result.submitted_at),
            csv_cell(getattr(person, "student_id", "") or result.student),
            csv_cell(getattr(person, "last_name", "")), csv_cell(getattr(person, "first_name", "")),
            csv_cell(getattr(person, "email", "")), _num(result.score),
            _num(result.late_penalty), _num(final), _num(result.max_score),
            csv_cell(remarks(result))])
    return out.getvalue()


RemarkKind = Literal["nothing_handed_in", "roster", "misfiled", "not_loaded", "missing",
                     "warning", "candidates", "extension", "late", "adjusted"]


class Remark(BaseModel):
    """One remark on a result: what it says, and of which kind (what code branches on)."""

    kind: RemarkKind
    text: str


def remark_list(result: SubmissionResult) -> list[Remark]:
    """What a gradebook's reader must know beyond the numbers: nothing handed in, not in the
    roster, a file not graded, a file that does not load, which of several files was, an
    extension, lateness, the instructor's adjustments."""
    parts = [Remark(kind="nothing_handed_in" if n == NOTHING_HANDED_IN else "roster",
                    text=n.split(":", 1)[0]) for n in result.notes
             if n == NOTHING_HANDED_IN or n.startswith("not in the roster")]
    # A file the grader did not take for the exercise (a misnamed one, most often) scores as
    # nothing handed in: said where the grade is read, not only in the student's report.
    parts += [Remark(kind="misfiled", text=m) for n in result.notes if (m := misfiled(n))]
    # A file handed in that does not compile or import scores as nothing handed in too.
    parts += [Remark(kind="not_loaded", text=t) for t in not_loaded(result)]
    # An exercise with no file, beside work handed in (else "nothing handed in" says it).
    if not any(p.kind == "nothing_handed_in" for p in parts):
        parts += [Remark(kind="missing", text=f"{e} not handed in")
                  for e in not_submitted(result)]
    parts += [Remark(kind="warning", text=n) for n in result.notes
              if any(marker in n for marker, _ in NOTE_WARNINGS)]
    # Several files for one exercise: which one counted (a student who meant the other asks).
    parts += [Remark(kind="candidates", text=n) for e in result.exercises for n in e.notes
              if other_candidates(n)]
    if result.extended and result.due is not None:
        parts.append(Remark(kind="extension", text=f"extension to {_time(result.due)}"))
    if result.days_late:
        parts.append(Remark(kind="late", text=f"{result.days_late} day(s) late" + (
            " (LMS marker)" if result.late_marker and result.submitted_at is None else "")))
    for adj in result.adjustments:
        parts.append(Remark(kind="adjusted", text=f"adjusted {adj.target} {_num(adj.before)}->"
                            f"{_num(adj.after)}: {adj.reason or 'no reason given'}"))
    return parts


def remark_kinds(result: SubmissionResult) -> set[RemarkKind]:
    """The kinds of `remark_list(result)`: what code branches on (nothing handed in, a
    misfiled file, ...), read from the result as written, never from a note's words."""
    return {r.kind for r in remark_list(result)}


def remarks(result: SubmissionResult) -> str:
    """`remark_list` as one gradebook cell."""
    return "; ".join(r.text for r in remark_list(result))


REMARK_CHARS = 160  # of the error quoted in a `not_loaded` remark


def not_loaded(result: SubmissionResult) -> list[str]:
    """A remark per exercise whose file was handed in but not loaded (every check of it failed
    with reason `not_loaded`), quoting the first line of the error ("SyntaxError in a.py, line
    6: expected ':'")."""
    remarks = []
    for part in result.exercises:
        checks = [c for c in result.checks if c.exercise == part.exercise]
        if checks and all(c.reason == "not_loaded" for c in checks):
            error = (checks[0].message.splitlines() or [""])[0][:REMARK_CHARS]
            remarks.append(f"{part.path or part.exercise} not loaded"
                           + (f" ({error})" if error else ""))
    return remarks


def not_submitted(result: SubmissionResult) -> list[str]:
    """The exercises every check of which failed for want of a file (reason `not_submitted`)."""
    exercises = dict.fromkeys(c.exercise for c in result.checks)
    return [e for e in exercises
            if all(c.reason == "not_submitted" for c in result.checks if c.exercise == e)]


def _time(moment: datetime | None) -> str:
    return moment.isoformat(sep=" ") if moment is not None else ""


def _num(x: float) -> str:
    """Up to 6 decimals, no trailing zeros (`:g` would round 1234567 to 1.23457e+06)."""
    text = f"{round(x, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def csv_cell(text: str) -> str:
    """One line of printable text, never a formula: control characters (from a student's file
    or folder names: a terminal escape, a line break that line-based tools read as a forged
    row) written as escapes, and a leading formula character quoted for spreadsheets."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


# --------------------------------------------------------------------------- LMS gradebooks
# Canvas's gradebook import (Canvas guides, "How do I import grades in the Gradebook?"): a
# UTF-8 CSV whose first columns are those of its own export, `Student, ID, SIS User ID,
# SIS Login ID, Section`; a student is matched by ID (the Canvas user id), else SIS User ID,
# else SIS Login ID; every further column is an assignment (matched by its name, or by
# "Name (assignment id)"; a new name creates one); an optional second row whose Student cell
# is "Points Possible" gives the points of a new assignment; grades are plain numbers, and an
# empty cell changes nothing.
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Moodle's assignment grading worksheet ("Upload grading worksheet", assignfeedback_offline):
# `Identifier` ("Participant <id>", the id of the download's folder names) and `Grade` are
# required, `Feedback comments` fills the feedback; `Email address` lets the gradebook's CSV
# import ("Map from: Email address") take the same file.
MOODLE_COLUMNS = ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade",
                  "Feedback comments"]


def final_score(result: SubmissionResult) -> float:
    """What the student gets: the score after the late penalty, never below 0."""
    return result.final_score


def canvas_csv(results: list[SubmissionResult], *, assignment: str,
               roster: Mapping[str, Any] | None = None) -> str:
    """`OUT/canvas_grades.csv` for Canvas's gradebook import: one row per student (their id is
    the Canvas user id of the download, or the roster's `lms_id`), the final score in the
    column `assignment`, and the Points Possible row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([*CANVAS_COLUMNS, assignment])
    maximum = max((r.max_score for r in results), default=0.0)
    writer.writerow(["Points Possible", "", "", "", "", _num(maximum)])
    for result in sorted(results, key=lambda r: r.student):
        person = (roster or {}).get(result.student)
        name = ", ".join(x for x in (getattr(person, "last_name", ""),
                                     getattr(person, "first_name", "")) if x)
        writer.writerow([csv_cell(name or result.student), csv_cell(result.student),
                         csv_cell(getattr(person, "student_id", "") if person else ""),
                         csv_cell(getattr(person, "email", "") if person else ""), "",
                         _num(final_score(result)) if result.checks else ""])
    return out.getvalue()


def moodle_csv(results: list[SubmissionResult], *, roster: Mapping[str, Any] | None = None,
               names: Mapping[str, str] | None = None) -> str:
    """`OUT/moodle_grades.csv`, Moodle's grading worksheet: `Participant <id>` for the
    download's participant ids, the final score and a line of feedback per student. `names`:
    the full name by student id (`grade` gives the roster's, else the download's)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(MOODLE_COLUMNS)
    for result in sorted(results, key=lambda r: r.student):
        person = (roster or {}).get(result.student)
        name = (names or {}).get(result.student, "")
        ident = f"Participant {result.student}" if result.student.isdigit() else result.student
        writer.writerow([csv_cell(ident), csv_cell(name), csv_cell(getattr(person, "email", "")),
                         _num(final_score(result)) if result.checks else "",
                         _num(result.max_score), csv_cell(feedback_line(result))])
    return out.getvalue()


def feedback_line(result: SubmissionResult) -> str:
    """One line for the LMS's feedback: the score, what changed it, the first note."""
    if not result.checks:
        return "not graded (the grader failed: run torchgrade grade again)"
    parts = [f"torchgrade: {_num(result.score)}/{_num(result.max_score)}"]
    if result.late_penalty:
        parts.append(f"late by {result.days_late} day(s): -{_num(result.late_penalty)}, "
                     f"final {_num(final_score(result))}")
    for adj in result.adjustments:
        parts.append(f"instructor's adjustment of {adj.target}: {_num(adj.before)} -> "
                     f"{_num(adj.after)} ({adj.reason or 'no reason given'})")
    if "nothing_handed_in" in remark_kinds(result):
        parts.append(NOTHING_HANDED_IN)
    return "; ".join(parts)
