"""The data that crosses module boundaries: submissions in, results out.

Every step of the pipeline takes and returns these models; outputs (JSON, HTML, CSV) are renderings
of `SubmissionResult`.

Results carry text that came from student code (messages, printed output, evidence), so the
result models bound it when they are built, whatever the worker clipped or failed to clip: every
text is valid UTF-8 (lone surrogates become U+FFFD) and at most its field's length, evidence is
small plain data, and a whole `SubmissionResult` keeps at most `TEXT_BUDGET` bytes of text (the
longest texts are clipped first), so that no results.json or report can grow past a few MB.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    computed_field,
    model_validator,
)

from grader.worker.text import valid_text

Status = Literal["passed", "failed", "error", "timeout", "crashed"]
# Why a check did not pass, when the status alone does not say it (decisions read this, never
# the message's words): "not_implemented" is an `error` whose code raised NotImplementedError
# (a stub not filled in yet), which terminal and reports show as its own state, "todo" (see
# `state_of`); "not_submitted": the exercise's file is not in the submission; "not_defined":
# the module does not define a name the check calls. None of them is a bug in code that ran.
# "not_loaded": the module does not compile, cannot be read or failed to import (the error is
# the student's, but none of their functions ran); "grader_error": the check itself failed.
# "lost": the check could not be run to its end for a cause outside the student's code (the
# kernel killed its worker for memory another process held).
Reason = Literal["not_implemented", "not_submitted", "not_defined", "not_loaded", "grader_error",
                 "lost"]
NOT_STARTED: tuple[Reason, ...] = ("not_implemented", "not_submitted", "not_defined")
# A check failing for one of these called no function of the student's: no attempt at it.
NO_FUNCTION_RAN: tuple[Reason, ...] = (*NOT_STARTED, "not_loaded", "grader_error", "lost")
Visibility = Literal["visible", "hidden"]
# How much of a diagnosed fault a failing check shows the student: its symptom only (bug
# hunts: finding the cause is the exercise), or also its cause, or also the fix.
Reveal = Literal["symptom", "cause", "fix"]


# --------------------------------------------------------------------------- bounded text

# Whole-result budget, in bytes of text as written (UTF-8, with the worst escaping of JSON or
# HTML counted: a quote or a control character costs 6). An honest result holds ~100 KB; the
# report adds pictures and the page around the text (test_hostile_decode keeps it under 5 MB).
TEXT_BUDGET = 2_000_000
EVIDENCE_ITEMS = 1000  # per list or dict (checks record a few hundred numbers at most)
EVIDENCE_LEAVES = 10_000  # values per check
EVIDENCE_DEPTH = 8
EVIDENCE_CHARS = 2000  # per string
EVIDENCE_TEXT = 20_000  # characters of strings per check
EVIDENCE_KEY = 100  # characters a key keeps once the text budget is spent
_ESCAPED = bytes([*range(32), 0x7F, *b"&<>\"'\\"])


def clip_text(text: str, limit: int) -> str:
    """`text` as valid UTF-8 of at most about `limit` characters: a longer one keeps its
    start and says how much was cut."""
    if len(text) > limit:  # clipped first: making it valid costs only what is kept
        text = text[:limit] + f"\n[... {len(text) - limit:,} characters omitted ...]"
    return valid_text(text)


def _clipped(limit: int) -> AfterValidator:
    """Clips a text field to `limit` characters (`clip_text`)."""
    return AfterValidator(lambda v: clip_text(v, limit))


def _items(limit: int, *, say: bool = True):
    """Keeps the first `limit` items of a list (with `say`, one more says how many went)."""
    def clip(items: list) -> list:
        if len(items) <= limit:
            return items
        return items[:limit] + ([f"... and {len(items) - limit} more"] if say else [])
    return AfterValidator(clip)


Name = Annotated[str, _clipped(1000)]  # ids, titles, paths, targets
Line = Annotated[str, _clipped(4000)]  # a call, an expected or got value, a hint, a note
Message = Annotated[str, _clipped(20_000)]
# Output is clipped to 64 KB per check and 256 KB per exercise before it reaches a result.
Output = Annotated[str, _clipped(300_000)]


def bounded_evidence(evidence: dict) -> dict:
    """Evidence as small plain data: strings clipped to `EVIDENCE_CHARS` (and `EVIDENCE_TEXT`
    in all), lists and dicts to `EVIDENCE_ITEMS` items, nesting to `EVIDENCE_DEPTH`,
    `EVIDENCE_LEAVES` values a check."""
    left, chars = [EVIDENCE_LEAVES], [EVIDENCE_TEXT]

    def key(k: Any) -> Any:
        # A key is a name a reader looks up: a spent text budget clips it, never erases it
        # (every key would become one "[...]" and the later values overwrite each other).
        if not isinstance(k, str):
            return k
        text = clip_text(k, max(min(EVIDENCE_CHARS, chars[0]), EVIDENCE_KEY))
        chars[0] -= len(text)
        return text

    def walk(x: Any, depth: int) -> Any:
        if isinstance(x, str):
            left[0] -= 1
            if chars[0] <= 0:
                return "[...]"
            text = clip_text(x, min(EVIDENCE_CHARS, chars[0]))
            chars[0] -= len(text)
            return text
        if isinstance(x, (list, tuple, dict)):
            if depth >= EVIDENCE_DEPTH or left[0] <= 0:
                left[0] -= 1
                return "[... omitted ...]"
            if isinstance(x, dict):
                return {key(k): walk(v, depth + 1)
                        for k, v in list(x.items())[:EVIDENCE_ITEMS] if left[0] > 0}
            out = [walk(v, depth + 1) for v in x[:EVIDENCE_ITEMS] if left[0] > 0]
            return tuple(out) if isinstance(x, tuple) else out
        left[0] -= 1
        return x

    return walk(evidence, 0)


def text_cost(text: str) -> int:
    """Bytes `text` may take once written: UTF-8, plus 5 for each character JSON or HTML
    escapes (quotes, `&<>`, backslashes, control characters)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass")
    return len(data) + 5 * (len(data) - len(data.translate(None, _ESCAPED)))


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
    autograd: bool = Field(True, description="False: the submission's code cannot run a "
                           "backward pass (backward(), torch.autograd.grad, torch.func) during "
                           "the check's calls: for functions whose contract is gradients by hand")
    forbid: list[str] = Field([], description="fragments of aten operator names the "
                              "contract forbids (\"batch_norm\"): refused in the worker during "
                              "the check's calls")


