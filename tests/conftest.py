"""Shared fixtures: one warm worker parent for the whole test session, and graders of sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.models import SubmissionResult
from grader.runner import run_checks
from grader.submission import load_submission
from grader.worker.client import Zygote

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"


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
        return run_checks(submission, exercises=list(exercises), zygote=zygote)

    return grade


def statuses(result: SubmissionResult) -> dict[str, str]:
    return {c.id: c.status for c in result.checks}


def not_passed(result: SubmissionResult) -> set[str]:
    return {c.id for c in result.checks if c.status != "passed"}
