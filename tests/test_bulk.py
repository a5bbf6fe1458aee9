"""Bulk grading (issue 5): one pytest session per grading process gives the same verdicts as a
fresh session; a pool of processes grades a class; assignments, resumption, kill -9 and Ctrl-C,
a grading process that dies, the class index, the CSV gradebook and the progress display."""

from __future__ import annotations

import csv
import shutil
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import EXERCISES, REPO, SOLUTIONS
from grader.intake.assignment import Assignment, AssignmentError, load_assignment, parse_timestamp
from grader.scoring.assignment import apply_assignment, late_penalty
from grader.running.batch import call_directly as _call_directly, grade_batch
from grader.scoring.results import result_of
from grader.outputs.writing import read_json
from grader.models import CheckResult, ExerciseResult, SubmissionResult
from grader.outputs.progress import Progress
from grader.outputs.report import render_index
from conftest import run_and_score
from grader.intake.submission import load_submission
from mutants import mutants_of

EXERCISE = "strides_broadcasting"
SOLUTION = (SOLUTIONS / f"{EXERCISE}.py").read_text()
STUB = (EXERCISES / f"{EXERCISE}.py").read_text()
MUTANTS = {m.name: m for m in mutants_of(EXERCISE)}


def torchgrade(*args, timeout=600, **kwargs):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def mutant(name: str) -> str:
    return MUTANTS[name].source()


def write_class(root: Path, sources: dict[str, str | None]) -> Path:
    """One folder per student holding strides_broadcasting.py (None: an empty folder)."""
    for student, source in sources.items():
        folder = root / student
        folder.mkdir(parents=True)
        if source is not None:
            (folder / f"{EXERCISE}.py").write_text(source)
    return root


def comparable(result: SubmissionResult) -> dict:
    """What must be identical between two gradings of the same files: everything but times."""
    data = result.model_dump(mode="json", exclude={"graded_at", "grading_s", "checks_s"})
    for check in data["checks"]:
        check.pop("duration_s")
        check.pop("stopped_at")  # where a timed-out call was: a sample, like its duration
    return data


# --------------------------------------------------------------------------- one session, many


def test_one_session_grades_like_fresh_sessions(tmp_path, zygote):
    # (No mutant whose verdict depends on the machine's load, like a Python loop near its
    # deadline: that would differ between any two runs.)
    sources = {"solution": SOLUTION, "stub": STUB, "missing": None, "syntax": "def c_strides(:\n",
               "loop": SOLUTION + "\ndef broadcast_shape(*shapes):\n"
                                  "    while True:\n        pass\n",
               **{name: mutant(name) for name in ("center_columns_in_place",
                                                  "sliding_windows_writeable",
                                                  "pairwise_missing_factor_two",
                                                  "to_tensor_always_copies")}}
    write_class(tmp_path, sources)
    subs = [load_submission(tmp_path / s, exercises=[EXERCISE], student=s) for s in sources]
    batch: dict[str, SubmissionResult] = {}
    graded = grade_batch(iter(subs),
                         lambda sub, run: batch.__setitem__(sub.student, result_of(run)),
                         exercises=[EXERCISE], limits=None, zygote=zygote)
    assert graded == len(sources)
    for sub in subs:
        fresh = run_and_score(sub, exercises=[EXERCISE], zygote=zygote)
        assert comparable(batch[sub.student]) == comparable(fresh), sub.student
        assert batch[sub.student].grading_s > 0
    assert batch["solution"].score == batch["solution"].max_score > 0
    assert batch["missing"].exercises[0].notes[0].startswith("file not submitted")
    assert {c.status for c in batch["loop"].checks} >= {"timeout", "passed"}


# Added to a new exercise's course: each forces pytest's own protocol for every check.
PROTOCOL_NEEDED = {
    "a conftest fixture": ("conftest.py", "import pytest\n@pytest.fixture\ndef factor():\n"
                           "    return 3.0\n", "sub, factor"),
    "a runtest hook": ("conftest.py", "def pytest_runtest_setup(item):\n    pass\n", "sub"),
    "pytest's tmp_path": (None, None, "sub, tmp_path"),
}


@pytest.mark.parametrize("why", [None, *PROTOCOL_NEEDED])
def test_checks_are_called_directly_unless_the_course_hooks_into_pytest(tmp_path, zygote,
                                                                        monkeypatch, why):
    """A check that asks pytest only for `sub`, `evidence` and its parameters is called without
    pytest's per-check protocol (~0.4 ms each); a course that adds a fixture, a runtest hook or
    asks for pytest's own fixtures gets the protocol, and the same verdicts either way."""
    from grader.authoring.scaffold import new_exercise
    from grader.course.folder import load_course, use_course
    from grader.running import batch

    course_dir = tmp_path / "course"
    new_exercise("scale_it", course_dir)
    # pytest imports a course's conftest.py as `conftest`: this suite's own comes back after.
    monkeypatch.setitem(sys.modules, "conftest", sys.modules["conftest"])
    if why is not None:
        name, text, arguments = PROTOCOL_NEEDED[why]
        if name is not None:
            (course_dir / "checks" / name).write_text(text)
            # This suite's own conftest.py, importable by that name here, is not the course's.
            monkeypatch.setattr(sys, "path", [p for p in sys.path
                                              if Path(p or ".").resolve() != REPO / "tests"])
        visible = course_dir / "checks" / "test_scale_it.py"
        visible.write_text(visible.read_text().replace(
            "def test_scale_multiplies_every_element(sub):",
            f"def test_scale_multiplies_every_element({arguments}):"))
    direct = []

    def counting(item, *args):
        direct.append(item)
        return _call_directly(item, *args)

    monkeypatch.setattr(batch, "call_directly", counting)
    use_course(load_course(course_dir))
    try:
        for student, source in (("right", "solutions"), ("stub", "exercises")):
            (tmp_path / "subs" / student).mkdir(parents=True)
            (tmp_path / "subs" / student / "scale_it.py").write_text(
                (course_dir / source / "scale_it.py").read_text())
        subs = [load_submission(tmp_path / "subs" / s, exercises=["scale_it"], student=s)
                for s in ("right", "stub")]
        results: dict[str, SubmissionResult] = {}
        grade_batch(iter(subs), lambda sub, run: results.__setitem__(sub.student,
                                                                     result_of(run)),
                    exercises=["scale_it"], limits=None, zygote=zygote)
    finally:
        use_course(None)
    assert results["right"].score == results["right"].max_score > 0
    assert results["stub"].score == 0 and len(results["stub"].checks) == 2
    assert "passed" not in {c.status for c in results["stub"].checks}
    assert bool(direct) == (why is None)
    assert len(direct) == (4 if why is None else 0)


