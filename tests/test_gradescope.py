"""Gradescope: results.json in its autograder format, and the autograder bundle, whose
run_autograder is run here against a fake /autograder tree (torchgrade already installed: this
exercises run_autograder, not setup.sh's downloads)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from conftest import EXERCISES, SOLUTIONS
from grader.outputs.gradescope import VISIBILITY, to_gradescope
from grader.models import CheckResult, ExerciseResult, SubmissionResult

EXERCISE = "strides_broadcasting"


# Gradescope's "Autograder Specifications", written down independently of grader.outputs.gradescope:
# only the fields the specification lists, with its value sets.
Visibility = Literal["hidden", "after_due_date", "after_published", "visible"]


class SpecTest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    score: float | None = None
    max_score: float | None = None
    status: Literal["passed", "failed"] | None = None
    name: str | None = None
    name_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    number: str | None = None
    output: str | None = None
    output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    tags: list[str] | None = None
    visibility: Visibility | None = None
    extra_data: dict | None = None


class SpecResults(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    score: float | None = None
    execution_time: int | None = Field(None, ge=0)
    output: str | None = None
    output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    test_output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    test_name_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    visibility: Visibility | None = None
    stdout_visibility: Visibility | None = None
    extra_data: dict | None = None
    tests: list[SpecTest] | None = None
    leaderboard: list[dict] | None = None


def validate(data: dict) -> SpecResults:
    results = SpecResults.model_validate(data)
    # "score: optional, but required if not on each test case"
    assert results.score is not None or all(t.score is not None for t in results.tests or [])
    for t in results.tests or []:
        assert t.max_score is None or t.score is None or 0 <= t.score <= t.max_score + 1e-9
    return results


def sample_result() -> SubmissionResult:
    def check(i, status, visibility):
        return CheckResult(id=f"{EXERCISE}.c{i}", exercise=EXERCISE, title=f"check {i}",
                           targets=["c_strides"], visibility=visibility,
                           points=2.0 if status == "passed" else 0.0, max_points=2.0,
                           status=status, message="" if status == "passed" else "it broke",
                           hint="think of the strides", output="printed\n")
    return SubmissionResult(
        student="ann", grader_version="0.1.0", grading_s=3.4,
        checks=[check(0, "passed", "visible"), check(1, "failed", "visible"),
                check(2, "timeout", "hidden"), check(3, "passed", "hidden")],
        exercises=[ExerciseResult(exercise=EXERCISE, path="hw/strides_broadcasting.py",
                                  score=4, max_score=8, notes=["cell 3 raised"])],
        notes=["also found a stray file"])


def test_results_follow_gradescopes_format_and_visibility_mapping():
    gs = to_gradescope(sample_result())
    data = json.loads(gs.model_dump_json(exclude_none=True))
    results = validate(data)
    assert results.score == 4 and results.execution_time == 3
    assert [t.number for t in results.tests] == ["1.1", "1.2", "1.3", "1.4"]
    assert [t.status for t in results.tests] == ["passed", "failed", "failed", "passed"]
    assert [t.visibility for t in results.tests] == ["visible", "visible", "after_published",
                                                     "after_published"]
    assert VISIBILITY == {"visible": "visible", "hidden": "after_published"}
    failed = results.tests[2]
    assert failed.name == f"{EXERCISE}: check 2" and "[timeout] it broke" in failed.output
    assert "hint: think of the strides" in failed.output and "printed" in failed.output
    assert "cell 3 raised" in results.output and "also found a stray file" in results.output
    assert results.stdout_visibility == "hidden"  # the grader's log is for staff only


def test_bulk_grading_writes_gradescope_json_per_submission(tmp_path):
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py").read_text())
    (subs / "bob").mkdir()
    (subs / "bob" / f"{EXERCISE}.py").write_text((EXERCISES / f"{EXERCISE}.py").read_text())
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for student, full in (("ann", True), ("bob", False)):
        data = json.loads((tmp_path / "out" / student / "gradescope.json").read_text())
        results = validate(data)
        mine = json.loads((tmp_path / "out" / student / "results.json").read_text())
        assert results.score == mine["score"] and len(results.tests) == len(mine["checks"])
        assert sum(t.max_score for t in results.tests) == pytest.approx(mine["max_score"])
        assert (results.score == mine["max_score"]) is full


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle")
    assignment = root / "hw1.toml"
    assignment.write_text('name = "hw1"\nexercises = [{ name = "strides_broadcasting", '
                          'points = 10 }]\n')
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "gradescope-bundle", "--out",
                           str(root / "dist"), "--assignment", str(assignment)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    assert path == root / "dist" / "hw1-gradescope-autograder.zip"
    return path


def test_bundle_holds_setup_run_autograder_and_this_torchgrade(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "requirements.txt", "assignment.toml"} <= names
        for script in ("setup.sh", "run_autograder"):  # at the root, executable
            mode = z.getinfo(script).external_attr >> 16
            assert mode & stat.S_IXUSR and z.read(script).startswith(b"#!/usr/bin/env bash")
        wheels = [n for n in names if n.startswith("wheels/torchgrade-") and n.endswith(".whl")]
        assert len(wheels) == 1
        requirements = z.read("requirements.txt").decode()
        setup = z.read("setup.sh").decode()
        wheel_names = set(zipfile.ZipFile(z.open(wheels[0])).namelist())
    assert "torch==2.13.0" in requirements.splitlines()
    assert "whl/cpu" in requirements  # the CPU build, not PyPI's CUDA one
    assert "pip install -r requirements.txt" in setup and "wheels/torchgrade-" in setup
    assert "grader/curriculum/checks/test_strides_broadcasting_hidden.py" in wheel_names
    assert "grader/templates/report.html.j2" in wheel_names


@pytest.mark.parametrize("source, full", [((SOLUTIONS / f"{EXERCISE}.py"), True),
                                          ((EXERCISES / f"{EXERCISE}.py"), False)])
def test_run_autograder_grades_the_submission_of_a_fake_autograder_tree(bundle, tmp_path,
                                                                        source, full):
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    run = root / "run_autograder"  # Gradescope copies it there
    run.write_bytes((root / "source" / "run_autograder").read_bytes())
    run.chmod(0o755)
    (root / "submission" / "hw").mkdir(parents=True)
    (root / "submission" / "hw" / f"{EXERCISE}.py").write_text(source.read_text())
    env = {**os.environ, "TORCHGRADE_AUTOGRADER_ROOT": str(root),
           "TORCHGRADE_PYTHON": sys.executable}
    proc = subprocess.run([str(run)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    results = validate(data)
    assert sum(t.max_score for t in results.tests) == pytest.approx(10)  # the bundle's points
    assert (results.score == pytest.approx(10)) is full and (results.score == 0) is not full
    assert {t.visibility for t in results.tests} == {"visible", "after_published"}
    assert all(t.name.startswith(f"{EXERCISE}: ") for t in results.tests)
    assert (root / "results" / "torchgrade-report.html").exists()
