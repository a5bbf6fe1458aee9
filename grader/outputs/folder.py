"""A submission's folder in OUT: `OUT/<student>/` with report.html, gradescope.json and
results.json (written last, so that a results.json whose fingerprint matches vouches for the
rest), and results.previous.json: the grade the last one replaced."""

from __future__ import annotations

import json
import logging
from collections.abc import Container
from pathlib import Path

from grader.models import SubmissionResult
from grader.outputs.gradescope import gradescope_json
from grader.outputs.report import render_report
from grader.outputs.writing import read_json, write_atomic, write_json

log = logging.getLogger("torchgrade")
PREVIOUS = "results.previous.json"


def write_submission_outputs(result: SubmissionResult, out: Path) -> Path:
    """Write OUT/<student>/report.html, gradescope.json and results.json, each atomically;
    results.json last, so that a results.json whose fingerprint matches vouches for the rest.
    Returns the report's path."""
    folder = Path(out) / result.student
    keep_previous(folder)
    write_atomic(folder / "report.html", render_report(result))
    write_atomic(folder / "gradescope.json", gradescope_json(result))
    write_json(result, folder / "results.json")
    return folder / "report.html"


def keep_previous(folder: Path) -> None:
    """Keep the grade in `folder`'s results.json, if it holds one (not a grader failure, which
    has no checks), as results.previous.json before a new result replaces it: a regrade is
    never the only record of what the student had. Copied when the new result is written, not
    before grading starts, so that a run stopped before it leaves the two files as they were."""
    try:
        text = (folder / "results.json").read_text(encoding="utf-8")
        graded = bool(json.loads(text).get("checks"))
    except FileNotFoundError:
        return
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("torchgrade: warning: %s/results.json could not be read, so it is not kept "
                    "as %s (%s)", folder, PREVIOUS, type(exc).__name__)
        return
    if graded:
        write_atomic(folder / PREVIOUS, text)


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