# Every public function of a solution, made to sleep `NAP` before it answers.
NAPPING = """
import functools as _functools, inspect as _inspect, time as _time
NAP = 0.45
def _napping(function):
    @_functools.wraps(function)
    def slow(*args, **kwargs):
        _time.sleep(NAP)
        return function(*args, **kwargs)
    return slow
for _name, _value in list(globals().items()):
    if _inspect.isfunction(_value) and not _name.startswith("_") and _value.__module__ == __name__:
        globals()[_name] = _napping(_value)
"""


def test_code_that_ends_every_call_just_under_its_deadline_is_stopped_by_the_budgets(
        tmp_path, zygote):
    """Right answers, each just under the call deadline: every check that calls often is
    stopped at its budget, and once the submission's budget is spent the remaining checks are
    not run, each saying why, in about that budget, not in minutes."""
    from grader.worker.limits import WorkerLimits

    write_class(tmp_path, {"napper": SOLUTION + NAPPING})
    sub = load_submission(tmp_path / "napper", exercises=[EXERCISE], student="napper")
    limits = WorkerLimits(call_timeout=0.5, check_budget=1.0, submission_budget=4.0)
    started = time.monotonic()
    result = run_and_score(sub, exercises=[EXERCISE], zygote=zygote, limits=limits)
    took = time.monotonic() - started
    messages = [c.message for c in result.checks]
    assert any("this check's calls into your code took 1 s in all" in m for m in messages)
    not_run = [c for c in result.checks if "not run: your code has used the 4 s" in c.message]
    assert not_run and all(c.status == "timeout" for c in not_run)
    assert result.checks[-len(not_run):] == not_run  # every check after the budget was spent
    assert took < 20  # without the budgets: ~50 s (each call 0.45 s)


def test_one_session_grades_every_exercise_like_fresh_sessions(tmp_path, zygote):
    """Every exercise's checks (fixtures, probes, evidence) reused across submissions."""
    from grader.course.bughunt import is_bughunt, student_path
    from grader.course.registry import known_exercises

    exercises = known_exercises()
    # a bug hunt's reference and stub: its fixed and its faulty script
    files = {e: student_path(e) if is_bughunt(e) else f"{e}.py" for e in exercises}
    solutions = {e: (SOLUTIONS / files[e]).read_text() for e in exercises}
    students = {"all_correct": dict(solutions),
                "all_stubs": {e: (EXERCISES / files[e]).read_text() for e in exercises}}
    for exercise in exercises:  # one wrong implementation of each, the rest correct
        wrong = next((m for m in mutants_of(exercise) if not m.name.startswith("correct_")), None)
        if wrong is not None:
            students[f"wrong_{exercise}"] = {**solutions,
                                             exercise: wrong.source()}
    for student, files in students.items():
        (tmp_path / student).mkdir()
        for exercise, source in files.items():
            (tmp_path / student / f"{exercise}.py").write_text(source)
    subs = [load_submission(tmp_path / s, exercises=exercises, student=s) for s in students]
    batch: dict[str, SubmissionResult] = {}
    grade_batch(iter(subs), lambda sub, run: batch.__setitem__(sub.student, result_of(run)),
                exercises=exercises, limits=None, zygote=zygote)
    for sub in subs:
        fresh = run_and_score(sub, exercises=exercises, zygote=zygote)
        assert comparable(batch[sub.student]) == comparable(fresh), sub.student
    assert batch["all_correct"].score == batch["all_correct"].max_score > 0


# --------------------------------------------------------------------------- a class, in a pool

