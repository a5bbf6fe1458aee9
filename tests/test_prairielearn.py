"""PrairieLearn (issue 20): results.json in its external grader format, and the grader
`torchgrade prairielearn` writes, whose entrypoint grade.sh is run here against a fake /grade
tree (torchgrade already installed: this exercises grade.sh, not the image's downloads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from conftest import EXERCISES, SOLUTIONS
from grader.errors import GraderUnavailable
from grader.models import CheckResult, ExerciseResult, SubmissionResult
from grader.outputs.prairielearn import MAX_BYTES, fit, not_gradable, to_prairielearn

EXERCISE = "strides_broadcasting"


# PrairieLearn's "External Grading" documentation, "Grading results", written down independently
# of grader.outputs.prairielearn: the keys it names, with their types. (It allows more keys;
# torchgrade writes no other.)
class SpecTest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    description: str | None = None
    points: float | int | None = None
    max_points: float | int | None = None
    message: str | None = None
    output: str | None = None
    images: list | None = None


class SpecResults(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    gradable: bool | None = None
    score: float | int | None = Field(None, ge=0, le=1)
    message: str | None = None
    output: str | None = None
    format_errors: str | list[str] | None = None
    images: list | None = None
    tests: list[SpecTest] | None = None


def validate(text: str) -> SpecResults:
    assert len(text.encode("utf-8")) < MAX_BYTES  # "this file should be limited to 1 MB"
    results = SpecResults.model_validate(json.loads(text))
    if results.gradable is not False:  # "the result only has one mandatory field: score"
        assert results.score is not None
    else:
        assert results.format_errors
    for t in results.tests or []:
        assert t.points is None or t.max_points is None or 0 <= t.points <= t.max_points
    return results


def sample_result(output: str = "printed\n") -> SubmissionResult:
    def check(i, status, visibility):
        return CheckResult(id=f"{EXERCISE}.c{i}", exercise=EXERCISE, title=f"check {i}",
                           targets=["c_strides"], visibility=visibility,
                           points=2.0 if status == "passed" else 0.0, max_points=2.0,
                           status=status, message="" if status == "passed" else "it broke",
                           hint="think of the strides", output=output)
    return SubmissionResult(
        student="student", grader_version="0.1.0", grading_s=3.4,
        checks=[check(0, "passed", "visible"), check(1, "failed", "visible"),
                check(2, "timeout", "hidden"), check(3, "passed", "hidden")],
        exercises=[ExerciseResult(exercise=EXERCISE, path="strides_broadcasting.py",
                                  score=4, max_score=8, notes=["cell 3 raised"])],
        notes=["also found a stray file"])


def dump(results) -> str:
    from grader.outputs.prairielearn import results_json

    return results_json(results)


@pytest.mark.fast
def test_results_follow_prairielearns_format_and_hide_hidden_checks():
    results = validate(dump(to_prairielearn(sample_result())))
    assert results.gradable is True and results.score == pytest.approx(0.5)
    assert [t.points for t in results.tests] == [2, 0, 0, 2]
    assert [t.max_points for t in results.tests] == [2, 2, 2, 2]
    failed = results.tests[1]
    assert failed.name == f"{EXERCISE}: check 1" and "[failed] it broke" in failed.message
    assert "hint: think of the strides" in failed.message and failed.output == "printed\n"
    hidden = results.tests[2]  # a hidden check: its points and pass/fail, nothing it says
    assert hidden.message == "not passed" and "check 2" not in hidden.name
    assert "it broke" not in hidden.model_dump_json() and not hidden.output
    assert "cell 3 raised" in results.output and "also found a stray file" in results.message
    shown = validate(dump(to_prairielearn(sample_result(), reveal_hidden=True)))
    assert "[timeout] it broke" in shown.tests[2].message


@pytest.mark.fast
def test_a_result_the_grader_could_not_grade_is_not_gradable():
    failure = SubmissionResult(student="student", grader_version="0.1.0",
                               notes=["the grader failed: RuntimeError"])
    results = validate(dump(to_prairielearn(failure)))
    assert results.gradable is False and "RuntimeError" in results.message
    results = validate(dump(not_gradable("no exercise file was submitted")))
    assert results.format_errors == ["no exercise file was submitted"]


@pytest.mark.fast
def test_huge_outputs_are_clipped_under_one_megabyte_and_it_says_so():
    huge = sample_result(output="\x00é" * 150_000)  # escapes cost 6 bytes a character
    big = huge.model_copy(update={"checks": huge.checks * 25})
    text = dump(to_prairielearn(big, reveal_hidden=True))
    results = validate(text)
    assert len(results.tests) == 100 and "clipped" in results.message
    assert any("clipped" in t.output for t in results.tests)
    # what fits is left alone
    small = to_prairielearn(sample_result())
    assert "clipped" not in small.message and fit(small) == small


@pytest.mark.fast
def test_a_sandbox_that_cannot_start_is_not_gradable(tmp_path, monkeypatch):
    import grader.commands.prairielearn as pl

    def broken():
        raise GraderUnavailable("bwrap: No permissions to create new namespace")

    monkeypatch.setattr(pl, "sandbox", broken)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py")
                                                         .read_text())
    results, path = pl.prairielearn_run(root=tmp_path, exercises=[EXERCISE])
    assert path == tmp_path / "results" / "results.json"
    written = validate(path.read_text())
    assert written.gradable is False and "sandbox could not start" in written.message
    assert "namespace" in written.format_errors[0]


# --------------------------------------------------------------------------- the grader


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pl") / "grader"
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "prairielearn", "--out", str(out),
                           "--exercises", EXERCISE, "--image", "me/torchgrade:1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.slow
def test_the_grader_holds_info_json_an_entrypoint_and_an_image_recipe(built):
    info = json.loads((built / "info.json").read_text())
    assert info["gradingMethod"] == "External"
    options = info["externalGradingOptions"]
    assert options == {"enabled": True, "image": "me/torchgrade:1",
                       "entrypoint": f"/opt/torchgrade/grade.sh {EXERCISE}", "timeout": 120}
    image = built / "image"
    dockerfile = (image / "Dockerfile").read_text()
    assert "bubblewrap" in dockerfile and "requirements.txt" in dockerfile
    assert "torch==2.13.0" in (image / "requirements.txt").read_text().splitlines()
    assert "whl/cpu" in (image / "requirements.txt").read_text()
    assert len(list((image / "wheels").glob("torchgrade-*.whl"))) == 1
    assert (image / "course" / "checks" / f"test_{EXERCISE}_hidden.py").is_file()
    assert (image / "course" / "course.toml").is_file()
    assert os.access(image / "grade.sh", os.X_OK)
    assert "COPY assignment.toml grade.sh" in dockerfile
    bad = subprocess.run([sys.executable, "-m", "grader.cli", "prairielearn", "--out",
                          str(built.parent / "x"), "--job-timeout", "601"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "600" in bad.stderr


def run_grader(built: Path, tmp_path: Path, files: dict[str, bytes], *,
               python: str = sys.executable, exercises: str | None = EXERCISE
               ) -> tuple[subprocess.CompletedProcess, str]:
    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    for name, data in files.items():
        (root / "student" / name).write_bytes(data)
    env = {**os.environ, "TORCHGRADE_PRAIRIELEARN_ROOT": str(root),
           "TORCHGRADE_PRAIRIELEARN_HOME": str(built / "image"), "TORCHGRADE_PYTHON": python}
    proc = subprocess.run([str(built / "image" / "grade.sh"), *([exercises] if exercises else [])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, (root / "results" / "results.json").read_text()


SOLUTION = (SOLUTIONS / f"{EXERCISE}.py").read_bytes()
STUB = (EXERCISES / f"{EXERCISE}.py").read_bytes()


@pytest.mark.slow
def test_a_correct_submission_scores_one(built, tmp_path):
    _, text = run_grader(built, tmp_path, {f"{EXERCISE}.py": SOLUTION})
    results = validate(text)
    assert results.gradable is not False and results.score == 1
    assert all(t.points == t.max_points for t in results.tests) and len(results.tests) > 5


@pytest.mark.slow
def test_the_stub_scores_zero_and_says_why(built, tmp_path):
    proc, text = run_grader(built, tmp_path, {f"{EXERCISE}.py": STUB})
    results = validate(text)
    assert results.gradable is not False and results.score == 0
    shown = [t for t in results.tests if "hidden check" not in t.name]
    assert shown and all("not implemented yet" in t.message for t in shown)
    assert "not implemented" not in proc.stdout  # stdout may reach students: the score only


@pytest.mark.slow
@pytest.mark.parametrize("files, says", [
    ({f"{EXERCISE}.py": bytes(range(256)) * 64}, "binary"),
    ({"notes.txt": b"I could not do it"}, "no exercise file was submitted"),
    ({}, "no file at all"),
])
def test_what_cannot_be_graded_is_not_gradable_with_the_reason(built, tmp_path, files, says):
    _, text = run_grader(built, tmp_path, files)
    results = validate(text)
    assert results.gradable is False and says in results.message
    assert says in " ".join(results.format_errors)


@pytest.mark.slow
def test_a_grader_that_cannot_start_still_writes_results(built, tmp_path):
    _, text = run_grader(built, tmp_path, {f"{EXERCISE}.py": SOLUTION},
                         python=str(tmp_path / "no-such-python"))
    results = validate(text)
    assert results.gradable is False and "failed to start" in results.message


@pytest.mark.slow
def test_fifty_megabytes_printed_still_give_results_under_one_megabyte(built, tmp_path):
    noisy = SOLUTION + b"""
