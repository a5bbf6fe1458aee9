"""Shared fixtures: one warm worker parent for the whole test session, and graders of sources."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.models import SubmissionResult
from grader.intake.submission import load_submission
from grader.worker.client import Zygote

# A check that records an evidence key not declared in grader.evidence fails (as an internal
# error) in every grading these tests do, subprocesses included
# (grader.checking.plugin.check_evidence).
os.environ.setdefault("TORCHGRADE_STRICT_EVIDENCE", "1")
# `torchgrade check` run as a program leaves a check server behind (grader.checkserver): no
# test's subprocess may, nor use a server of the developer's own. tests/test_check_server.py
# turns it on for its own runs, in a folder of its own.
os.environ["TORCHGRADE_CHECK_SERVER"] = "0"

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"
CHECKS_DIR = REPO / "checks"

# The fast tier's guard: a test marked `fast` that starts a sandbox fails (tests/fast_tier.py).
from fast_tier import pytest_runtest_call, pytest_runtest_setup  # noqa: E402, F401


@pytest.fixture(scope="session")
def zygote():
    with Zygote() as z:
        yield z


@pytest.fixture
def grade_files(tmp_path, zygote):
    """Grade a submission made of {relative path: text or bytes}; returns its SubmissionResult."""

    def grade(files: dict[str, str | bytes], exercises=("strides_broadcasting",),
              student: str = "student") -> SubmissionResult:
        root = tmp_path / student
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        root.mkdir(parents=True, exist_ok=True)
        submission = load_submission(root, exercises=list(exercises), student=student)
        return run_and_score(submission, exercises=list(exercises), zygote=zygote)

    return grade


def statuses(result: SubmissionResult) -> dict[str, str]:
    return {c.id: c.status for c in result.checks}


def not_passed(result: SubmissionResult) -> set[str]:
    return {c.id for c in result.checks if c.status != "passed"}


@pytest.fixture(autouse=True)
def _the_default_course_after_each_test():
    """Every test starts and ends with the default course: a command run in-process with
    `--course` makes its course active and exports TORCHGRADE_COURSE (its job, for the
    processes it starts), which must not reach the tests after it."""
    from grader.course.folder import use_course

    saved = os.environ.get("TORCHGRADE_COURSE")
    yield
    use_course(None)
    if saved is None:
        os.environ.pop("TORCHGRADE_COURSE", None)
    else:
        os.environ["TORCHGRADE_COURSE"] = saved


# --------------------------------------------------------------------------- the student release


@pytest.fixture(scope="session")
def student_release(tmp_path_factory) -> Path:
    """`torchgrade release` of every exercise, built once per test session."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("student") / "release"
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "release", "--out", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="session")
def installed_release(student_release, tmp_path_factory) -> dict[str, str]:
    """The release installed as a student would (`pip install RELEASE`, its dependencies being
    those of this environment), into a folder of its own; returns the environment variables
    that make Python import it instead of the development package."""
    import os
    import subprocess
    import sys

    import shutil

    site = tmp_path_factory.mktemp("student-site")
    copy = tmp_path_factory.mktemp("student-copy") / "release"  # pip builds in the folder
    shutil.copytree(student_release, copy)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(copy)], check=True, capture_output=True, timeout=600)
    return {**os.environ, "PYTHONPATH": str(site), "PATH": f"{site / 'bin'}{os.pathsep}"
            f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_and_score(submission, **kwargs):
    """The result `torchgrade check` would give: the checks run (`grader.running.runner`),
    then scored (`grader.scoring.results`)."""
    from grader.running.runner import run_checks
    from grader.scoring.results import result_of

    return result_of(run_checks(submission, **kwargs))


def cmdline(pid: int) -> str:
    """A process's command line, as one string ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# The end-to-end checks every bug hunt has (verdicts: grader/checking/bughunt_e2e.py). Named here,
# not in the grader, which ships with the student release: hidden checks' names are secrets.
# They score no seeded fault: like every check outside a copy's faults they count only when they
# fail, and a fault that breaks what one of them judges fails it beside its own check.
END_TO_END = ("every_parameter_learns", "splits_are_the_contracts", "samples_keep_their_labels",
              "run_learns_like_the_fixed_script")


def end_to_end_checks(exercise: str) -> set[str]:
    """Ids of the end-to-end checks of a bug hunt."""
    return {f"{exercise}.{name}" for name in END_TO_END}