ASSIGNMENT = """
name = "hw1"
due = 2026-03-01T23:59:00+00:00
roster = "roster.csv"
exercises = [{ name = "strides_broadcasting", points = 10 }]

[late_policy]
penalty_per_day = 0.1
max_penalty = 0.3
grace_minutes = 10
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("bulk")
    subs = write_class(root / "subs", {
        "ann": SOLUTION, "bob": STUB, "cat": None, "dan": mutant("center_columns_in_place"),
        "eve": SOLUTION, "fay": mutant("to_tensor_always_copies")})
    with zipfile.ZipFile(subs / "gus.zip", "w") as z:
        z.writestr(f"gus/{EXERCISE}.py", SOLUTION)
    (subs / "eve" / "timestamp.txt").write_text("2026-03-03 12:00:00.000000 UTC")  # 2 days late
    (subs / "ann" / "timestamp.txt").write_text("2026-03-02T00:05:00+00:00")  # within grace
    (root / "roster.csv").write_text("student_id,last_name,first_name,email\n"
                                     "ann,Lovelace,Ada,ada@example.org\n")
    (root / "hw1.toml").write_text(ASSIGNMENT)
    out = root / "out"
    first = torchgrade("grade", subs, "--out", out, "--assignment", root / "hw1.toml", "-j", "2")
    return root, subs, out, first


def results_of(out: Path) -> dict[str, SubmissionResult]:
    return {p.parent.name: read_json(p) for p in out.glob("*/results.json")}


def test_pool_grades_every_submission_with_the_assignment_points(graded):
    _, _, out, proc = graded
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = results_of(out)
    assert set(results) == {"ann", "bob", "cat", "dan", "eve", "fay", "gus"}
    for student, r in results.items():
        assert r.max_score == 10 and r.assignment == "hw1" and r.fingerprint, student
        assert (out / student / "report.html").stat().st_size > 0
        assert (out / student / "gradescope.json").stat().st_size > 0
    assert results["ann"].score == results["gus"].score == results["eve"].score == 10
    assert results["bob"].score == results["cat"].score == 0
    assert 0 < results["dan"].score < 10 and 0 < results["fay"].score < 10
    cat = results["cat"]
    assert cat.exercises[0].notes[0].startswith("file not submitted")
    assert all(c.message.startswith("file not submitted") for c in cat.checks)
    # An empty folder reads as an absent roster student's does, in the class files too.
    assert cat.notes[1:] == ["nothing handed in"]  # after "not in the roster"
    grades = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv")
                                                                  .read_text()))}
    assert "nothing handed in" in grades["cat"]["remarks"]
    assert "nothing handed in" not in grades["bob"]["remarks"]
    # per-check points keep their shares: 2 of 35 declared points become 2/35 of 10
    check = next(c for c in results["ann"].checks if c.id == f"{EXERCISE}.c_strides_matches_numpy")
    assert check.max_points == pytest.approx(10 * 2 / 35, abs=1e-6)
    assert "Graded 7 submissions" in proc.stdout.splitlines()[-1]
    assert "; 1 handed in nothing (0 points)." in proc.stdout
    assert "index.html" in proc.stdout.splitlines()[-1]


def test_late_penalty_from_timestamp_and_policy(graded):
    _, _, out, _ = graded
    results = results_of(out)
    assert results["eve"].submitted_at == datetime(2026, 3, 3, 12, tzinfo=timezone.utc)
    assert results["eve"].late_penalty == pytest.approx(2)  # 2 started days x 0.1 x 10 points
    assert results["ann"].late_penalty == 0  # 6 minutes late, 10 minutes of grace
    assert results["gus"].submitted_at is None and results["gus"].late_penalty == 0


def test_grades_csv_has_nbgrader_columns_and_is_ready_for_an_lms(graded):
    _, _, out, _ = graded
    text = (out / "grades.csv").read_text()
    header = text.splitlines()[0].split(",")
    assert header == ["student", EXERCISE, "assignment", "duedate", "timestamp", "student_id",
                      "last_name", "first_name", "email", "raw_score", "late_submission_penalty",
                      "score", "max_score", "remarks"]
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(text))}
    assert list(rows) == sorted(rows) and len(rows) == 7
    expected = {"assignment": "hw1", "student_id": "ann", "last_name": "Lovelace",
                "first_name": "Ada", "email": "ada@example.org", "raw_score": "10", "score": "10",
                "max_score": "10", "late_submission_penalty": "0", EXERCISE: "10"}
    assert {k: rows["ann"][k] for k in expected} == expected
    assert rows["ann"]["duedate"].startswith("2026-03-01 23:59:00")
    eve = rows["eve"]
    assert (eve["raw_score"], eve["late_submission_penalty"], eve["score"]) == ("10", "2", "8")
    assert eve["timestamp"].startswith("2026-03-03 12:00:00")
    for row in rows.values():
        assert float(row["score"]) == max(0.0, float(row["raw_score"]) -
                                          float(row["late_submission_penalty"]))
        assert float(row[EXERCISE]) == float(row["raw_score"])


def test_class_index_is_complete_and_self_contained(graded):
    _, _, out, _ = graded
    html = (out / "index.html").read_text()
    for student in ("ann", "bob", "cat", "dan", "eve", "fay", "gus"):
        assert f'href="{student}/report.html"' in html
    for part in ('id="students"', 'id="distribution"', 'id="checks"', 'id="diagnoses"',
                 "<svg", "table.sortable", "Late penalty", "c_strides equals numpy"):
        assert part in html, part
    # self-contained: no script, style or image fetched from anywhere
    assert "<script src" not in html and "<link" not in html and "http" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "").replace("http-equiv", "")  # the CSP's meta


def test_rerun_skips_graded_submissions_and_rebuilds_the_class_files(graded):
    root, subs, out, _ = graded
    before = {s: r.graded_at for s, r in results_of(out).items()}
    (out / "index.html").unlink()
    (out / "grades.csv").unlink()
    again = torchgrade("grade", subs, "--out", out, "--assignment", root / "hw1.toml")
    assert again.returncode == 0, again.stderr
    assert "7 of 7 submissions are already graded" in again.stdout
    assert (out / "index.html").exists() and (out / "grades.csv").exists()
    assert {s: r.graded_at for s, r in results_of(out).items()} == before
    # a changed file is graded again, and only that one
    (subs / "bob" / f"{EXERCISE}.py").write_text(SOLUTION)
    third = torchgrade("grade", subs, "--out", out, "--assignment", root / "hw1.toml")
    after = results_of(out)
    assert third.returncode == 0 and "6 of 7 submissions are already graded" in third.stdout
    assert after["bob"].graded_at > before["bob"] and after["bob"].score == 10
    assert all(after[s].graded_at == before[s] for s in before if s != "bob")
    # ... saying the grade it replaced, which it keeps
    assert "Regraded 1 student who had a grade: changed: bob 0 -> 10. " in third.stdout
    assert read_json(out / "bob" / "results.previous.json").score == 0
    assert not (out / "ann" / "results.previous.json").exists()
    # ... in bob's report and the class index too (and the result), not in ann's
    assert after["bob"].replaced is not None and after["bob"].replaced.final_score == 0
    assert after["ann"].replaced is None
    assert "this grade replaces 0 / 10" in (out / "bob" / "report.html").read_text()
    assert "Regraded:" not in (out / "ann" / "report.html").read_text()
    index = (out / "index.html").read_text()
    assert index.count("regraded: was ") == 1 and ">regraded: was 0</span>" in index
    # a --force that changes no grade keeps the record of the last change (it replaced it)
    forced = torchgrade("grade", subs, "--out", out, "--assignment", root / "hw1.toml",
                        "--force", "-j", "1")
    assert forced.returncode == 0 and "no final score changed" in forced.stdout, forced.stdout
    assert read_json(out / "bob" / "results.previous.json").score == 0
    assert results_of(out)["bob"].replaced.final_score == 0
    assert results_of(out)["bob"].graded_at > after["bob"].graded_at
    assert read_json(out / "ann" / "results.previous.json").score == 10
    # another assignment (other points) is another grading
    other = root / "other.toml"
    other.write_text('name = "hw1b"\nexercises = ["strides_broadcasting"]\n')
    fourth = torchgrade("grade", subs, "--out", out, "--assignment", other, "--force", "-j", "1")
    assert fourth.returncode == 0 and "already graded" not in fourth.stdout
    assert "Regraded 7 students who had a grade: changed: " in fourth.stdout
    assert "ann 10 -> 35 (of 10 -> 35)" in fourth.stdout
    assert read_json(out / "ann" / "results.previous.json").assignment == "hw1"
    assert all(r.max_score == 35 and r.assignment == "hw1b" for r in results_of(out).values())


def test_a_student_missing_from_a_later_download_keeps_their_grade_in_the_class_files(tmp_path):
    """dan's folder is gone from the next download (a withdrawal, or an export of new
    submissions only): the run warns and keeps his result in index.html and the CSVs, as
    `torchgrade index` lists it; it was silently dropped from grades.csv."""
    subs = write_class(tmp_path / "subs", {"ann": SOLUTION, "dan": SOLUTION})
    out = tmp_path / "out"
    first = torchgrade("grade", subs, "--out", out, "--exercises", EXERCISE, "-j", "1")
    assert first.returncode == 0, first.stderr
    shutil.move(subs / "dan", tmp_path / "dan")
    second = torchgrade("grade", subs, "--out", out, "--exercises", EXERCISE, "-j", "1")
    assert second.returncode == 0, second.stderr
    assert "Graded 1 submission " in second.stdout, second.stdout
    assert "1 earlier result(s)" in second.stderr and "dan" in second.stderr, second.stderr
    students = [row["student"] for row in csv.DictReader(
        (out / "grades.csv").read_text().splitlines())]
    assert sorted(students) == ["ann", "dan"]
    # --exercises names no assignment: the class folder does, as when the files chose them
    assert {row["assignment"] for row in csv.DictReader(
        (out / "grades.csv").read_text().splitlines())} == {"subs"}
    assert "dan/report.html" in (out / "index.html").read_text()
    assert torchgrade("index", out).returncode == 0
    assert sorted(row["student"] for row in csv.DictReader(
        (out / "grades.csv").read_text().splitlines())) == ["ann", "dan"]


@pytest.mark.fast
def test_the_summary_line_splits_the_count_only_when_some_were_up_to_date(tmp_path):
    from grader.commands.grade import summary_line
    from grader.grading.summary import GradeSummary

    def result(student: str) -> SubmissionResult:
        return SubmissionResult(student=student, grader_version="0", checks=[], score=0,
                                max_score=10)

    summary = GradeSummary(out=tmp_path, results=[result("ann"), result("bob")], graded=2,
                           seconds=4.0)
    assert summary_line(summary).startswith("Graded 2 submissions in 4.0 s, 2.00 s each: ")
    summary.graded, summary.up_to_date = 1, 1
    assert summary_line(summary).startswith(
        "Graded 2 submissions (1 graded now, 1 up to date) in 4.0 s")
    # Full marks are the grade's, after a late penalty, as the class index counts them.
    check = CheckResult(id="e.c", exercise="e", targets=["f"], visibility="visible", points=10,
                        max_points=10, status="passed")
    on_time = SubmissionResult(student="cat", grader_version="0", checks=[check])
    late = SubmissionResult(student="dan", grader_version="0", checks=[check], late_penalty=1)
    summary.results = [on_time, late]
    assert summary.full_marks == 1 and ": 1 with full marks" in summary_line(summary)


@pytest.mark.fast
def test_an_interrupted_run_writes_an_index_that_says_so_and_no_gradebook(tmp_path, monkeypatch):
    """A run stopped before it graded everyone (Ctrl-C, the sandbox failing) must not leave
    class files that read as complete: a gradebook uploaded then would miss grades, or drop
    the earlier grades of students it had not reached yet. index.html names who was not
    graded and keeps their earlier grades; grades.csv and the LMS gradebooks stay as they were
    until a run grades everyone."""
    from argparse import Namespace

    import grader.running.pool
    from grader.commands.grade import grade
    from grader.grading.summary import SHARDS, ShardSummary
    from grader.commands.index import main as index_main

    subs, out = tmp_path / "subs", tmp_path / "out"
    for student in ("ann", "bob", "cat"):
        (subs / student).mkdir(parents=True)
        (subs / student / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py").read_text())

    def fake_pool(stop_after: int | None, score: float):
        def pool(pending, *, settings, steps, jobs, on_result, on_isolation):
            for i, task in enumerate(pending):
                if i == stop_after:
                    raise KeyboardInterrupt
                check = CheckResult(id=f"{EXERCISE}.c", exercise=EXERCISE, targets=["f"],
                                    visibility="visible", points=score, max_points=10,
                                    status="passed")
                result = SubmissionResult(student=task.student, grader_version="0",
                                          checks=[check], score=score, max_score=10,
                                          fingerprint=task.fingerprint, exercises=[
                                              ExerciseResult(exercise=EXERCISE, score=score,
                                                             max_score=10)])
                (settings.out / task.student).mkdir(exist_ok=True)
                (settings.out / task.student / "results.json").write_text(
                    result.model_dump_json())
                on_result(result)
        return pool

    def gradebooks() -> dict[str, str]:
        return {name: (out / name).read_text() for name in
                ("grades.csv", "canvas_grades.csv", "moodle_grades.csv") if (out / name).exists()}

    # A first run stopped after one student: an index that says so, no gradebook at all.
    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool(1, 7))
    with pytest.raises(KeyboardInterrupt):
        grade(subs, out=out, exercises=[EXERCISE])
    index = (out / "index.html").read_text()
    assert "Incomplete" in index and "bob, cat" in index, index
    assert gradebooks() == {}
    # `torchgrade index` knows it too: the same index, still no gradebook, and exit 1.
    assert index_main(Namespace(out=out, assignment=None, exercises=None)) == 1
    assert "Incomplete" in (out / "index.html").read_text() and gradebooks() == {}
    # The run that finishes writes them all, and an index with no such note.
    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool(None, 7))
    grade(subs, out=out, exercises=[EXERCISE])
    assert "Incomplete" not in (out / "index.html").read_text()
    complete = gradebooks()
    assert len(complete) == 3 and all(s in complete["grades.csv"] for s in ("ann", "bob", "cat"))
    assert index_main(Namespace(out=out, assignment=None, exercises=None)) == 0
    complete = gradebooks()
    assert len(complete) == 3 and "Incomplete" not in (out / "index.html").read_text()
    # A shard that stopped names its students too, but those graded since.
    record = ShardSummary(shard="1/2", students=[], graded=0, up_to_date=0, failures=0,
                          seconds=0, exercises=[EXERCISE], not_graded=["cat", "dan"],
                          finished_at=datetime(2020, 1, 1, tzinfo=timezone.utc))
    (out / SHARDS).mkdir()
    (out / SHARDS / "1-of-2.json").write_text(record.model_dump_json())
    assert index_main(Namespace(out=out, assignment=None, exercises=None)) == 1
    assert "<summary>Not graded yet</summary><p>dan</p>" in (out / "index.html").read_text()
    shutil.rmtree(out / SHARDS)
    # A regrade stopped after one student: the others keep their grades in the index, and
    # the gradebooks of the complete run are left as they were.
    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool(1, 3))
    with pytest.raises(KeyboardInterrupt):
        grade(subs, out=out, exercises=[EXERCISE], force=True)
    index = (out / "index.html").read_text()
    assert "Incomplete" in index and "bob, cat" in index
    assert all(f"{s}/report.html" in index for s in ("ann", "bob", "cat"))
    assert gradebooks() == complete


@pytest.mark.fast
def test_a_ctrl_c_while_the_class_files_are_written_comes_after_them():
    from grader.outputs.writing import interrupts_deferred

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # (a terminal's Ctrl-C)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # (the handler runs between bytecodes: here, at the latest)
                done.append("written")
        assert done == ["written"]
        with interrupts_deferred():  # nothing caught, nothing raised; the handler is back
            pass
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        # Where Ctrl-C is ignored (a background job), it stays ignored.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.fast
def test_index_of_grader_failures_only_lists_them(tmp_path):
    """A grader failure has no exercise: an OUT holding only those (a sandbox that never
    started) is indexed over the course's exercises, not refused with a traceback."""
    from grader.commands.index import index
    from grader.intake.submission import OUT_MARKER
    from grader.scoring.results import grader_failure

    (tmp_path / OUT_MARKER).write_text("")
    (tmp_path / "ann").mkdir()
    failed = grader_failure("ann", "a test")
    (tmp_path / "ann" / "results.json").write_text(failed.model_dump_json())
    summary = index(tmp_path)
    assert summary.failures == 1 and EXERCISE in summary.exercises
    assert "ann" in (tmp_path / "grades.csv").read_text()


