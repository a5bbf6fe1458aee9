"""The one writer of a student's folder in a class's OUT, wherever the result was made: by this
process's checks (a local run's grading process), or by a Dask worker's grading process, whose
rendered files come with it. It keeps the grade the result replaces (results.previous.json,
`grader.outputs.folder.keep_previous`) and finishes the result with it (`grader.grading.finish`)
before anything is written: a result is never changed once written."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path

from grader.grading.finish import Finishing, finish
from grader.models import SubmissionResult
from grader.outputs.folder import keep_previous, write_submission_outputs

log = logging.getLogger("torchgrade")


def write_result(made: SubmissionResult, out: Path, how: Finishing, *,
                 rendered: Mapping[str, str] | None = None,
                 escape_if_unwritable: bool = False) -> SubmissionResult:
    """Finish `made` as `how` says, with the grade it replaces in `out/<student>/`, and write
    its folder (`grader.outputs.folder.write_submission_outputs`: results.json last). Returns
    the result as written.

    `rendered`: the three files as another process rendered them from `made` (a Dask worker's
    grading process); written as they are unless the result replaces a grade, which they
    cannot say: then they are rendered here. `escape_if_unwritable`: a result with checks
    whose text cannot be written as it is (not an OSError: the disk's) is written again with
    its text escaped (`Finishing.escaped_because`); when not even that can be written, the
    first error is raised. Without it, every error is raised."""
    earlier = keep_previous(Path(out) / made.student, made)
    how = dataclasses.replace(how, replaced=earlier)
    result = finish(made, how)
    try:
        write_submission_outputs(result, out, rendered=rendered if earlier is None else None)
        return result
    except Exception as exc:
        if not escape_if_unwritable or isinstance(exc, OSError) or not made.checks:
            raise
        log.exception("torchgrade: writing the results of %s failed", made.student)
        first = exc
    try:
        safe = finish(made, dataclasses.replace(how, escaped_because=type(first).__name__))
        write_submission_outputs(safe, out)
        return safe
    except Exception:  # noqa: BLE001 - said, then the first error is the result's
        log.exception("torchgrade: writing the escaped results of %s failed", made.student)
        raise first from None


def write_into(out: Path, result: SubmissionResult, files: dict[str, str]) -> None:
    """OUT's writer for a result a Dask worker's grading process finished and rendered
    (`files`): its own fingerprint kept, the grade it replaces here added."""
    write_result(result, out, Finishing(fingerprint=result.fingerprint), rendered=files)
