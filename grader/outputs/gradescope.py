"""Gradescope: its autograder results format, and an autograder bundle that runs torchgrade.

The format (Gradescope's "Autograder Specifications"): `/autograder/results/results.json` holds a
top-level `score`, `execution_time`, `output`, `visibility`, `stdout_visibility` and `tests`, each
test with `name`, `number`, `score`, `max_score`, `status`, `visibility`, `output`. The models
below accept nothing else (`extra="forbid"`), so a result that validates against them uses only
fields Gradescope defines.

Visibility: a `visible` check is `"visible"`. A `hidden` check is `"after_published"`: hidden
checks are hidden *until grading*, and "after_published" shows them when the instructor publishes
the grades (after reviewing them), which is that moment; "hidden" would never show students why
they lost the points, and "after_due_date" would show them automatically at the deadline, before
staff have looked at the results (and while students with an extension are still working).

The bundle that runs torchgrade inside Gradescope is `grader.release.gradescope_bundle`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.models import CheckResult, SubmissionResult

GradescopeVisibility = Literal["hidden", "after_due_date", "after_published", "visible"]
VISIBILITY: dict[str, GradescopeVisibility] = {"visible": "visible", "hidden": "after_published"}
ROOT_VARIABLE = "TORCHGRADE_AUTOGRADER_ROOT"


class GradescopeTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    number: str | None = None
    score: float | None = None
    max_score: float | None = None
    status: Literal["passed", "failed"] | None = None
    visibility: GradescopeVisibility = "visible"
    output: str = ""
    output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    tags: list[str] = []
    extra_data: dict[str, Any] = {}


class GradescopeResults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: float | None = None
    execution_time: int | None = Field(None, ge=0, description="seconds")
    output: str = ""
    output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    visibility: GradescopeVisibility = "visible"
    stdout_visibility: GradescopeVisibility = "visible"
    extra_data: dict[str, Any] = {}
    tests: list[GradescopeTest] = []


def to_gradescope(result: SubmissionResult) -> GradescopeResults:
    """The submission's result in Gradescope's format: one test per check, numbered
    `<exercise>.<check>` in grading order; load problems and notes in the top-level output."""
    tests = []
    numbers = {e.exercise: i for i, e in enumerate(result.exercises, start=1)}
    seen: dict[str, int] = {}
    for check in result.checks:
        seen[check.exercise] = seen.get(check.exercise, 0) + 1
        major = numbers.get(check.exercise, len(numbers) + 1)
        tests.append(GradescopeTest(
            name=f"{check.exercise}: {check.title or check.id}",
            number=f"{major}.{seen[check.exercise]}",
            score=check.points, max_score=check.max_points,
            status="passed" if check.status == "passed" else "failed",
            visibility=VISIBILITY[check.visibility], output=_check_output(check),
            output_format="text", tags=[check.exercise, *check.targets]))
    lines = [f"torchgrade {result.grader_version}: {result.score:g} / {result.max_score:g} points"
             + (f" (late penalty {result.late_penalty:g} not included)" if result.late_penalty
                else "")]
    lines += [f"note: {n}" for n in result.notes]
    for part in result.exercises:
        lines.append(f"{part.exercise}: {part.score:g} / {part.max_score:g}"
                     + (f" ({part.path})" if part.path else ""))
        lines += [f"  note: {n}" for n in part.notes]
    return GradescopeResults(score=result.score, execution_time=round(result.grading_s),
                             output="\n".join(lines), output_format="text",
                             visibility="visible", stdout_visibility="hidden", tests=tests)


def _check_output(check: CheckResult) -> str:
    if check.status == "passed":
        return "passed"
    parts = [f"[{check.status}] {check.message}".rstrip()]
    if check.stopped_at:
        parts.append(f"it was stopped in {check.stopped_at}")
    if check.hint and check.hint not in check.message:
        parts.append(f"hint: {check.hint}")
    if check.output:
        parts.append("your code printed:\n" + check.output.rstrip())
    return "\n".join(parts)


def gradescope_json(result: SubmissionResult) -> str:
    return to_gradescope(result).model_dump_json(indent=2, exclude_none=True)


# --------------------------------------------------------------------------- the bundle


def autograder_root(root: Path | None = None) -> Path:
    return Path(root or os.environ.get(ROOT_VARIABLE) or "/autograder")


def write_results(results: GradescopeResults, root: Path) -> Path:
    from grader.outputs.writing import write_atomic

    path = root / "results" / "results.json"
    write_atomic(path, results.model_dump_json(indent=2, exclude_none=True))
    return path
