"""`torchgrade verify`: proof that a course's checks catch wrong code.

For each exercise, graded in the warm pool of `torchgrade grade` (`grader.running.pool`: a
fork server that imported torch and pytest once, `-j N` grading processes, each with one
pytest session and its own zygote):

1. the solution, three times: full marks every time, with identical verdicts;
2. the stub: score 0, every check that carries points failing with a message (a bug hunt's
   stub is its faulty script: it scores 0 on the checks of its seeded faults);
3. every declared mutant (`mutants/<exercise>/<name>.diff`, a patch of the solution, or
   `<name>.py`, a whole copy; a patch that no longer applies is a problem): it fails exactly
   the checks its line 1 names and its checks name every fault its line 2 names (a bug
   hunt's: no other); then every check of the exercise must be failed by some declared mutant;
4. hollow implementations (`grader.authoring.hollow`): for the targets of each check (module-
   level functions), the solution with those functions only raising ValueError,
   returning None, returning their first argument, or returning zeros shaped like their
   answer: every check (with points) whose targets are among them fails on each. One that
   passes is vacuous: it scores a side property (raises on bad input, leaves its input alone,
   returns a view, has the right shape) of code that does nothing;
5. generated mutants of the solution (`grader.authoring.mutation`): each graded; one that
   still scores full marks with every check passed is a survivor, listed with where and what
   changed, unless the course marks it equivalent (`[[equivalent]]` in course.toml:
   `exercise`, `change` = the change exactly as printed or the mutant's id, `reason`).

The exit code (`VerifyReport.exit_code`): 0 when 1-4 hold for every exercise; 1 otherwise;
with `strict`, survivors make it 1 too. Generated mutants are bounded: at most `max_mutants`
per exercise (the ones with the smallest ids, so the same set every run: ids change only when
their own code does) and a time `budget` for the whole run, shared out among the exercises
(what one leaves unused goes to the next); 1-4 always run to the end, whatever the budget.
"""

from __future__ import annotations

import ast
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from grader.authoring.hollow import HollowMutant, hollow, hollowable
from grader.authoring.mutation import GeneratedMutant, called_name, generate
from grader.course.knowledge import refuse_unknown_faults
from grader.course.folder import (Course, CourseError, DeclaredMutant, course_source,
                                  read_mutant)
from grader.errors import GraderUnavailable, UsageError
from grader.intake.assignment import from_exercises
from grader.models import CheckResult, CheckRun, SubmissionResult, is_grader_failure
from grader.running.pool import GradeTask, GradingSteps, PoolSettings

log = logging.getLogger("torchgrade")
SOLUTION_RUNS = 3


# --------------------------------------------------------------------------- the result


class WrongMutant(BaseModel):
    name: str
    must_fail: list[str] = Field(description="check ids its line 1 declares")
    failed: list[str] = Field(description="check ids it failed")
    diagnoses: list[str] = Field([], description="fault ids its line 2 declares")
    diagnosed: list[str] = Field([], description="fault ids its failing checks named")
    why: str


class DeclaredMutants(BaseModel):
    total: int = 0
    as_declared: int = 0
    wrong: list[WrongMutant] = []


class Survivor(BaseModel):
    where: str
    change: str
    id: str = ""
    operator: str = ""
    before: str = Field("", description="the original line")
    after: str = Field("", description="the same line in the mutant")


class EquivalentSurvivor(Survivor):
    reason: str = ""


class GeneratedMutants(BaseModel):
    total: int = Field(0, description="generated mutants graded")
    killed: int = 0
    survivors: list[Survivor] = []
    equivalent: list[EquivalentSurvivor] = Field([], description="survivors the course marks "
                                                 "equivalent (not counted as killed)")
    generated: int = Field(0, description="mutants the operators made (before the cap)")
    not_graded: int = Field(0, description="over --max-mutants, past --budget, or the grader "
                            "failed on them")
    unmatched_equivalent: list[str] = Field([], description="[[equivalent]] changes of this "
                                            "exercise that no surviving mutant has (with every "
                                            "mutant graded): stale marks to remove")


class VacuousCheck(BaseModel):
    check: str = Field(description="check id")
    functions: list[str] = Field(description="the hollowed functions")
    body: str = Field(description="what each of them did instead (a key of hollow.BODIES)")


