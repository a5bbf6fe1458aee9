"""PrairieLearn: its external grader's results format, written from a torchgrade result.

The format (PrairieLearn's "External Grading" documentation, "Grading results"): the grading
job writes `/grade/results/results.json` (it must create `/grade/results` itself), an object
with `score` (0.0-1.0, required when gradable), `gradable` (false: "invalid, not gradable",
no points given or taken and no attempt used; `format_errors` then says why), `message`,
`output`, and `tests`, each with `name`, `description`, `points`, `max_points`, `message`,
`output` (what `<pl-external-grader-results>` renders). The file must stay under 1 MB: per-test
messages and outputs are clipped to fit (`fit`), and the message says so.

Hidden checks: PrairieLearn shows the results at once and lets students submit again, so a
hidden check's message, output and title would turn it into a visible one. By default they are
listed with their points and pass/fail only (`reveal_hidden=True` shows them like the rest).

The image, entrypoint and `info.json` block that run this are `grader.release.prairielearn`.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from grader.models import CheckResult, SubmissionResult

ROOT_VARIABLE = "TORCHGRADE_PRAIRIELEARN_ROOT"
MAX_BYTES = 1_000_000         # PrairieLearn's limit on results.json
BUDGET = 900_000              # what we aim for: the limit, less a margin for what we misjudge
MESSAGE_CHARS = 4_000         # per test, before any further clipping
OUTPUT_CHARS = 20_000
CLIPPED = "\n[... clipped: results.json must stay under 1 MB ...]"


class PrairieLearnTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    points: float
    max_points: float
    message: str = ""
    output: str = ""


class PrairieLearnResults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gradable: bool = True
    score: float | None = Field(None, ge=0.0, le=1.0)
    message: str = ""
    output: str = ""
    format_errors: list[str] | None = None
    tests: list[PrairieLearnTest] = []


def to_prairielearn(result: SubmissionResult, *, reveal_hidden: bool = False
                    ) -> PrairieLearnResults:
    """`result` in PrairieLearn's format: score = points / max points (before any late
    penalty: PrairieLearn applies its own), one test per check in grading order; a result the
    grader could not grade (no checks) is not gradable."""
    if not result.checks:
        return not_gradable("the grader could not grade this submission: "
                            + "; ".join(result.notes or ["no reason recorded"]))
    tests, hidden = [], 0
    for check in result.checks:
        if check.visibility == "hidden" and not reveal_hidden:
            hidden += 1
            tests.append(PrairieLearnTest(
                name=f"{check.exercise}: hidden check {hidden}",
                description="a hidden check: its details are not shown",
                points=check.points, max_points=check.max_points,
                message="passed" if check.status == "passed" else "not passed"))
            continue
        tests.append(PrairieLearnTest(
            name=f"{check.exercise}: {check.title or check.id}",
            description=f"{check.id} (checks {', '.join(check.targets)})",
            points=check.points, max_points=check.max_points, message=_message(check),
            output=check.output))
    score = result.score / result.max_score if result.max_score > 0 else 0.0
    lines = [f"torchgrade {result.grader_version}: {result.score:g} / {result.max_score:g} "
             "points"]
    lines += [f"note: {n}" for n in result.notes]
    output = []
    for part in result.exercises:
        output.append(f"{part.exercise}: {part.score:g} / {part.max_score:g}"
                      + (f" ({part.path})" if part.path else ""))
        output += [f"  note: {n}" for n in part.notes]
        if part.output:
            output.append("  printed on import:\n" + part.output.rstrip())
    return fit(PrairieLearnResults(score=min(max(score, 0.0), 1.0), message="\n".join(lines),
                                   output="\n".join(output), tests=tests))


def not_gradable(reason: str) -> PrairieLearnResults:
    """A submission that cannot be graded (no file, unreadable, the sandbox cannot start):
    PrairieLearn gives no points, takes none, and counts no attempt."""
    reason = _clip(reason, MESSAGE_CHARS)
    return PrairieLearnResults(gradable=False, message=f"Not graded: {reason}",
                               format_errors=[reason])


def _message(check: CheckResult) -> str:
    if check.status == "passed":
        return "passed"
    parts = [f"[{check.status}] {check.message}".rstrip()]
    if check.hint and check.hint not in check.message:
        parts.append(f"hint: {check.hint}")
    return "\n".join(parts)


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:max(chars, 0)] + CLIPPED


def size_of(results: PrairieLearnResults) -> int:
    return len(results_json(results).encode("utf-8"))


def fit(results: PrairieLearnResults, budget: int = BUDGET) -> PrairieLearnResults:
    """`results` with messages and outputs clipped until the file is under `budget` bytes
    (first to MESSAGE_CHARS / OUTPUT_CHARS each, then shares of what is left, then nothing);
    the top-level message says so when anything was clipped."""
    tests = [t.model_copy(update={"message": _clip(t.message, MESSAGE_CHARS),
                                  "output": _clip(t.output, OUTPUT_CHARS)})
             for t in results.tests]
    clipped = results.model_copy(update={"tests": tests,
                                         "message": _clip(results.message, MESSAGE_CHARS),
                                         "output": _clip(results.output, OUTPUT_CHARS)})
    share = OUTPUT_CHARS
    while size_of(clipped) > budget and share > 0:
        # JSON escapes can make a character cost up to 6 bytes (\u0000): shrink by the bytes.
        share = share // 2 if share > 64 else 0
        clipped = clipped.model_copy(update={
            "output": _clip(clipped.output, share),
            "tests": [t.model_copy(update={"output": _clip(t.output, share),
                                           "message": _clip(t.message, min(share,
                                                                           MESSAGE_CHARS))})
                      for t in clipped.tests]})
    if size_of(clipped) > budget:  # thousands of tests: their names alone are too much
        clipped = not_gradable(f"the results of {len(results.tests)} checks do not fit in "
                               "PrairieLearn's 1 MB results.json")
    if clipped != results:
        clipped.message += ("\n(Some messages or printed output were clipped so that the "
                            "results fit in PrairieLearn's 1 MB limit.)")
    return clipped


def results_json(results: PrairieLearnResults) -> str:
    return results.model_dump_json(indent=2, exclude_none=True)


def prairielearn_root(root: Path | None = None) -> Path:
    return Path(root or os.environ.get(ROOT_VARIABLE) or "/grade")


def write_results(results: PrairieLearnResults, root: Path) -> Path:
    """ROOT/results/results.json (the folder created: PrairieLearn does not), atomically."""
    from grader.outputs.writing import write_atomic

    path = Path(root) / "results" / "results.json"
    write_atomic(path, results_json(results))
    return path
