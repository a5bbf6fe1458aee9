"""What checks declare, and where a course keeps them.

A check is a pytest test function in a course's `checks/test_<exercise>.py` (visible checks) or
`checks/test_<exercise>_hidden.py` (hidden checks), decorated with `@check(...)`, which records
its points, visibility and targets as a pytest mark. The file names say which exercise a check
belongs to; the split by file lets a student release ship visible checks only. Which course:
`grader.course.folder.active_course()` unless a `checks_dir` is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.course.folder import active_course, exercise_of
from grader.models import CheckInfo, Reveal, Visibility

MARK = "check"


def check(*, points: float, targets: list[str] | str, visibility: Visibility = "hidden",
          timeout: float | None = None, title: str | None = None, reveal: Reveal = "fix",
          autograd: bool = True, forbid: list[str] | tuple[str, ...] = ()):
    """Declare a test function a graded check.

    `targets` are the contract names it exercises; `timeout` the default deadline in seconds of
    each call it makes into the submission; `title` defaults to the docstring's first line;
    `reveal` is how much of a diagnosed fault the student sees: "symptom", "cause" or "fix";
    `autograd=False` switches torch's backward passes off in the worker during each of its
    calls and probes (a gradient computed by `backward()`, `torch.autograd.grad` or `torch.func`
    raises there), for a contract of gradients by hand; `forbid`: fragments of aten operator
    names refused in the worker during its calls and probes (`forbid=["batch_norm"]` refuses
    nn.BatchNorm*, F.batch_norm and every other way to the same operator), for a contract that
    says "without X".
    """

    def decorate(fn):
        doc_title = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        info = CheckInfo(points=points, targets=[targets] if isinstance(targets, str) else targets,
                         visibility=visibility, timeout=timeout, reveal=reveal,
                         autograd=autograd, forbid=list(forbid),
                         title=title or doc_title or fn.__name__.removeprefix("test_"))
        return getattr(pytest.mark, MARK)(info=info)(fn)

    return decorate


def info_of(item: pytest.Item) -> CheckInfo | None:
    mark = item.get_closest_marker(MARK)
    return mark.kwargs["info"] if mark is not None else None


def visibility_of_file(path: Path | str) -> Visibility:
    return "hidden" if Path(path).stem.endswith("_hidden") else "visible"


def check_id(item: pytest.Item) -> str:
    return f"{exercise_of(item.path)}.{item.name.removeprefix('test_')}"


def check_files(exercises: list[str] | None = None, *,
                checks_dir: Path | None = None) -> list[Path]:
    """The check files of `exercises` (default: all) of the active course (or in `checks_dir`),
    in course order, visible before hidden."""
    return active_course().check_files(exercises, checks_dir=checks_dir)


def known_exercises(checks_dir: Path | None = None) -> list[str]:
    """The exercises of the active course: those course.toml lists, in its order, then any other
    with a check file. With `checks_dir`: the exercises with a check file there."""
    course = active_course()
    found = {exercise_of(f) for f in (checks_dir or course.checks_dir).glob("test_*.py")}
    if checks_dir is None:
        found |= set(course.exercises)
    return sorted(found, key=course.order)