@pytest.mark.fast
def test_a_regrade_names_every_final_score_it_moved():
    from grader.commands.grade import regrade_line
    from grader.grading.summary import GradeSummary
    from grader.scoring.results import grader_failure

    def graded(student: str, score: float) -> SubmissionResult:
        check = CheckResult(id="e.c", exercise="e", targets=["f"], visibility="visible",
                            points=score, max_points=10, status="passed")
        return SubmissionResult(student=student, grader_version="0", checks=[check],
                                score=score, max_score=10)

    summary = GradeSummary(out=Path("OUT"), results=[
        graded("ann", 10), grader_failure("bob", "a test"), graded("cat", 5), graded("dan", 7)],
        replaced={"ann": (8, 10), "bob": (10, 10), "cat": (5, 10)})
    assert regrade_line(summary) == (
        "Regraded 3 students who had a grade: changed: ann 8 -> 10, bob 10 -> NOT GRADED; "
        "1 unchanged. The grades they replaced: OUT/<student>/results.previous.json")
    assert regrade_line(GradeSummary(out=Path("OUT"), results=[graded("dan", 7)])) == ""


def test_a_reader_that_leaves_early_does_not_stop_the_run(tmp_path):
    """`torchgrade grade ... | head -1`: the pipe closes after one line; the run went on to
    raise BrokenPipeError at its next progress line, ending half-way with a traceback."""
    subs = write_class(tmp_path / "subs", {"ann": SOLUTION, "bob": STUB, "cat": SOLUTION})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                             str(out), "--exercises", EXERCISE, "-j", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith("Grading ")
    proc.stdout.close()  # as `head -1` does
    stderr = proc.stderr.read()
    assert proc.wait(timeout=600) == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert sorted(p.parent.name for p in out.glob("*/results.json")) == ["ann", "bob", "cat"]
    assert (out / "index.html").is_file()


