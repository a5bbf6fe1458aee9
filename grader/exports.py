"""Machine-readable outputs of `SubmissionResult`: results.json and the CSV gradebook.

Every file is written atomically (a temporary file renamed into place), so an interrupted run
never leaves a half-written result behind.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.models import SubmissionResult


def write_atomic(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide reports from a web server or a TA
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def results_json(result: SubmissionResult) -> str:
    return result.model_dump_json(indent=2)


def write_json(result: SubmissionResult, path: Path) -> None:
    write_atomic(path, results_json(result))


def read_json(path: Path) -> SubmissionResult:
    return SubmissionResult.model_validate_json(Path(path).read_text(encoding="utf-8"))


def write_submission_outputs(result: SubmissionResult, out: Path) -> Path:
    """Write OUT/<student>/report.html, gradescope.json and results.json, each atomically;
    results.json last, so that a results.json whose fingerprint matches vouches for the rest.
    Returns the report's path."""
    from grader.gradescope import gradescope_json  # imported late: exports stays light
    from grader.report import render_report

    folder = Path(out) / result.student
    started = time.perf_counter()
    write_atomic(folder / "report.html", render_report(result))
    write_atomic(folder / "gradescope.json", gradescope_json(result))
    if result.grading_s:  # the grader's time for this submission includes writing it
        result.grading_s = round(result.grading_s + time.perf_counter() - started, 4)
    write_json(result, folder / "results.json")
    return folder / "report.html"


def remove_stale_temp_files(out: Path) -> int:
    """Delete the temporary files `write_atomic` leaves when its process is killed mid-write
    (in OUT and OUT/<student>/); only while no other run writes into OUT (see `OutLock`)."""
    removed = 0
    out = Path(out)
    for pattern in (".*.tmp", "*/.*.tmp"):
        for path in out.glob(pattern):
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
    return removed


# Written into OUT by every `torchgrade grade` run: `grade` refuses to take a folder holding it
# as SUBMISSIONS (grading result folders as students would overwrite every real grade).
OUT_MARKER = ".torchgrade-output"


class OutLock:
    """An exclusive lock on OUT for one `torchgrade grade` run (flock: released by the kernel
    even when the run is killed)."""

    NAME = ".torchgrade.lock"

    def __init__(self, out: Path):
        self.path = Path(out) / self.NAME
        self.fd: int | None = None

    def __enter__(self) -> "OutLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


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