class HollowImplementations(BaseModel):
    total: int = Field(0, description="hollow implementations graded")
    vacuous: list[VacuousCheck] = Field([], description="checks one of them passed")


class ExerciseVerdict(BaseModel):
    solution_full_marks: bool = False
    stub_scores_zero: bool = False
    declared_mutants: DeclaredMutants = DeclaredMutants()
    checks_never_failed: list[str] = []
    hollow: HollowImplementations = HollowImplementations()
    generated_mutants: GeneratedMutants = GeneratedMutants()
    problems: list[str] = Field([], description="why the exercise does not pass, one line each")
    seconds: float = 0.0

    @property
    def holds(self) -> bool:
        """Bullets 1-4 of the module docstring."""
        return (self.solution_full_marks and self.stub_scores_zero
                and not self.declared_mutants.wrong and not self.checks_never_failed
                and not self.hollow.vacuous and not self.problems)


class VerifyReport(BaseModel):
    ok: bool = True
    exercises: dict[str, ExerciseVerdict] = {}

    def exit_code(self) -> int:
        return 0 if self.ok else 1


# --------------------------------------------------------------------------- grading


@dataclass
class _Job:
    key: str                  # the submission's student id (unique in one exercise's run)
    kind: str                 # "solution", "stub", "declared", "hollow", "generated"
    text: str
    ref: object = None        # DeclaredMutant | HollowMutant | GeneratedMutant

    @property
    def essential(self) -> bool:
        return self.kind != "generated"


class _BudgetSpent(Exception):
    pass


def read_task(task: GradeTask, settings: PoolSettings):
    """GradingSteps.read: the job's folder, loaded in the grading process."""
    from grader.intake.submission import load_quietly

    assert task.path is not None
    return load_quietly(task.path, task.student, settings.exercises)


def finish_task(outcome: CheckRun | BaseException, task: GradeTask, settings: PoolSettings
                ) -> SubmissionResult:
    """GradingSteps.finish: scored, nothing written (verify keeps no per-mutant files)."""
    from grader.scoring.results import grader_failure, result_of

    try:
        if isinstance(outcome, BaseException):
            return grader_failure(task.student, type(outcome).__name__)
        return result_of(outcome, assignment=settings.assignment)
    except Exception as exc:  # noqa: BLE001 - one mutant, never the run
        log.exception("torchgrade: scoring %s failed", task.student)
        return grader_failure(task.student, f"{type(exc).__name__}: {exc}"[:200])


def fail_task(task: GradeTask, reason: str, settings: PoolSettings) -> SubmissionResult:
    from grader.scoring.results import grader_failure

    return grader_failure(task.student, reason[:200])


STEPS = GradingSteps(read=read_task, finish=finish_task, fail=fail_task)


