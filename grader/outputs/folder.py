"""A submission's folder in OUT: `OUT/<student>/` with report.html, gradescope.json and
results.json (written last, so that a results.json whose fingerprint matches vouches for the
rest)."""

from __future__ import annotations

import logging
from collections.abc import Container
from pathlib import Path

from grader.models import SubmissionResult
from grader.outputs.gradescope import gradescope_json
from grader.outputs.report import render_report
from grader.outputs.writing import read_json, write_atomic, write_json

log = logging.getLogger("torchgrade")


def write_submission_outputs(result: SubmissionResult, out: Path) -> Path:
    """Write OUT/<student>/report.html, gradescope.json and results.json, each atomically;
    results.json last, so that a results.json whose fingerprint matches vouches for the rest.
    Returns the report's path."""
    folder = Path(out) / result.student
    write_atomic(folder / "report.html", render_report(result))
    write_atomic(folder / "gradescope.json", gradescope_json(result))
    write_json(result, folder / "results.json")
    return folder / "report.html"


def read_results(out: Path, *, besides: Container[str] = ()) -> list[SubmissionResult]:
    """Every readable `OUT/<student>/results.json`, by student id, but those of the students in
    `besides` (folders whose name starts with a dot are torchgrade's own)."""
    results = []
    for path in sorted(Path(out).glob("*/results.json")):
        if (path.parent.name.startswith(".") or path.parent.is_symlink()
                or path.parent.name in besides):
            continue
        try:
            result = read_json(path)
        except (OSError, ValueError) as exc:
            log.warning("torchgrade: warning: %s could not be read, not indexed (%s)", path,
                        type(exc).__name__)
            continue
        if result.student != path.parent.name:
            log.warning("torchgrade: warning: %s holds the result of %r, not of %r: not indexed",
                        path, result.student, path.parent.name)
            continue
        results.append(result)
    return results
