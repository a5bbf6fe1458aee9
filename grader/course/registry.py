"""Where checks live and what they declare.

A check is a pytest test function in `grader/checks/test_<exercise>.py` (visible checks) or
`grader/checks/test_<exercise>_hidden.py` (hidden checks), decorated with `@check(...)`, which
records its points, visibility and targets as a pytest mark. The file names say which exercise a
check belongs to; the split by file lets a student release ship visible checks only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.models import CheckInfo, Reveal, Visibility

CHECKS_DIR = Path(__file__).resolve().parent.parent / "checks"
MARK = "check"
# Curriculum order (CURRICULUM.md follows it); exercises found in checks/ but not listed sort
# after these.
CURRICULUM_ORDER = ["strides_broadcasting", "manual_backward", "parameters", "training_loops",
                    "bughunt_regression", "bughunt_classifier", "bughunt_finetune",
                    "bughunt_pipeline"]


def check(*, points: float, targets: list[str] | str, visibility: Visibility = "hidden",
          timeout: float | None = None, title: str | None = None, reveal: Reveal = "fix"):
    """Declare a test function a graded check.

    `targets` are the contract names it exercises; `timeout` the default deadline in seconds of
    each call it makes into the submission; `title` defaults to the docstring's first line;
    `reveal` is how much of a diagnosed fault the student sees: "symptom", "cause" or "fix".
    """

    def decorate(fn):
        doc_title = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        info = CheckInfo(points=points, targets=[targets] if isinstance(targets, str) else targets,
                         visibility=visibility, timeout=timeout, reveal=reveal,
                         title=title or doc_title or fn.__name__.removeprefix("test_"))
        return getattr(pytest.mark, MARK)(info=info)(fn)

    return decorate


def info_of(item: pytest.Item) -> CheckInfo | None:
    mark = item.get_closest_marker(MARK)
    return mark.kwargs["info"] if mark is not None else None


def exercise_of(path: Path | str) -> str:
    stem = Path(path).stem.removeprefix("test_")
    return stem.removesuffix("_hidden")


def visibility_of_file(path: Path | str) -> Visibility:
    return "hidden" if Path(path).stem.endswith("_hidden") else "visible"


def check_id(item: pytest.Item) -> str:
    return f"{exercise_of(item.path)}.{item.name.removeprefix('test_')}"


def check_files(exercises: list[str] | None = None, *, checks_dir: Path = CHECKS_DIR) -> list[Path]:
    files = sorted(checks_dir.glob("test_*.py"))
    if exercises is not None:
        files = [f for f in files if exercise_of(f) in exercises]
    return sorted(files, key=lambda f: (_order(exercise_of(f)), visibility_of_file(f) == "hidden"))


def known_exercises(checks_dir: Path = CHECKS_DIR) -> list[str]:
    return sorted({exercise_of(f) for f in checks_dir.glob("test_*.py")}, key=_order)


def _order(exercise: str) -> tuple[int, str]:
    return (CURRICULUM_ORDER.index(exercise) if exercise in CURRICULUM_ORDER
            else len(CURRICULUM_ORDER), exercise)
