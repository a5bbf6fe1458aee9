"""A submission's folder in OUT: `OUT/<student>/` with report.html, gradescope.json and
results.json (written last, so that a results.json whose fingerprint matches vouches for the
rest), and results.previous.json: the grade the last one replaced."""

from __future__ import annotations

import json
import logging
from collections.abc import Container, Mapping
from pathlib import Path

from grader.models import EarlierGrade, SubmissionResult, is_grader_failure
from grader.outputs.gradescope import gradescope_json
from grader.outputs.report import render_report
from grader.outputs.writing import read_json, write_atomic, write_json

log = logging.getLogger("torchgrade")
PREVIOUS = "results.previous.json"


def write_submission_outputs(result: SubmissionResult, out: Path, *,
                             rendered: Mapping[str, str] | None = None,
                             folder: Path | None = None, faults_later: str = "") -> Path:
    """Write OUT/<student>/report.html, gradescope.json and results.json of a finished result
    (it is not changed here), each atomically; results.json last, so that a results.json whose
    fingerprint matches vouches for the rest. Returns the report's path. A class's OUT is
    written through `grader.grading.writer` (which keeps the grade a result replaces); a
    student's own check writes here directly.

    `rendered`: the three files as another process rendered them from `result` (a Dask
    worker's grading process), written as they are. `folder`: where the files go instead of
    OUT/<student> (a local check of some checks only); `faults_later`: see `render_report`."""
    folder = Path(out) / result.student if folder is None else Path(folder)
    if rendered is not None:
        for name in sorted(rendered, key=lambda n: n == "results.json"):  # results.json last
            write_atomic(folder / name, rendered[name])
        return folder / "report.html"
    write_atomic(folder / "report.html", render_report(result, faults_later=faults_later))
    write_atomic(folder / "gradescope.json", gradescope_json(result))
    write_json(result, folder / "results.json")
    return folder / "report.html"


def keep_previous(folder: Path, new: SubmissionResult) -> EarlierGrade | None:
    """Keep the grade in `folder`'s results.json, if it holds one (not a grader failure, which
    has no checks), as results.previous.json before `new` replaces it: a regrade is never the
    only record of what the student had. Copied when the new result is written, not before
    grading starts, so that a run stopped before it leaves the two files as they were.
    Returns the grade kept, or None when there was none.

    A regrade to the same grade (a --force, a new grader version) keeps the results.previous
    .json there is, and returns the grade the one it replaces had replaced: the record is of
    the last grade that changed, which a --force with nothing changed lost."""
    path = folder / "results.json"
    try:
        text = path.read_text(encoding="utf-8")
        graded = bool(json.loads(text).get("checks"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("torchgrade: warning: %s could not be read, so it is not kept as %s (%s)",
                    path, PREVIOUS, type(exc).__name__)
        return None
    if not graded:
        return None
    try:  # (kept whole even when another version's result does not load as one of ours)
        earlier: SubmissionResult | None = SubmissionResult.model_validate_json(text)
    except ValueError:
        earlier = None
    if (earlier is not None and (folder / PREVIOUS).exists() and not is_grader_failure(new)
            and (earlier.final_score, earlier.max_score) == (new.final_score, new.max_score)):
        return earlier.replaced
    write_atomic(folder / PREVIOUS, text)
    if earlier is None:
        return None
    return EarlierGrade(final_score=earlier.final_score, max_score=earlier.max_score,
                        graded_at=earlier.graded_at)


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
