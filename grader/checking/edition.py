"""Which torchgrade this is: the full package, or a student release built by `torchgrade release`.

A student release carries `grader/student_release.json` (written by `grader.release.build`): when it
was built, for which exercises, the title, points and targets of every hidden check (all a
student may know about them before grading), and the versions its recorded reference values
were computed with. The full package has no such file.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from grader.intake.submission import RELEASE_MARKER
from grader.models import PendingCheck  # torch-free: see its docstring

RELEASE_FILE = Path(__file__).resolve().parent.parent / RELEASE_MARKER


class StudentRelease(BaseModel):
    version: str
    built_at: datetime
    exercises: list[str]
    hidden: list[PendingCheck]
    recorded_with: dict[str, str] = {}


@lru_cache(maxsize=1)
def student_release() -> StudentRelease | None:
    """This release's description, or None in the full package."""
    if not RELEASE_FILE.is_file():
        return None
    return StudentRelease.model_validate_json(RELEASE_FILE.read_text(encoding="utf-8"))


def hidden_in_release(exercises: list[str], targets: set[str] | None = None) -> list[PendingCheck]:
    """The hidden checks of `exercises` (those with one of `targets`, if given) in a release."""
    release = student_release()
    if release is None:
        return []
    return [p for p in release.hidden if p.exercise in exercises
            and (targets is None or targets & set(p.targets))]
