"""The class's gradebooks: the CSV exports of a list of `SubmissionResult`s."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from grader.models import SubmissionResult


# nbgrader's `nbgrader export` columns (its CsvExportPlugin), in its order.
NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name",
                    "first_name", "email", "raw_score", "late_submission_penalty", "score",
                    "max_score"]


def grades_csv(results: list[SubmissionResult], exercises: list[str], *,
               assignment: str = "", duedate: datetime | None = None,
               roster: Mapping[str, Any] | None = None) -> str:
    """One row per student: `student`, the score of each exercise, then nbgrader's export
    columns (`raw_score` the points earned, `score` after the late penalty, never below 0).
    `roster` maps student ids to objects with last_name, first_name and email."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *exercises, *NBGRADER_COLUMNS])
    for result in sorted(results, key=lambda r: r.student):
        per = {e.exercise: e.score for e in result.exercises}
        person = (roster or {}).get(result.student)
        final = max(0.0, result.score - result.late_penalty)
        writer.writerow([
            _cell(result.student), *(_num(per.get(e, 0.0)) for e in exercises),
            _cell(result.assignment or assignment), _time(duedate),
            _time(result.submitted_at), _cell(result.student),
            _cell(getattr(person, "last_name", "")), _cell(getattr(person, "first_name", "")),
            _cell(getattr(person, "email", "")), _num(result.score),
            _num(result.late_penalty), _num(final), _num(result.max_score)])
    return out.getvalue()


def _time(moment: datetime | None) -> str:
    return moment.isoformat(sep=" ") if moment is not None else ""


def _num(x: float) -> str:
    """Up to 6 decimals, no trailing zeros (`:g` would round 1234567 to 1.23457e+06)."""
    text = f"{round(x, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _cell(text: str) -> str:
    """Keep spreadsheets from reading a student id as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