@pytest.mark.parametrize("content, words", [
    ('name = "x"\nexercises = ["nope"]\n', "unknown exercise 'nope'"),
    ('name = "x"\nexercises = []\n', "exercises: List should have at least 1 item"),
    ('name = "x"\nexercises = [{ name = "strides_broadcasting", points = -1 }]\n',
     "exercises.0.points: Input should be greater than 0"),
    ('name = "x"\nexercise = ["strides_broadcasting"]\n', "exercise: unknown field"),
    ('name = "x"\nexercises = ["strides_broadcasting"]\n[late_policy]\npenalty_per_day = 2\n',
     "late_policy.penalty_per_day: Input should be less than or equal to 1"),
    ('name = "x"\nexercises = ["strides_broadcasting", "strides_broadcasting"]\n', "listed twice"),
    ("name = \n", "not valid TOML"),
    (None, "no such file"),
])
def test_invalid_assignment_exits_2_with_one_line(tmp_path, content, words):
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    path = tmp_path / "a.toml"
    if content is not None:
        path.write_text(content)
    proc = torchgrade("grade", tmp_path / "subs", "--out", tmp_path / "out", "--assignment", path)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out" / "ann").exists()


@pytest.mark.parametrize("args, words", [
    (["-j", "0"], "must be at least 1"),
    (["--exercises", EXERCISE, "--assignment", "a.toml"], "not both"),
])
def test_bulk_usage_errors_exit_2(tmp_path, args, words):
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    proc = torchgrade("grade", tmp_path / "subs", "--out", tmp_path / "out", *args, cwd=tmp_path)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.splitlines()) == 1


# --------------------------------------------------------------------------- kill -9, Ctrl-C


def processes_under(folder: Path) -> list[int]:
    """Live processes whose working directory lies in `folder` (the grader's zygotes and
    workers run in scratch folders under TMPDIR) or whose environment names it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd.startswith(str(folder)) or str(folder).encode() in environ):
            found.append(int(entry))
    return found


def wait_until(predicate, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def start_grading(subs: Path, out: Path, tmp: Path) -> subprocess.Popen:
    """`torchgrade grade` in its own session (its process group stands for a terminal's
    foreground job), with TMPDIR under `tmp` so that its processes can be found."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    tmp.mkdir(exist_ok=True)
    # SIGINT as a terminal leaves it: a test run started in the background (`nohup ... &`)
    # ignores SIGINT, and an ignored signal stays ignored in every process it starts.
    return subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                             str(out), "-j", "2"], env=env, cwd=tmp, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.fixture(scope="module")
def big_class(tmp_path_factory):
    """16 students, correct and buggy mixed, and a clean run of them to compare with."""
    root = tmp_path_factory.mktemp("big")
    names = sorted(MUTANTS)
    sources = {f"s{i:02d}": (SOLUTION if i % 3 == 0 else STUB if i % 7 == 0 else
                             mutant(names[i % len(names)])) for i in range(16)}
    subs = write_class(root / "subs", sources)
    clean = root / "clean"
    proc = torchgrade("grade", subs, "--out", clean)
    assert proc.returncode == 0, proc.stderr
    return root, subs, results_of(clean)


