"""A submission's folder in OUT: `OUT/<student>/` with report.html, gradescope.json and
results.json (written last, so that a results.json whose fingerprint matches vouches for the
rest)."""

from __future__ import annotations

from pathlib import Path

from grader.models import SubmissionResult
from grader.outputs.gradescope import gradescope_json
from grader.outputs.report import render_report
from grader.outputs.writing import write_atomic, write_json


def write_submission_outputs(result: SubmissionResult, out: Path) -> Path:
    """Write OUT/<student>/report.html, gradescope.json and results.json, each atomically;
    results.json last, so that a results.json whose fingerprint matches vouches for the rest.
    Returns the report's path."""
    folder = Path(out) / result.student
    write_atomic(folder / "report.html", render_report(result))
    write_atomic(folder / "gradescope.json", gradescope_json(result))
    write_json(result, folder / "results.json")
    return folder / "report.html"
