"""Machine-readable outputs of `SubmissionResult`: results.json and the CSV gradebook.

Every file is written atomically (a temporary file renamed into place), so an interrupted run
never leaves a half-written result behind.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path

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


def grades_csv(results: list[SubmissionResult], exercises: list[str]) -> str:
    """One row per student: id, score per exercise, total and maximum."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *exercises, "score", "max_score"])
    for result in sorted(results, key=lambda r: r.student):
        per = {e.exercise: e.score for e in result.exercises}
        writer.writerow([_cell(result.student), *(_num(per.get(e, 0.0)) for e in exercises),
                         _num(result.score), _num(result.max_score)])
    return out.getvalue()


def _num(x: float) -> str:
    return f"{x:g}"


def _cell(text: str) -> str:
    """Keep spreadsheets from reading a student id as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