def test_kill_9_midway_loses_nothing_and_the_rerun_finishes(big_class):
    root, subs, clean = big_class
    out, tmp = root / "killed", root / "tmp-kill"
    proc = start_grading(subs, out, tmp)
    try:
        assert wait_until(lambda: len(list(out.glob("*/results.json"))) >= 4, 300), \
            proc.stderr.read() if proc.poll() is not None else "no result in time"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done_before = len(list(out.glob("*/results.json")))
    assert 4 <= done_before < 16, "killed too late to test anything"
    # every process of the run dies with it: zygotes and workers by PR_SET_PDEATHSIG
    assert wait_until(lambda: not processes_under(tmp), 15), processes_under(tmp)
    for path in out.glob("*/results.json"):  # what was written is whole
        assert comparable(read_json(path)) == comparable(clean[path.parent.name])
    rerun = torchgrade("grade", subs, "--out", out)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{done_before} of 16 submissions are already graded" in rerun.stdout
    resumed = results_of(out)
    assert set(resumed) == set(clean)
    for student in clean:
        assert comparable(resumed[student]) == comparable(clean[student]), student
    assert not list(out.glob("**/.*.tmp")) and not (out / ".torchgrade.lock").exists()


def test_ctrl_c_stops_cleanly_with_exit_130(big_class):
    root, subs, _ = big_class
    out, tmp = root / "interrupted", root / "tmp-int"
    proc = start_grading(subs, out, tmp)
    try:
        assert wait_until(lambda: len(list(out.glob("*/results.json"))) >= 2, 300)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert wait_until(lambda: not processes_under(tmp), 15), processes_under(tmp)
    assert not list(out.glob("**/.*.tmp")) and not (out / ".torchgrade.lock").exists()
    graded = list(out.glob("*/results.json"))
    assert 2 <= len(graded) and (out / "index.html").exists()
    for path in graded:
        read_json(path)
    if len(graded) < 16:  # the class files say the run is incomplete; no gradebook yet
        assert "Incomplete" in (out / "index.html").read_text()
        assert not (out / "grades.csv").exists() and "grades.csv" in stderr, stderr
    assert torchgrade("grade", subs, "--out", out).returncode == 0
    assert len(list(out.glob("*/results.json"))) == 16
    assert "Incomplete" not in (out / "index.html").read_text()
    assert (out / "grades.csv").exists() and (out / "canvas_grades.csv").exists()


# --------------------------------------------------------------------------- a dying process


class DyingConnection:
    """A grading process's connection that kills its process when it receives the task of
    `victim` (always, or only while `once` does not exist yet)."""

    def __init__(self, conn, victim: str, once: Path | None):
        self.conn, self.victim, self.once = conn, victim, once

    def recv(self):
        task = self.conn.recv()
        if task is not None and task.submission.student == self.victim:
            if self.once is None or not self.once.exists():
                if self.once is not None:
                    self.once.write_text("died once")
                os.kill(os.getpid(), signal.SIGKILL)
        return task

    def send(self, message):
        self.conn.send(message)


def serve_dying_always(conn, settings, steps):
    from grader.running.pool import serve
    serve(DyingConnection(conn, "bob", None), settings, steps)


def serve_dying_once(conn, settings, steps):
    from grader.running.pool import serve
    serve(DyingConnection(conn, "bob", settings.out.parent / "died-once"), settings, steps)


@pytest.mark.parametrize("serve_fn, bob_graded", [(serve_dying_always, False),
                                                  (serve_dying_once, True)])
def test_a_dying_grading_process_costs_one_retry_not_the_batch(tmp_path, serve_fn, bob_graded):
    from grader.intake.assignment import from_exercises
    from grader.grading.steps import STEPS
    from grader.running.pool import GradeTask, PoolSettings, grade_in_pool

    subs = write_class(tmp_path / "subs", {"ann": SOLUTION, "bob": SOLUTION, "cat": STUB})
    tasks = [GradeTask(submission=load_submission(subs / s, exercises=[EXERCISE], student=s),
                       fingerprint=f"fp-{s}") for s in ("ann", "bob", "cat")]
    settings = PoolSettings(out=tmp_path / "out", exercises=[EXERCISE],
                            assignment=from_exercises([EXERCISE]))
    seen = []
    results = grade_in_pool(tasks, settings=settings, steps=STEPS, jobs=2,
                            on_result=seen.append, serve=serve_fn)
    by_student = {r.student: r for r in results}
    assert set(by_student) == {"ann", "bob", "cat"} and len(seen) == 3
    assert by_student["ann"].score == by_student["ann"].max_score > 0
    assert by_student["cat"].score == 0 and by_student["cat"].checks
    bob = by_student["bob"]
    on_disk = read_json(tmp_path / "out" / "bob" / "results.json")
    if bob_graded:
        assert bob.score == bob.max_score > 0 and bob.fingerprint == "fp-bob"
    else:
        assert not bob.checks and bob.fingerprint is None  # retried by the next run
        assert "grading process died: killed by SIGKILL" in bob.notes[0]
        assert "not the student's fault" in on_disk.notes[0]
    assert comparable(on_disk) == comparable(bob)


def serve_noting_dynamo(conn, settings, steps):
    """A grading process that notes, before it serves, whether its zygote is told to warm
    torch._dynamo."""
    import grader.worker.client as client
    from grader.running.pool import serve

    made = client.Zygote.__init__

    def noting(self, *args, **kwargs):
        (settings.out.parent / "zygote-optimizers").write_text(str(kwargs.get("optimizers")))
        made(self, *args, **kwargs)

    client.Zygote.__init__ = noting
    serve(conn, settings, steps)


@pytest.mark.parametrize("exercise, warm", [(EXERCISE, False), ("training_loops", True)])
def test_torch_dynamo_is_imported_at_start_up_only_for_exercises_that_build_optimizers(
        tmp_path, exercise, warm):
    """The zygotes warm torch._dynamo (~1.8 s) only when the exercises graded may build a
    torch.optim optimizer (`Course.may_build_optimizers`): a class of strides_broadcasting
    starts without it, one of training_loops with it. The fork server never preloads it: its
    grading processes check with it deferred."""
    from grader.grading.steps import STEPS
    from grader.intake.assignment import from_exercises
    from grader.course.folder import active_course
    from grader.running.pool import GradeTask, PoolSettings, grade_in_pool, preload

    ann = tmp_path / "subs" / "ann"
    ann.mkdir(parents=True)
    (ann / f"{exercise}.py").write_text((EXERCISES / f"{exercise}.py").read_text())
    tasks = [GradeTask(submission=load_submission(ann, exercises=[exercise], student="ann"))]
    settings = PoolSettings(out=tmp_path / "out", exercises=[exercise],
                            assignment=from_exercises([exercise]))
    [result] = grade_in_pool(tasks, settings=settings, steps=STEPS, jobs=1,
                             serve=serve_noting_dynamo)
    assert result.checks and result.score == 0  # the stub, graded
    assert (tmp_path / "zygote-optimizers").read_text() == str(warm)
    # The fork server's imports (multiprocessing keeps the first fork server of a process, so
    # they are read from what the pool asks of it, not from a process of this test's).
    assert "torch._dynamo" not in preload(active_course(), [exercise])


