"""The data that crosses module boundaries: submissions in, results out.

Every step of the pipeline takes and returns these models; outputs (JSON, HTML, CSV) are renderings
of `SubmissionResult`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

Status = Literal["passed", "failed", "error", "timeout", "crashed"]
# Why a check did not pass, when the status alone does not say it: "not_implemented" is an
# `error` whose code raised NotImplementedError (a stub not filled in yet), which terminal and
# reports show as its own state, "todo" (see `state_of`).
Reason = Literal["not_implemented"]
Visibility = Literal["visible", "hidden"]
# How much of a diagnosed fault a failing check shows the student: its symptom only (bug
# hunts: finding the cause is the exercise), or also its cause, or also the fix.
Reveal = Literal["symptom", "cause", "fix"]


class CheckInfo(BaseModel):
    """What a check declares next to its code."""

    # 0: a check that informs without scoring (a bug hunt's visible checks: its points are its
    # faults').
    points: float = Field(ge=0)
    targets: list[str] = Field(min_length=1)
    visibility: Visibility = "hidden"
    timeout: float | None = Field(None, gt=0, description="default deadline of each call, seconds")
    title: str = ""
    reveal: Reveal = "fix"


class SourceChunk(BaseModel):
    """A unit of student code run in order: a whole .py file, or one notebook code cell."""

    code: str
    filename: str
    label: str
    first_line: int = 1
    keep_going: bool = False  # a notebook cell that raises does not stop the next cells


class ModuleSource(BaseModel):
    """One exercise module as submitted, decoded and checked for syntax in the grader."""

    exercise: str
    path: str = Field(description="where it was found, relative to the submission")
    kind: Literal["py", "ipynb"]
    chunks: list[SourceChunk] = []
    notes: list[str] = Field([], description="problems that do not stop grading")
    fatal: str | None = Field(None, description="why the module cannot run at all")
    faults: list[str] | None = Field(None, description="bug hunts: the faults this student's "
                                     "copy holds (from a variants manifest); None: those of "
                                     "the exercise file")


class Submission(BaseModel):
    student: str
    root: str
    modules: dict[str, ModuleSource] = {}
    notes: list[str] = []


class CheckResult(BaseModel):
    id: str
    exercise: str
    title: str = ""
    targets: list[str]
    visibility: Visibility
    points: float
    max_points: float
    status: Status
    reason: Reason | None = Field(None, description="`not_implemented`: the code raised "
                                  "NotImplementedError (status `error`); absent in results of "
                                  "versions before it")
    message: str = ""
    call: str | None = Field(None, description="the call that failed, as the student would write it")
    expected: str | None = None
    got: str | None = None
    hint: str | None = Field(None, description="one line on the concept behind the check")
    output: str = Field("", description="what the student's code printed during this check")
    evidence: dict[str, Any] = Field({}, description="plain facts the check measured (numbers, "
                                     "short lists): what diagnoses and report plots are made of")
    diagnoses: list[str] = Field([], description="ids of catalogued faults (grader/faults.toml) "
                                 "the evidence points to")
    reveal: Reveal = Field("fix", description="how much of a diagnosis the student is shown")
    worker_records: list[str] = Field([], description="probes (grader/probes) whose records this "
                                      "verdict rests on: made inside the worker, next to the "
                                      "student's code, which code written to tamper with them "
                                      "could fake (README: Records made in the worker)")
    duration_s: float = 0.0


def state_of(check: CheckResult) -> str:
    """What terminal and reports show: the status, or "todo" for code not implemented yet."""
    return "todo" if check.reason == "not_implemented" else check.status


class ExerciseResult(BaseModel):
    exercise: str
    path: str | None = Field(None, description="the file graded, relative to the submission")
    score: float
    max_score: float
    notes: list[str] = Field([], description="load and import problems, notebook cell errors")
    output: str = Field("", description="what the module printed while it was imported")


class SubmissionResult(BaseModel):
    student: str
    grader_version: str
    graded_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    isolation: Literal["full", "reduced", "none"] = "none"
    exercises: list[ExerciseResult] = []
    checks: list[CheckResult] = []
    notes: list[str] = []
    # Bulk grading (issue 5); all optional so that results of earlier versions still load.
    assignment: str | None = Field(None, description="the assignment graded, if one was named")
    fingerprint: str | None = Field(None, description="hash of the submission's files, the "
                                    "grader and the grading settings; a rerun skips a "
                                    "submission whose results carry the same one")
    submitted_at: datetime | None = Field(None, description="from the submission's "
                                          "timestamp.txt, when it has one")
    late_penalty: float = Field(0.0, ge=0, description="points taken off for lateness "
                                "(not included in `score`)")
    grading_s: float = Field(0.0, ge=0, description="wall time the grader spent on this "
                             "submission, seconds")
    checks_s: float = Field(0.0, ge=0, description="the checks' own compute, seconds: every "
                            "check's duration, including a bug hunt's checks that did not count "
                            "for this student's copy (what `grading_s` spends beyond it is the "
                            "grader's overhead)")

    @computed_field
    @property
    def score(self) -> float:
        return round(sum(c.points for c in self.checks), 6)

    @computed_field
    @property
    def max_score(self) -> float:
        return round(sum(c.max_points for c in self.checks), 6)

    @property
    def all_passed(self) -> bool:
        return bool(self.checks) and all(c.status == "passed" for c in self.checks)
