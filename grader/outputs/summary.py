"""The class at a glance: what `OUT/index.html` shows, computed from the submissions' results.

Pure functions of `SubmissionResult`s; `grader.outputs.report.render_index` renders the
`ClassSummary`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from pydantic import BaseModel, Field

import grader
from grader.checking.loading import load_state
from grader.models import (NOT_STARTED, CheckResult, EarlierGrade, ExerciseResult,
                           SubmissionResult, Visibility, state_of)
from grader.outputs.exports import Remark, remark_list, remarks
from grader.outputs.outcomes import OUTCOMES

HISTOGRAM_BINS = 10
DIAGNOSIS_EXAMPLES = 5  # students named (and linked) per diagnosis in the index
# Below this percent of the maximum a graded student is flagged in the index as needing help.
HELP_BELOW = 50.0
# Exercise states that say the student needs help (besides a low score), with the words the
# index's status column shows for them, most serious first.
HELP_STATES = {"not handed in": "not handed in", "syntax error": "does not load",
               "does not import": "does not load", "not started": "not started",
               "crashed": "crashed", "timed out": "timed out"}
# The remarks (`exports.Remark.kind`) a flag of these labels says already: left out beside it
# (a not-loaded file's error goes into the flag's tooltip).
SAYS = {"does not load": ["not_loaded"], "not handed in": ["missing"]}
# The same states in a word or two, for the index's narrow per-exercise cells (the full words
# in a tooltip).
SHORT_STATES = {"not handed in": "missing", "syntax error": "syntax",
                "does not import": "no import", "not started": "stub", "timed out": "timeout"}


class ExerciseCell(BaseModel):
    score: float | None = Field(None, description="None: the exercise was not graded")
    max_score: float = 0.0
    state: str = Field("", description="graded, not handed in, syntax error, does not import, "
                       "not started, crashed or timed out (`exercise_state`)")


class HelpReason(BaseModel):
    label: str = Field(description="a few words: 'not handed in', 'below 50%'")
    detail: str = Field("", description="the longer story, for a tooltip")
    low_score: bool = Field(False, description="only the score is low: the index shows it "
                            "beside another reason by the score's own colour, not in words")
    says: list[str] = Field([], description="the kinds of remark (`exports.Remark.kind`) this "
                            "reason already says, left out of the remarks shown beside it")


class StudentRow(BaseModel):
    student: str
    name: str = Field("", description="the roster's name of the student, when there is one")
    exercises: list[ExerciseCell]
    score: float
    max_score: float
    late_penalty: float = 0.0
    final: float = Field(description="score after the late penalty, never below 0")
    percent: float
    not_passed: int = Field(description="checks not passed")
    broken: int = Field(description="checks whose code raised (not counting code not "
                        "implemented yet), timed out or crashed")
    grader_failure: bool = False
    replaced: EarlierGrade | None = Field(None, description="the grade this one replaced")
    notes: list[str] = []
    remarks: str = Field("", description="nothing handed in, a file not loaded, not in the "
                         "roster, extension, lateness, the instructor's adjustments "
                         "(`exports.remarks`)")
    remark_list: list[Remark] = Field([], description="the same remarks, each with its kind")
    help: list[HelpReason] = Field([], description="why this student needs help, most serious "
                                   "first (empty: no sign of it); `help_reasons`")

    @property
    def flags(self) -> list[HelpReason]:
        """The reasons the status column names: a low score is said in words when it is the
        only one (else the percent's colour says it)."""
        return [r for r in self.help if not r.low_score] or self.help

    @property
    def shown_remarks(self) -> str:
        """The remarks but those a flag of `help` already says (nothing handed in, a file
        that does not load: its error is that flag's tooltip)."""
        said = {kind for reason in self.help for kind in reason.says}
        return "; ".join(r.text for r in self.remark_list if r.kind not in said)

    @property
    def help_rank(self) -> float:
        """Sort key of the index's status column: grader failures, then who needs help, then
        the rest, then full marks; lowest score first within each."""
        group = (0 if self.grader_failure else 1 if self.help
                 else 3 if self.max_score > 0 and self.final == self.max_score else 2)
        return group * 1000 + self.percent



class HistogramBin(BaseModel):
    low: float = Field(description="percent of the maximum, inclusive")
    high: float = Field(description="percent, exclusive (the last bin includes 100)")
    count: int


class CheckStat(BaseModel):
    id: str
    exercise: str
    title: str
    visibility: Visibility
    max_points: float
    passed: int
    graded: int
    broken: int = Field(0, description="submissions whose check raised, timed out or crashed")
    diagnoses: list[str] = Field([], description="fault ids seen on this check, most frequent "
                                 "first (at most three)")

    @property
    def rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


class DiagnosisStat(BaseModel):
    diagnosis: str
    count: int = Field(description="checks (over all students) that carried it")
    students: int
    checks: list[str]
    examples: list[str] = Field([], description="a few of the students, for links")


class ExerciseStat(BaseModel):
    exercise: str
    graded: int = Field(description="submissions with this exercise graded")
    mean_percent: float | None = None
    full_marks: int = 0


class ClassSummary(BaseModel):
    title: str
    assignment: str = ""
    generated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    grader_version: str = grader.__version__
    exercises: list[str]
    rows: list[StudentRow]
    histogram: list[HistogramBin]
    mean_percent: float | None = None
    median_percent: float | None = None
    full_marks: int = 0
    grader_failures: int = 0
    checks: list[CheckStat]
    diagnoses: list[DiagnosisStat]
    exercise_stats: list[ExerciseStat] = []
    needs_help: int = Field(0, description="students with a reason to need help")
    help_below: float = HELP_BELOW
    not_graded: list[str] = []  # a run stopped before grading them: the index is incomplete


def is_grader_failure(result: SubmissionResult) -> bool:
    """A result with no checks at all: the grader could not grade that submission (a graded
    submission always has every check of its exercises, even for a file not submitted)."""
    return not result.checks


def is_broken(check: CheckResult) -> bool:
    """The student's code raised, timed out or crashed; work not started (a stub not
    implemented yet, a file not submitted, a function not defined) is no such error."""
    return OUTCOMES[state_of(check)].broken and check.reason not in NOT_STARTED




def exercise_state(result: SubmissionResult, part: ExerciseResult) -> str:
    """What happened to one exercise, in words: "not handed in" (no file), "syntax error" (it
    does not compile), "does not import" (its top level raised: every check says so, and
    "crashed" sent instructors looking for a crash), "not started" (every check met code not
    implemented yet), "crashed"
    (a check crashed, or every check's call raised), "timed out" (a check ran out of time:
    code far too slow or looping, which a crash tag sent instructors looking for the wrong
    thing), else "graded"."""
    checks = [c for c in result.checks if c.exercise == part.exercise]
    if part.path is None or any(c.reason == "not_submitted" for c in checks):
        return "not handed in"
    load = load_state(part.notes, checks)
    if load == "syntax_error":
        return "syntax error"
    if load == "import_failed":
        return "does not import"
    if checks and all(state_of(c) == "todo" for c in checks):
        return "not started"
    if any(c.status == "crashed" for c in checks) or (
            checks and all(c.status == "error" and state_of(c) != "todo" for c in checks)):
        return "crashed"
    if any(c.status == "timeout" for c in checks):
        return "timed out"
    return "graded"


def percent_of(result: SubmissionResult) -> float:
    """The final score as a percent of the maximum, unrounded: class statistics are taken
    from these (a median of rounded percents can differ from the rounded median)."""
    return 100 * result.final_score / result.max_score if result.max_score else 0.0


def student_row(result: SubmissionResult, exercises: list[str]) -> StudentRow:
    per = {e.exercise: e for e in result.exercises}
    final = result.final_score
    return StudentRow(
        student=result.student, remarks=remarks(result), remark_list=remark_list(result),
        exercises=[ExerciseCell(score=per[e].score, max_score=per[e].max_score,
                                state=exercise_state(result, per[e])) if e in per
                   else ExerciseCell() for e in exercises],
        score=result.score, max_score=result.max_score, late_penalty=result.late_penalty,
        final=round(final, 6),
        percent=round(percent_of(result), 2),
        not_passed=sum(c.status != "passed" for c in result.checks),
        broken=sum(is_broken(c) for c in result.checks),
        grader_failure=is_grader_failure(result), replaced=result.replaced,
        notes=list(result.notes))


def help_reasons(row: StudentRow, exercises: list[str],
                 below: float = HELP_BELOW) -> list[HelpReason]:
    """Why a student needs help, in a few words each, most serious first: the grader could
    not grade the submission, nothing (or an exercise) handed in, code that does not load, is
    not started, crashed or timed out, a score below `below` percent."""
    if row.grader_failure:
        return [HelpReason(label="not graded", detail=" ".join(row.notes)
                           or "the grader failed: run torchgrade grade again")]
    out: list[HelpReason] = []
    states = [(e, c.state) for e, c in zip(exercises, row.exercises)]
    nothing = bool(states) and all(state == "not handed in" for _, state in states)
    if nothing:
        out.append(HelpReason(label="nothing handed in", says=["nothing_handed_in"]))
    else:
        for state, label in HELP_STATES.items():
            which = [e for e, s in states if s == state]
            if which and label not in [r.label for r in out]:
                out.append(HelpReason(label=label, detail=f"{state}: {', '.join(which)}",
                                      says=SAYS.get(label, [])))
            elif which:
                first = next(r for r in out if r.label == label)
                first.detail += f"; {state}: {', '.join(which)}"
    if row.max_score > 0 and row.percent < below and not nothing:
        out.append(HelpReason(label=f"below {below:g}%", low_score=True,
                              detail=f"{row.percent:g}% of the maximum"))
    for reason in out:  # the remarks a flag stands for (left out beside it) go in its tooltip
        said = [r.text for r in row.remark_list if r.kind in reason.says
                and r.kind != "nothing_handed_in"]
        if said:
            reason.detail = "; ".join([reason.detail, *said] if reason.detail else said)
    return out


def histogram(percents: list[float], bins: int = HISTOGRAM_BINS) -> list[HistogramBin]:
    width = 100 / bins
    counts = [0] * bins
    for p in percents:
        counts[min(int(p // width), bins - 1) if p >= 0 else 0] += 1
    return [HistogramBin(low=round(i * width, 2), high=round((i + 1) * width, 2), count=n)
            for i, n in enumerate(counts)]


def check_stats(results: list[SubmissionResult]) -> list[CheckStat]:
    """Pass counts of every check, in the order checks ran (curriculum order)."""
    stats: dict[str, CheckStat] = {}
    seen: dict[str, Counter[str]] = {}
    for result in results:
        for c in result.checks:
            stat = stats.get(c.id)
            if stat is None:
                stat = stats[c.id] = CheckStat(id=c.id, exercise=c.exercise, title=c.title or c.id,
                                               visibility=c.visibility, max_points=c.max_points,
                                               passed=0, graded=0)
            stat.graded += 1
            stat.passed += c.status == "passed"
            stat.broken += is_broken(c)
            seen.setdefault(c.id, Counter()).update(dict.fromkeys(c.diagnoses, 1))
    for check_id, stat in stats.items():
        stat.diagnoses = [d for d, _ in seen[check_id].most_common(3)]
    return list(stats.values())


def exercise_stats(rows: list[StudentRow], exercises: list[str]) -> list[ExerciseStat]:
    """Mean score (percent of the exercise's maximum) and full marks, per exercise."""
    out = []
    for i, exercise in enumerate(exercises):
        cells = [r.exercises[i] for r in rows if not r.grader_failure
                 and r.exercises[i].score is not None and r.exercises[i].max_score > 0]
        percents = [100 * c.score / c.max_score for c in cells if c.score is not None]
        out.append(ExerciseStat(
            exercise=exercise, graded=len(cells),
            mean_percent=round(statistics.fmean(percents), 2) if percents else None,
            full_marks=sum(c.score == c.max_score for c in cells)))
    return out


def diagnosis_stats(results: list[SubmissionResult]) -> list[DiagnosisStat]:
    """Every diagnosis seen in the class, most frequent first, with the checks that carried
    them. All of them: the catalogue is a few dozen faults, and the check table links to each."""
    count: Counter[str] = Counter()
    students: dict[str, set[str]] = {}
    checks: dict[str, list[str]] = {}
    for result in results:
        for c in result.checks:
            for d in c.diagnoses:
                count[d] += 1
                students.setdefault(d, set()).add(result.student)
                if c.id not in checks.setdefault(d, []):
                    checks[d].append(c.id)
    return [DiagnosisStat(diagnosis=d, count=n, students=len(students[d]), checks=checks[d],
                          examples=sorted(students[d])[:DIAGNOSIS_EXAMPLES])
            for d, n in count.most_common()]


def summarize(results: list[SubmissionResult], exercises: list[str], *,
              title: str = "torchgrade results", assignment: str = "",
              names: Mapping[str, str] | None = None, not_graded: Sequence[str] = ()
              ) -> ClassSummary:
    results = sorted(results, key=lambda r: r.student)
    rows = [student_row(r, exercises) for r in results]
    for row in rows:
        row.name = (names or {}).get(row.student, "")
        row.help = help_reasons(row, exercises)
    graded = [row for row in rows if not row.grader_failure]
    percents = [percent_of(r) for r, row in zip(results, rows) if not row.grader_failure]
    # Who needs help first (the index's default order), the lowest score first.
    rows.sort(key=lambda row: (row.help_rank, row.student))
    return ClassSummary(
        title=title, assignment=assignment, exercises=exercises, rows=rows,
        histogram=histogram(percents),
        mean_percent=round(statistics.fmean(percents), 2) if percents else None,
        median_percent=round(statistics.median(percents), 2) if percents else None,
        # The grade's, as the mean and median: work cut by a late penalty has not full marks.
        full_marks=sum(r.max_score > 0 and r.final_score == r.max_score for r in results),
        grader_failures=len(rows) - len(graded),
        checks=check_stats(results), diagnoses=diagnosis_stats(results),
        exercise_stats=exercise_stats(rows, exercises), not_graded=sorted(not_graded),
        needs_help=sum(bool(row.help) for row in rows))