@pytest.mark.parametrize("exercise", ["training_loops", "autograd_graph"])
def test_a_local_check_runs_with_torch_dynamo_deferred(exercise):
    """`torchgrade check` runs the checks in its own process (a pool's grading process runs
    them the same way): their references step optimizers (training_loops) and take torch.func
    gradients (autograd_graph) with torch._dynamo deferred (`grader.worker.deferred_dynamo`),
    never importing it (~1.8 s of a cold check), and the solution gets full marks."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from grader.intake.submission import load_submission
        from grader.running.runner import run_checks
        from grader.worker.client import Zygote
        sub = load_submission(Path({str(SOLUTIONS / f"{exercise}.py")!r}),
                              exercises=[{exercise!r}])
        with Zygote() as zygote:
            run = run_checks(sub, exercises=[{exercise!r}], zygote=zygote)
        print(all(c.status == "passed" for c in run.checks) and len(run.checks) > 5,
              type(sys.modules.get("torch._dynamo")).__name__)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "DeferredDynamo"]


# --------------------------------------------------------------------------- pieces


def test_assignment_rescales_points_and_charges_lateness(tmp_path):
    path = tmp_path / "hw.toml"
    path.write_text(ASSIGNMENT)
    plan = load_assignment(path)
    assert plan.name == "hw1" and plan.roster == tmp_path / "roster.csv"
    checks = [CheckResult(id=f"e.c{i}", exercise=EXERCISE, targets=["f"], visibility="visible",
                          points=p, max_points=m, status="passed" if p else "failed")
              for i, (p, m) in enumerate([(2, 2), (0, 1), (1, 1)])]
    result = SubmissionResult(student="s", grader_version="0", checks=checks,
                              exercises=[ExerciseResult(exercise=EXERCISE, score=3, max_score=4)],
                              submitted_at=parse_timestamp("2026-03-05 00:00:00 UTC"))
    scaled = apply_assignment(result, plan)
    assert [c.max_points for c in scaled.checks] == [5, 2.5, 2.5]
    assert scaled.score == 7.5 and scaled.max_score == 10
    assert scaled.exercises[0].score == 7.5 and scaled.exercises[0].max_score == 10
    assert scaled.late_penalty == 3  # 4 started days x 10% = 40%, capped at 30% of 10
    assert result.score == 3  # the input is not modified
    due = plan.due_utc
    assert late_penalty(due, plan, 10) == 0
    assert late_penalty(due + timedelta(minutes=10), plan, 10) == 0  # grace
    assert late_penalty(due + timedelta(minutes=11), plan, 10) == 1  # one started day
    assert late_penalty(due + timedelta(days=1, minutes=11), plan, 10) == 2
    assert late_penalty(None, plan, 10) == 0
    # 35 checks of 1 point (and one of 2) rescaled to 20: the exports add up to 20, not
    # 20.000005 (each check rounded to 6 decimals alone); a check's share of its points kept.
    many = [CheckResult(id=f"e.c{i}", exercise=EXERCISE, targets=["f"], visibility="visible",
                        points=p, max_points=m, status="passed" if p == m else "failed")
            for i, (p, m) in enumerate([(1, 1)] * 34 + [(0, 1), (1, 2)])]
    whole = SubmissionResult(student="s", grader_version="0", checks=many,
                             exercises=[ExerciseResult(exercise=EXERCISE, score=35,
                                                       max_score=37)])
    twenty = apply_assignment(whole, plan.model_copy(update={"exercises": [
        e.model_copy(update={"points": 20.0}) for e in plan.exercises]}))
    assert twenty.max_score == twenty.exercises[0].max_score == 20
    assert twenty.checks[-1].points * 2 == pytest.approx(twenty.checks[-1].max_points)
    assert twenty.score == twenty.exercises[0].score == pytest.approx(20 * 35 / 37, abs=1e-5)
    full = whole.model_copy(update={"checks": [c.model_copy(update={"points": c.max_points})
                                               for c in many]})
    assert apply_assignment(full, plan.model_copy(update={"exercises": [
        e.model_copy(update={"points": 20.0}) for e in plan.exercises]})).score == 20
    assert parse_timestamp("not a time") is None
    assert parse_timestamp("2026-03-01T10:00:00Z") == datetime(2026, 3, 1, 10, tzinfo=timezone.utc)
    with pytest.raises(AssignmentError, match="unknown field"):
        path.write_text('exercises = ["a"]\nnmae = "x"\n')
        load_assignment(path)
    assert Assignment(exercises=["a", {"name": "b", "points": 3}]).points_of("b") == 3


def test_index_shows_distribution_pass_rates_and_diagnoses():
    def result(student, passed, diagnoses=()):
        checks = [CheckResult(id=f"{EXERCISE}.c{i}", exercise=EXERCISE, title=f"check {i}",
                              targets=["f"], visibility="hidden" if i else "visible",
                              points=1.0 if i < passed else 0.0, max_points=1.0,
                              status="passed" if i < passed else "failed",
                              diagnoses=list(diagnoses) if i >= passed else [])
                  for i in range(4)]
        return SubmissionResult(student=student, grader_version="0", checks=checks,
                                exercises=[ExerciseResult(exercise=EXERCISE, score=passed,
                                                          max_score=4)])
    results = [result("a", 4), result("b", 2, ["gradients never zeroed"]),
               result("c", 0, ["gradients never zeroed", "dropout left on in eval"]),
               SubmissionResult(student="d", grader_version="0", notes=["the grader failed"])]
    html = render_index(results, [EXERCISE])
    assert "gradients never zeroed" in html and "dropout left on in eval" in html
    assert html.index("gradients never zeroed") < html.index("dropout left on in eval")
    assert "1 could not be graded" in html and "not graded" in html
    assert "1 / 3" in html and "3 / 3" not in html  # check 3 passed by one of three graded
    assert "Mean 50%" in html
    empty = render_index(results[:1], [EXERCISE])
    assert "No diagnoses recorded" in empty


def test_index_lists_who_needs_help_first_and_says_why():
    """Issue 41: the students table opens on who needs help (grader failures, then the
    others flagged, lowest score first), each with the reasons in words; then the rest."""
    import re

    def result(student, passed, *, missing=False, syntax=False):
        checks = [CheckResult(id=f"{EXERCISE}.c{i}", exercise=EXERCISE, title=f"check {i}",
                              targets=["f"], visibility="visible", max_points=1.0,
                              points=1.0 if i < passed else 0.0,
                              status="passed" if i < passed else "error" if missing or syntax
                              else "failed",
                              reason="not_submitted" if missing else "not_loaded" if syntax
                              else None)
                  for i in range(4)]
        return SubmissionResult(
            student=student, grader_version="0", checks=checks,
            exercises=[ExerciseResult(exercise=EXERCISE, score=passed, max_score=4,
                                      path=None if missing else f"{EXERCISE}.py",
                                      notes=[f"SyntaxError in {EXERCISE}.py, line 1: x"]
                                      if syntax else [])])
    results = [result("ann", 4), result("bob", 3), result("cat", 1), result("dan", 2),
               result("eve", 0, missing=True), result("fay", 0, syntax=True),
               SubmissionResult(student="gus", grader_version="0", notes=["the grader failed"])]
    html = render_index(results, [EXERCISE])
    order = re.findall(r'<td class="who" data-sort="([^"]+)"', html)
    # gus not graded; then eve, fay and cat (0, 0, 25%: under 50%); then dan, bob; ann's full
    assert order == ["gus", "eve", "fay", "cat", "dan", "bob", "ann"], order
    assert html.count('<tr class="needs-help">') == 3 and "4 need help" in html
    row = {sid: html[html.index(f'data-sort="{sid}"'):].split("</tr>")[0] for sid in order}
    assert "not graded" in row["gus"] and "nothing handed in" in row["eve"]
    assert "does not load" in row["fay"] and "syntax error" in row["fay"]
    assert "below 50%" in row["cat"] and "tag bad" not in row["dan"] + row["bob"] + row["ann"]
    assert "full marks" in row["ann"]
    # the students come before the exercises, the diagnoses and the checks, which are closed
    assert html.index('id="students"') < html.index('id="exercises"') < html.index(
        'id="diagnoses"') < html.index('id="checks"')
    assert '<details class="exercise-checks" id="checks-strides_broadcasting">' in html


def test_progress_is_a_bar_on_a_terminal_and_plain_lines_otherwise():
    ok = SubmissionResult(student="ann", grader_version="0", checks=[CheckResult(
        id="e.c", exercise="e", targets=["f"], visibility="visible", points=1, max_points=1,
        status="passed")])
    broken = SubmissionResult(student="bob", grader_version="0", checks=[CheckResult(
        id="e.c", exercise="e", targets=["f"], visibility="visible", points=0, max_points=1,
        status="timeout")])
    plain = io.StringIO()
    progress = Progress(plain)
    progress.start(3, 1)
    progress.result(ok)
    progress.result(broken)
    progress.close()
    lines = plain.getvalue().splitlines()
    assert "1 of 3 submissions are already graded" in lines[0]
    assert lines[1].split() == ["ann", "1", "/", "1"] and "(1 not passed)" in lines[2]
    assert "\r" not in plain.getvalue()
    terminal = io.StringIO()
    progress = Progress(terminal, interactive=True)
    progress.start(2, 0)
    progress.result(ok)
    progress.result(broken)
    progress.close()
    text = terminal.getvalue()
    assert "\r" in text and "2/2" in text and "full marks 1, code errors 1" in text
    assert "<" in text  # elapsed<remaining: the ETA


def test_demo_twice_keeps_what_is_graded(tmp_path):
    first = torchgrade("demo", "--out", tmp_path / "demo")
    assert first.returncode == 0, first.stderr
    second = torchgrade("demo", "--out", tmp_path / "demo")
    assert second.returncode == 0 and "are already graded" in second.stdout


@pytest.mark.parametrize("script, option", [("bench_grade.py", "--baseline"),
                                            ("bench_worker.py", "--runs")])
def test_benchmark_script_is_documented_and_runs_its_help(script, option):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--help"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0 and option in proc.stdout
    assert f"benchmarks/{script}" in (REPO / "docs" / "operations.md").read_text()


def serve_with_a_broken_installation(conn, settings, steps):
    """A grading process whose zygote fails as no installation should: not a ZygoteError."""
    import grader.worker.client as client
    from grader.running.pool import serve

    def broken(self, *args, **kwargs):
        raise PermissionError("[Errno 13] Permission denied: '/usr/lib/python3/fake'")

    client.Zygote.__init__ = broken
    serve(conn, settings, steps)


def test_a_zygote_failing_unexpectedly_is_said_not_a_silent_early_death(tmp_path):
    """The zygote starts in a thread while pytest collects; whatever it raises reaches the
    parent as the sandbox's failure, with its message (raised in the run loop instead, it would
    be pytest's internal error on the grading process's discarded stdout)."""
    from grader.intake.assignment import from_exercises
    from grader.grading.steps import STEPS
    from grader.running.pool import GradeTask, PoolBroken, PoolSettings, grade_in_pool

    subs = write_class(tmp_path / "subs", {"ann": SOLUTION})
    tasks = [GradeTask(submission=load_submission(subs / "ann", exercises=[EXERCISE],
                                                  student="ann"), fingerprint="fp-ann")]
    settings = PoolSettings(out=tmp_path / "out", exercises=[EXERCISE],
                            assignment=from_exercises([EXERCISE]))
    with pytest.raises(PoolBroken) as broken:
        grade_in_pool(tasks, settings=settings, steps=STEPS, jobs=1,
                      serve=serve_with_a_broken_installation, template=False)
    assert "PermissionError" in str(broken.value) and "/usr/lib/python3/fake" in str(broken.value)
    assert not (tmp_path / "out" / "ann").exists()


def test_a_class_with_no_file_of_the_course_is_warned_of(tmp_path):
    """Grading another course's class without --course scored everyone 0, silently."""
    subs = write_class(tmp_path / "subs", {"ann": "x = 1\n", "bob": "x = 1\n"})
    for student in ("ann", "bob"):
        (subs / student / f"{EXERCISE}.py").rename(subs / student / "clip_norm.py")
    out = tmp_path / "out"
    run = torchgrade("grade", subs, "--out", out, "--exercises", EXERCISE, "-j", "1")
    assert run.returncode == 0, run.stderr
    assert "no submission holds a file of any exercise graded (strides_broadcasting)" in run.stderr
    assert "2 with a file no exercise has the name of (misnamed?" in run.stdout
    # One student with the course's file: no warning.
    (subs / "ann" / "clip_norm.py").rename(subs / "ann" / f"{EXERCISE}.py")
    again = torchgrade("grade", subs, "--out", tmp_path / "out2", "--exercises", EXERCISE,
                       "-j", "1")
    assert "no submission holds" not in again.stderr, again.stderr