def _grade(course: Course, exercise: str, jobs: list[_Job], *, workers: int, scratch: Path,
           deadline: float | None) -> dict[str, SubmissionResult]:
    """Each job's result by key; generated jobs still waiting at `deadline` are not graded
    (the essential ones always are)."""
    from grader.running.pool import PoolBroken, grade_in_pool

    subs, out = scratch / exercise / "subs", scratch / exercise / "out"
    out.mkdir(parents=True, exist_ok=True)
    tasks = []
    for job in jobs:
        path = subs / job.key / course.student_file(exercise)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(job.text, encoding="utf-8")
        tasks.append(GradeTask(student=job.key, path=subs / job.key))
    essential = {j.key for j in jobs if j.essential}
    results: dict[str, SubmissionResult] = {}

    def collect(result: SubmissionResult) -> None:
        results[result.student] = result
        if deadline is not None and time.monotonic() > deadline and essential <= set(results):
            raise _BudgetSpent

    settings = PoolSettings(out=out, exercises=[exercise], assignment=from_exercises([exercise]),
                            submissions=subs, course=course.root)
    try:
        grade_in_pool(tasks, settings=settings, steps=STEPS, jobs=max(1, min(workers, len(tasks))),
                      on_result=collect)
    except _BudgetSpent:
        pass
    except PoolBroken as exc:
        raise GraderUnavailable(str(exc)) from None
    finally:
        shutil.rmtree(scratch / exercise, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- verdicts


def not_passed(result: SubmissionResult) -> set[str]:
    return {c.id for c in result.checks if c.status != "passed"}


def _check_trees(course: Course, exercise: str) -> Iterator[ast.Module]:
    """The parsed check files of `exercise` (one that cannot be read or parsed is skipped:
    grading it says why)."""
    for path in course.check_files([exercise]):
        try:
            yield ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue


def declared_checks(course: Course, exercise: str) -> set[str]:
    """Ids of every check the exercise's check files define (top-level `test_*` functions)."""
    found = set()
    for tree in _check_trees(course, exercise):
        found |= {f"{exercise}.{fn.name.removeprefix('test_')}" for fn in tree.body
                  if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_")}
    return found


def check_targets(course: Course, exercise: str) -> list[frozenset[str] | None]:
    """The `targets=` of every `@check(...)` in the exercise's check files: the names, where
    it is a literal (a name or a list of names), else None."""
    found = []
    for tree in _check_trees(course, exercise):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and called_name(node.func) == "check"):
                continue
            for kw in node.keywords:
                if kw.arg != "targets":
                    continue
                try:
                    value = ast.literal_eval(kw.value)
                except ValueError:
                    value = None
                names = [value] if isinstance(value, str) else value
                literal = isinstance(names, list | tuple) and all(isinstance(n, str)
                                                                  for n in names)
                found.append(frozenset(names) if literal else None)
    return found


def _solution_verdict(runs: list[SubmissionResult | None], verdict: ExerciseVerdict) -> None:
    graded = [r for r in runs if r is not None and not is_grader_failure(r)]
    if len(graded) < len(runs):
        verdict.problems.append("the solution could not be graded (the grader failed)")
        return
    bad = sorted(set().union(*(not_passed(r) for r in graded)))
    same = len({tuple((c.id, c.status) for c in r.checks) for r in graded}) == 1
    full = all(r.max_score > 0 and r.score == r.max_score for r in graded)
    verdict.solution_full_marks = full and not bad and same
    if bad:
        # each with what it said (the first run's), so that the author need not grade the
        # solution again to learn why
        said = {c.id: c for r in reversed(graded) for c in r.checks if c.id in bad}
        verdict.problems += [f"the solution fails {c}: {_first_line(said[c])}" for c in bad]
    elif not full:
        verdict.problems.append("the solution does not score full marks (no checks, or no "
                                "points)")
    elif not same:
        verdict.problems.append(f"the solution's verdicts differ between its {len(runs)} runs")


def _first_line(check: CheckResult, limit: int = 300) -> str:
    """A check's verdict in one line: its status and the first line of its message."""
    line = (check.message.strip().splitlines() or [""])[0]
    line = line if len(line) <= limit else line[:limit - 1] + "…"
    return f"{check.status}: {line}" if line else check.status


def _stub_verdict(result: SubmissionResult | None, verdict: ExerciseVerdict) -> None:
    """Score 0, and every check that carries points did not pass and says why. (A bug hunt's
    results hold only its scored checks: those of the faults its stub holds.)"""
    if result is None or is_grader_failure(result):
        verdict.problems.append("the stub could not be graded (the grader failed)")
        return
    silent = sorted(c.id for c in result.checks
                    if c.max_points > 0 and (c.status == "passed" or not c.message.strip()))
    verdict.stub_scores_zero = (result.score == 0 and result.max_score > 0 and not silent)
    if result.score != 0:
        verdict.problems.append(f"the stub scores {result.score:g}, not 0")
    if silent:
        verdict.problems.append(f"on the stub, {', '.join(silent)} "
                                f"{'passes or fails' if len(silent) == 1 else 'pass or fail'} "
                                "without a message")


def _declared_verdict(mutants: list[DeclaredMutant], results: dict[str, SubmissionResult],
                      checks: set[str], bughunt: bool, verdict: ExerciseVerdict) -> set[str]:
    """Fills `declared_mutants`; returns every check some declared mutant failed."""
    caught: set[str] = set()
    report = verdict.declared_mutants
    report.total = len(mutants)
    for m in mutants:
        result = results.get(f"declared-{m.name}")
        if result is None or is_grader_failure(result):
            report.wrong.append(WrongMutant(name=m.name, must_fail=sorted(m.fails), failed=[],
                                            diagnoses=sorted(m.diagnoses),
                                            why="the grader failed on it"))
            continue
        failed = not_passed(result)
        caught |= failed
        named = {d for c in result.checks if c.status != "passed" for d in c.diagnoses}
        why = []
        unknown = sorted(m.fails - checks)
        if unknown:
            why.append(f"declares checks that do not exist: {', '.join(unknown)}")
        if failed - m.fails:
            why.append(f"also fails {', '.join(sorted(failed - m.fails))}")
        if m.fails - failed - set(unknown):
            why.append(f"passes {', '.join(sorted(m.fails - failed - set(unknown)))}")
        if not m.diagnoses <= named:
            why.append(f"is not diagnosed as {', '.join(sorted(m.diagnoses - named))}")
        elif bughunt and named != m.diagnoses:  # one fault each: nothing else named
            why.append(f"is also diagnosed as {', '.join(sorted(named - m.diagnoses))}")
        if why:
            report.wrong.append(WrongMutant(name=m.name, must_fail=sorted(m.fails),
                                            failed=sorted(failed), diagnoses=sorted(m.diagnoses),
                                            diagnosed=sorted(named), why="; ".join(why)))
        else:
            report.as_declared += 1
    return caught


def hollow_jobs(solution: str, targets: list[frozenset[str] | None]) -> list[_Job]:
    """One job per hollow implementation of `solution`: for each set of `targets` that are all
    module-level functions of it (a class is not hollowed; a set some check's targets are not
    among would verify nothing). A target not known before grading (None) adds every public
    function alone."""
    functions = hollowable(solution)
    chosen = {t for t in targets if t and t <= functions}
    if None in targets:
        chosen |= {frozenset([f]) for f in functions if not f.startswith("_")}
    sets = sorted(chosen, key=sorted)
    return [_Job(f"hollow-{i}", "hollow", m.source, m)
            for i, m in enumerate(m for t in sets for m in hollow(solution, t))]


def _hollow_verdict(jobs: list[_Job], results: dict[str, SubmissionResult],
                    verdict: ExerciseVerdict) -> None:
    report = verdict.hollow
    for job in jobs:
        assert isinstance(job.ref, HollowMutant)
        result = results.get(job.key)
        if result is None or is_grader_failure(result):
            verdict.problems.append(f"a hollow implementation ({job.ref.name}) could not be "
                                    "graded (the grader failed)")
            continue
        report.total += 1
        report.vacuous += [
            VacuousCheck(check=c.id, functions=list(job.ref.functions), body=job.ref.body)
            for c in result.checks if c.status == "passed" and c.max_points > 0
            and set(c.targets) <= set(job.ref.functions)]


def _generated_verdict(course: Course, exercise: str, chosen: list[GeneratedMutant],
                       results: dict[str, SubmissionResult], verdict: ExerciseVerdict) -> None:
    report = verdict.generated_mutants
    marks: dict[str, str] = {}
    for e in course.equivalent:
        if e.exercise == exercise:
            marks.setdefault(e.change, e.reason)
    used: set[str] = set()
    for m in sorted(chosen, key=lambda m: (m.line, m.where, m.change)):
        result = results.get(f"generated-{m.id}")
        if result is None or is_grader_failure(result):
            report.not_graded += 1
            continue
        report.total += 1
        # Killed: a check caught it (a bug hunt's visible checks carry 0 points: one failing
        # catches the mutant without costing marks).
        if result.score < result.max_score or not_passed(result):
            report.killed += 1
            continue
        fields = dict(where=m.where, change=m.change, id=m.id, operator=m.operator,
                      before=m.before, after=m.after)
        reason = marks.get(m.change, marks.get(m.id))
        used |= {m.change, m.id}
        if reason is not None:
            report.equivalent.append(EquivalentSurvivor(**fields, reason=reason))
        else:
            report.survivors.append(Survivor(**fields))
    if not report.not_graded and len(chosen) == verdict.generated_mutants.generated:
        report.unmatched_equivalent = sorted(set(marks) - used)


def choose(mutants: list[GeneratedMutant], cap: int | None) -> list[GeneratedMutant]:
    """At most `cap` mutants: those with the smallest ids (a hash: an even spread over the
    file and the operators, and the same set every run), in id order (a budget cut leaves an
    even sample too)."""
    ordered = sorted(mutants, key=lambda m: m.id)
    return ordered if cap is None else ordered[:cap]


# --------------------------------------------------------------------------- the command


def verify_exercise(course: Course, exercise: str, *, workers: int, scratch: Path,
                    deadline: float | None, max_mutants: int | None) -> ExerciseVerdict:
    started = time.monotonic()
    verdict = ExerciseVerdict()
    bughunt = exercise.startswith("bughunt_")
    solution = course.solution(exercise).read_text(encoding="utf-8")
    stub = course.stub(exercise).read_text(encoding="utf-8")
    mutants = []
    try:
        files = course.mutant_files(exercise)
    except CourseError as exc:  # a name given twice
        files = []
        verdict.problems.append(f"declared mutants: {exc}")
    for path in files:  # a broken one (a patch that no longer applies) is a problem; the rest run
        try:
            mutants.append(read_mutant(exercise, path, course.solution(exercise)))
        except CourseError as exc:
            verdict.problems.append(f"declared mutant: {exc}")
    jobs = [_Job(f"solution-{i + 1}", "solution", solution) for i in range(SOLUTION_RUNS)]
    jobs.append(_Job("stub", "stub", stub))
    jobs += [_Job(f"declared-{m.name}", "declared", m.source(), m) for m in mutants]
    hollows = hollow_jobs(solution, check_targets(course, exercise))
    jobs += hollows
    generated = generate(solution, filename=f"solutions/{course.student_file(exercise)}")
    chosen = choose(generated, max_mutants)
    if deadline is None or time.monotonic() < deadline:
        jobs += [_Job(f"generated-{m.id}", "generated", m.source, m) for m in chosen]
    results = _grade(course, exercise, jobs, workers=workers, scratch=scratch, deadline=deadline)
    _solution_verdict([results.get(f"solution-{i + 1}") for i in range(SOLUTION_RUNS)], verdict)
    _stub_verdict(results.get("stub"), verdict)
    checks = declared_checks(course, exercise) | {
        c.id for r in results.values() for c in r.checks if r.student.startswith("solution-")}
    caught = _declared_verdict(mutants, results, checks, bughunt, verdict)
    verdict.checks_never_failed = sorted(checks - caught)
    _hollow_verdict(hollows, results, verdict)
    verdict.generated_mutants.generated = len(generated)
    _generated_verdict(course, exercise, chosen, results, verdict)
    verdict.generated_mutants.not_graded += len(generated) - len(chosen)
    verdict.seconds = round(time.monotonic() - started, 1)
    return verdict


def validate(course: Course, exercises: list[str] | None, *, budget: float | None = None,
             max_mutants: int | None = None) -> list[str]:
    """The exercises to verify (default: all, in the course's order). Raises UsageError for
    an exercise the course does not have, or whose solution or stub is missing or not readable
    UTF-8 Python, for a diagnosis rule of a fault the course does not catalogue, and for a
    budget or cap that makes no sense."""
    names = list(exercises or course.exercises)
    unknown = [e for e in names if e not in course.exercises]
    if unknown:
        raise UsageError(f"{', '.join(unknown)}: not an exercise of the course {course.name!r} "
                         f"(it has {', '.join(course.exercises) or 'none'})")
    for e in names:
        for what, path in (("solution", course.solution(e)), ("stub", course.stub(e))):
            if not path.is_file():
                raise CourseError(f"{e}: its {what} {path} is missing")
            course_source(path)  # readable UTF-8 Python, or one line naming it
    refuse_unknown_faults(course)
    if budget is not None and budget <= 0:
        raise UsageError("--budget must be a positive number of seconds")
    if max_mutants is not None and max_mutants < 0:
        raise UsageError("--max-mutants must be 0 or more")
    return names


def verify(course: Course, exercises: list[str] | None = None, *, budget: float | None = None,
           max_mutants: int | None = None, jobs: int | None = None, strict: bool = False,
           on_exercise: Callable[[str, ExerciseVerdict], None] | None = None) -> VerifyReport:
    """Verify `exercises` of `course` (default: all, in the course's order); see the module
    docstring. Raises UsageError for an exercise the course does not have, or whose solution
    or stub is missing."""
    names = validate(course, exercises, budget=budget, max_mutants=max_mutants)
    workers = min(jobs or len(os.sched_getaffinity(0)), 64)
    report = VerifyReport()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torchgrade-verify-") as tmp:
        for i, exercise in enumerate(names):
            deadline = None
            if budget is not None:  # what is left, shared among the exercises left
                left = budget - (time.monotonic() - started)
                deadline = time.monotonic() + max(left, 0.0) / (len(names) - i)
            verdict = verify_exercise(course, exercise, workers=workers, scratch=Path(tmp),
                                      deadline=deadline, max_mutants=max_mutants)
            report.exercises[exercise] = verdict
            if on_exercise is not None:
                on_exercise(exercise, verdict)
    report.ok = all(v.holds for v in report.exercises.values()) and not (
        strict and any(v.generated_mutants.survivors for v in report.exercises.values()))
    return report


# --------------------------------------------------------------------------- what is shown


def summary_lines(exercise: str, v: ExerciseVerdict) -> list[str]:
    """The terminal summary of one exercise: a verdict line, then one line per problem and per
    survivor."""
    d, g = v.declared_mutants, v.generated_mutants
    head = (f"{exercise}: {'ok' if v.holds else 'FAILS'} - solution "
            f"{'full marks x3' if v.solution_full_marks else 'NOT full marks'}, stub "
            f"{'scores 0' if v.stub_scores_zero else 'does NOT score 0'}, declared mutants "
            f"{d.as_declared}/{d.total} as declared, hollow implementations {v.hollow.total} "
            f"({_count(len({c.check for c in v.hollow.vacuous}), 'vacuous check')}), "
            f"generated mutants {g.killed}/{g.total} "
            f"killed ({len(g.survivors)} survivor{'' if len(g.survivors) == 1 else 's'}"
            + (f", {len(g.equivalent)} equivalent" if g.equivalent else "")
            + (f", {g.not_graded} of {g.generated} not graded" if g.not_graded else "")
            + f") in {v.seconds:g} s")
    lines = [head]
    lines += [f"  problem: {p}" for p in v.problems]
    lines += [f"  wrong mutant {w.name}: {w.why}" for w in d.wrong]
    if v.checks_never_failed:
        lines.append(f"  failed by no declared mutant: {', '.join(v.checks_never_failed)}")
    lines += [f"  vacuous check {c.check}: passes when {', '.join(c.functions)} "
              f"{'does' if len(c.functions) == 1 else 'do'} nothing but {c.body}: make it ask "
              "for the behaviour too (the result of a valid call, beside the property)"
              for c in v.hollow.vacuous]
    lines += [f"  survivor {s.where}: {s.change}  [{s.id}]" for s in g.survivors]
    lines += [f"  note: [[equivalent]] {c!r} matches no surviving mutant (stale?)"
              for c in g.unmatched_equivalent]
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def verdict_line(report: VerifyReport, *, strict: bool) -> str:
    """The last line: the exit code and how it was decided."""
    survivors = sum(len(v.generated_mutants.survivors) for v in report.exercises.values())
    rule = ("exit 0 needs, for every exercise: the solution at full marks 3 times with the same "
            "verdicts, the stub at 0 with a message on every check, each declared mutant "
            "failing exactly its declared checks (and naming its diagnoses), every check "
            "failed by some declared mutant, no check passing for a hollow implementation of "
            "its targets")
    rule += ("; --strict: and no survivor" if strict
             else "; survivors are reported, not fatal (--strict makes them fatal)")
    failing = [e for e, v in report.exercises.items() if not v.holds]
    why = (f"FAILED: {', '.join(failing)}" if failing
           else f"FAILED: {survivors} survivor(s) under --strict" if not report.ok else "OK")
    return f"verify {why} (exit {report.exit_code()}). {rule}."


def render_survivors(report: VerifyReport, *, course_name: str) -> str:
    """The HTML page of survivors (templates/verify.html.j2)."""
    import grader
    from grader.outputs.report import environment

    return environment().get_template("verify.html.j2").render(
        report=report, course=course_name, version=grader.__version__)
