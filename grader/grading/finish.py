"""The one place a result is finished: a result made by `grader.scoring.results` (`result_of`,
or `grader_failure`) gets what only the run that writes it knows, and nothing changes it after.

What differs between the ways a result is finished is a typed `Finishing`, never an edit of
the result by its caller: the grading's fingerprint (kept only on a final result: one that is
not is graded again by the next run), the grade it replaces in OUT (known only when its folder
is written), and whether its text is escaped because it could not be written as it was."""

from __future__ import annotations

from dataclasses import dataclass

from grader.models import EarlierGrade, SubmissionResult, is_final, is_grader_failure
from grader.outputs.writing import escaped


@dataclass(frozen=True)
class Finishing:
    """How a made result is finished.

    - `fingerprint`: the grading's fingerprint of the submission, stamped only on a final
      result (`grader.models.is_final`): a grader failure or a check that failed itself or was
      lost leaves none, and the next run grades the student again;
    - `replaced`: the grade this result replaces in OUT (`grader.outputs.folder.keep_previous`);
    - `escaped_because`: the name of the error that kept the result from being written as it
      was; its every string is then escaped to valid UTF-8 and a note says so (same verdicts,
      same fingerprint)."""

    fingerprint: str | None = None
    replaced: EarlierGrade | None = None
    escaped_because: str | None = None


def finish(made: SubmissionResult, how: Finishing) -> SubmissionResult:
    """`made` finished as `how` says: a new result (`made` is left as it is)."""
    result = escaped(made) if how.escaped_because is not None else made.model_copy()
    if how.escaped_because is not None:
        result.notes.append("some text of this result could not be written as it was "
                            f"({how.escaped_because}): it was escaped")
    result.fingerprint = (how.fingerprint if not is_grader_failure(result) and is_final(result)
                          else None)
    result.replaced = how.replaced
    return result