class PendingCheck(BaseModel):
    """A hidden check that did not run here: it runs when the work is graded. (Here, not in
    `grader.checking.selection`, so that the edition and the terminal, which `torchgrade check`
    needs before its sandbox starts, can name it without importing torch and pytest.)"""

    exercise: str
    title: str
    points: float
    targets: list[str]
    # A bug hunt scores the checks for the faults seeded in the copy; one for a fault it did not
    # seed counts only if it fails. False for those, so totals shown before grading are right.
    counted: bool = True


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
    # Checks and the plugin set fields after construction (evidence, diagnoses): validated too.
    model_config = ConfigDict(validate_assignment=True)

    id: Name
    exercise: Name
    title: Name = ""
    targets: Annotated[list[Name], _items(100, say=False)]
    visibility: Visibility
    points: float
    max_points: float
    status: Status
    reason: Reason | None = Field(None, description="`not_implemented`: the code raised "
                                  "NotImplementedError (status `error`); `not_submitted`: no "
                                  "file for the exercise; `not_defined`: a name the check calls "
                                  "is missing; `not_loaded`: the module does not compile, "
                                  "cannot be read or failed to import (status `error` or "
                                  "`crashed`); `grader_error`: the check itself failed (status "
                                  "`error`: a bug of the course's, never the student's); `lost`: "
                                  "the check could not run to its end for a cause outside the "
                                  "student's code (the machine ran out of memory); absent "
                                  "in results of versions before them")
    message: Message = ""
    call: Line | None = Field(None, description="the call that failed, as the student would "
                              "write it")
    expected: Line | None = None
    got: Line | None = None
    hint: Line | None = Field(None, description="one line on the concept behind the check")
    stopped_at: Line | None = Field(None, description="where the student's code was when a call "
                                    "ran out of time (\"f.py, line 3, in g: `code`\"): a "
                                    "sample, which can differ between two gradings like the "
                                    "durations, so kept out of the message")
    output: Output = Field("", description="what the student's code printed during this check")
    evidence: Annotated[dict[str, Any], AfterValidator(bounded_evidence)] = Field(
        {}, description="plain facts the check measured (numbers, short lists): what diagnoses "
        "and report plots are made of")
    diagnoses: Annotated[list[Name], _items(100, say=False)] = Field(
        [], description="ids of catalogued faults (grader/course/faults.toml) the evidence "
                        "points to")
    reveal: Reveal = Field("fix", description="how much of a diagnosis the student is shown")
    worker_records: Annotated[list[Name], _items(100, say=False)] = Field(
        [], description="probes (grader/probes) whose records this verdict rests on: made "
        "inside the worker, next to the student's code, which code written to tamper with them "
        "could fake (docs/operations.md: Records made in the worker)")
    duration_s: float = 0.0