print("x" * 50_000_000)                     # 50 MB at import

_c_strides = c_strides
def c_strides(shape, itemsize):             # and 2 MB at every call
    print("y" * 2_000_000)
    return _c_strides(shape, itemsize)
"""
    _, text = run_grader(built, tmp_path, {f"{EXERCISE}.py": noisy})
    results = validate(text)  # under 1 MB
    assert results.gradable is not False and results.score == 1
    assert any(len(t.output) > 1000 for t in results.tests)  # what it printed, clipped
    assert "clipped" in results.message and "1 MB" in results.message


@pytest.mark.slow
def test_a_grader_built_from_an_assignment_grades_it_at_its_points(tmp_path):
    (tmp_path / "hw1.toml").write_text(f'name = "hw1"\nexercises = [{{ name = "{EXERCISE}", '
                                       'points = 10 }]\n')
    built = tmp_path / "grader"
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "prairielearn", "--out",
                           str(built), "--assignment", str(tmp_path / "hw1.toml")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    options = json.loads((built / "info.json").read_text())["externalGradingOptions"]
    assert options["entrypoint"] == "/opt/torchgrade/grade.sh"  # grades assignment.toml
    # (run from tmp_path, which holds a folder named `grader`: it must not shadow torchgrade)
    _, text = run_grader(built, tmp_path, {f"{EXERCISE}.py": SOLUTION}, exercises=None)
    results = validate(text)
    assert results.score == 1 and sum(t.max_points for t in results.tests) == pytest.approx(10)