def state_of(check: CheckResult) -> str:
    """What terminal and reports show: the status, or "todo" for code not implemented yet,
    "missing" for a file not submitted (no code of the student's ran, yet the report said it
    raised an error)."""
    if check.reason == "not_implemented":
        return "todo"
    return "missing" if check.reason == "not_submitted" else check.status


class ExerciseResult(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    exercise: Name
    path: Name | None = Field(None, description="the file graded, relative to the submission")
    score: float
    max_score: float
    notes: Annotated[list[Line], _items(100)] = Field(
        [], description="load and import problems, notebook cell errors")
    output: Output = Field("", description="what the module printed while it was imported")


class Adjustment(BaseModel):
    """An instructor's override, as applied: what the target had before and has after."""

    target: Name = Field(description="the exercise or check id it applies to")
    kind: Literal["exercise", "check"]
    exercise: Name
    before: float
    after: float
    reason: Line = ""


class EarlierGrade(BaseModel):
    """The grade a result replaced in OUT (kept whole as results.previous.json)."""

    final_score: float
    max_score: float
    graded_at: datetime


class SubmissionResult(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    # `student` is the submission's id as the batch knows it (results are matched to
    # submissions by it): the loader makes it, and it is not rewritten here.
    student: str
    grader_version: Name
    graded_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    isolation: Literal["full", "reduced", "none"] = "none"
    exercises: list[ExerciseResult] = []
    checks: list[CheckResult] = []
    notes: Annotated[list[Line], _items(200)] = []
    # Bulk grading (issue 5); all optional so that results of earlier versions still load.
    assignment: str | None = Field(None, description="the assignment graded, if one was named")
    fingerprint: str | None = Field(None, description="hash of the submission's files, the "
                                    "grader and the grading settings; a rerun skips a "
                                    "submission whose results carry the same one")
    submitted_at: datetime | None = Field(None, description="from the submission's "
                                          "timestamp.txt, when it has one")
    late_penalty: float = Field(0.0, ge=0, description="points taken off for lateness "
                                "(not included in `score`)")
    # LMS downloads, extensions and overrides (issue 17); optional for earlier results.
    due: datetime | None = Field(None, description="the due date applied: the student's "
                                 "extension, else the assignment's")
    extended: bool = Field(False, description="`due` is the student's own extension")
    days_late: int = Field(0, ge=0, description="started days late, after the grace period")
    late_marker: bool = Field(False, description="the LMS marked it late without a time "
                              "(Canvas's LATE): counted as one day late")
    adjustments: list[Adjustment] = Field([], description="the instructor's overrides, applied")
    grading_s: float = Field(0.0, ge=0, description="wall time the grader spent on this "
                             "submission, seconds")
    replaced: EarlierGrade | None = Field(None, description="the grade this result replaced "
                                          "when it was written to OUT: a regrade, shown as "
                                          "one in the report and the class index")
    checks_s: float = Field(0.0, ge=0, description="the checks' own compute, seconds: every "
                            "check's duration, including a bug hunt's checks that did not count "
                            "for this student's copy (what `grading_s` spends beyond it is the "
                            "grader's overhead)")

    @model_validator(mode="after")
    def _within_budget(self) -> SubmissionResult:
        fit_budget(self, TEXT_BUDGET)
        return self

    # mypy rejects any decorator over @property; this is the form pydantic documents.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def score(self) -> float:
        """The checks' points, plus what overrides of whole exercises added or took off."""
        extra = sum(a.after - a.before for a in self.adjustments if a.kind == "exercise")
        return round(sum(c.points for c in self.checks) + extra, 6)

    # mypy rejects any decorator over @property; this is the form pydantic documents.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def max_score(self) -> float:
        return round(sum(c.max_points for c in self.checks), 6)

    @property
    def final_score(self) -> float:
        """What the student gets: `score` (instructor adjustments included) after the late
        penalty, never below 0 (not stored: it follows from the two)."""
        return max(0.0, round(self.score - self.late_penalty, 6))

    @property
    def all_passed(self) -> bool:
        return bool(self.checks) and all(c.status == "passed" for c in self.checks)


# Checks whose result is no verdict on the student's code: the result holding one is not final
# (no fingerprint: the next run grades it again), and the run that made it exits 1.
NOT_FINAL: tuple[Reason, ...] = ("grader_error", "lost")


def failed_checks_of_the_grader(result: SubmissionResult) -> list[str]:
    """The ids of the checks that failed themselves on this result (`grader_error`): its score
    lacks their points through no fault of the student's, so it is not final."""
    return [c.id for c in result.checks if c.reason == "grader_error"]


def lost_checks(result: SubmissionResult) -> list[str]:
    """The ids of the checks of this result lost to a cause outside the student's code
    (`lost`): its score lacks their points through no fault of the student's."""
    return [c.id for c in result.checks if c.reason == "lost"]


def is_final(result: SubmissionResult) -> bool:
    """Whether this result is a verdict on every one of its checks (none `NOT_FINAL`)."""
    return not any(c.reason in NOT_FINAL for c in result.checks)


def is_grader_failure(result: SubmissionResult) -> bool:
    """A result with no checks at all: the grader could not grade that submission (a graded
    submission always has every check of its exercises, even for a file not submitted)."""
    return not result.checks


class ModuleRun(BaseModel):
    """What loading one student module in a worker showed (running -> scoring)."""

    notes: list[str] = Field([], description="notebook cells that raised, for the report")
    import_output: str = Field("", description="what the module printed while imported")
    unavailable: str | None = Field(None, description="why the module cannot run at all")


class CheckRun(BaseModel):
    """What running the checks of one submission gave, before it is scored: the contract
    between the running stage and the scoring stage (`grader.scoring.results.result_of`)."""

    submission: Submission
    exercises: list[str]
    checks: list[CheckResult]
    modules: dict[str, ModuleRun] = {}
    isolation: Literal["full", "reduced", "none"] = "none"
    grading_s: float = Field(0.0, ge=0, description="wall time of the run, seconds")


# --------------------------------------------------------------------------- the whole budget

_CHECK_TEXTS = ("message", "output", "call", "expected", "got", "hint", "title")


def _pieces(result: SubmissionResult) -> list[tuple[int, Any, str | tuple[str, int]]]:
    """(cost, owner, field) of every text and every check's evidence in `result`."""
    pieces: list[tuple[int, Any, str | tuple[str, int]]] = []
    for check in result.checks:
        for name in _CHECK_TEXTS:
            value = getattr(check, name)
            if value:
                pieces.append((text_cost(value), check, name))
        if check.evidence:
            pieces.append((_evidence_cost(check.evidence), check, "evidence"))
    for part in result.exercises:
        if part.output:
            pieces.append((text_cost(part.output), part, "output"))
        pieces += [(text_cost(note), part, ("notes", i)) for i, note in enumerate(part.notes)]
    pieces += [(text_cost(note), result, ("notes", i)) for i, note in enumerate(result.notes)]
    return pieces


def _evidence_cost(evidence: dict) -> int:
    try:
        return text_cost(json.dumps(evidence, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return len(str(evidence))


def fit_budget(result: SubmissionResult, budget: int) -> None:
    """Clip the longest texts of `result` (in place) until all its text costs at most `budget`
    (`text_cost`): every piece longer than a common cap is cut to that cap, shorter ones stay
    whole. Evidence over the cap is dropped whole (a picture of half a curve would mislead)."""
    pieces = _pieces(result)
    total = sum(cost for cost, _, _ in pieces)
    if total <= budget:
        return
    cap = _water_level(sorted(cost for cost, _, _ in pieces), budget)
    for cost, owner, name in pieces:
        if cost <= cap:
            continue
        if name == "evidence":
            owner.evidence = {"omitted": f"{cost:,} bytes of evidence, more than this "
                                         "result can keep"}
            continue
        field, index = name if isinstance(name, tuple) else (name, None)
        text = getattr(owner, field) if index is None else getattr(owner, field)[index]
        # The note costs its own bytes: they come out of the piece's share, not on top of it.
        reserve = text_cost(_omitted(len(text)))
        keep = max(int(len(text) * cap / cost) - reserve, 0)
        clipped = text[:keep] + _omitted(len(text) - keep)
        if index is None:
            setattr(owner, field, clipped)
        else:
            getattr(owner, field)[index] = clipped


def _omitted(count: int) -> str:
    return (f"\n[... {count:,} characters omitted: this result holds more text than a report "
            "can show ...]")


def _water_level(costs: list[int], budget: int) -> int:
    """The largest cap such that sum(min(cost, cap)) <= budget (`costs` sorted, rising)."""
    below = 0
    for i, cost in enumerate(costs):
        left = len(costs) - i
        if below + cost * left > budget:
            return max(math.floor((budget - below) / left), 0)
        below += cost
    return costs[-1] if costs else 0
