"""Which checks a grading session runs: all of them (bulk grading), or a student's local choice.

`CheckSelection` is a pytest plugin handed to `grader.running.runner.run_checks(select=...)`. It
keeps the visible checks (and the hidden ones when `hidden`), optionally only those whose targets
include one of `targets` (a notebook's "check your work" cell for one function), and remembers
every hidden check it left out as a `PendingCheck`: its title, points and targets, which is all
a student may learn about it before grading. Checks are deselected after collection, so a
deselected check never runs and never calls into the submission.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Collection
from pathlib import Path

import pytest
from pydantic import BaseModel

# PendingCheck lives in grader.models (torch-free) and is re-exported here for its users.
from grader.models import CheckInfo, PendingCheck  # noqa: F401
from grader.checking.plugin import prepare_checks, session_args
from grader.course.folder import active_course
from grader.course.registry import check_files, check_id, exercise_of, info_of


def counts_before_grading(exercise: str, check_name: str) -> bool:
    """Whether a hidden check counts toward the score of the exercise file as handed out."""
    from grader.course.bughunt import is_bughunt, scores_seeded_fault

    return not is_bughunt(exercise) or scores_seeded_fault(exercise, check_name)


class CheckSelection:
    def __init__(self, *, hidden: bool = False, targets: Collection[str] | None = None):
        self.hidden = hidden
        self.targets = set(targets) if targets else None
        self.pending: list[PendingCheck] = []
        self.selected = 0
        self.matched: set[str] = set()  # the targets asked for that some check is about
        self.offered: set[str] = set()  # what the checks that may run are about (to name them)

    def wants_targets(self, targets: Collection[str]) -> bool:
        return self.targets is None or bool(self.targets & set(targets))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        keep, drop = [], []
        for item in items:
            info = info_of(item)
            if info is not None and self.targets is not None:
                self.matched |= self.targets & set(info.targets)
            if info is not None and (info.visibility == "visible" or self.hidden):
                self.offered |= set(info.targets)
            if info is None or not self.wants_targets(info.targets):
                drop.append(item)
            elif info.visibility == "hidden" and not self.hidden:
                drop.append(item)
                exercise = exercise_of(item.path)
                self.pending.append(PendingCheck(
                    exercise=exercise, title=info.title, points=info.points,
                    targets=list(info.targets),
                    counted=counts_before_grading(exercise, item.name.removeprefix("test_"))))
            else:
                keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        self.selected = len(keep)


class CollectedCheck(BaseModel):
    id: str
    exercise: str
    name: str  # the test function's name
    info: CheckInfo


class _Collector:
    def __init__(self):
        self.found: list[CollectedCheck] = []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            info = info_of(item)
            if info is not None:
                self.found.append(CollectedCheck(id=check_id(item), exercise=exercise_of(item.path),
                                                 name=item.name, info=info))


def collect_checks(exercises: list[str] | None = None, *,
                   checks_dir: Path | None = None) -> list[CollectedCheck]:
    """Every check of `exercises` (default: all) as pytest collects it, without running any:
    what a check file declares, including checks it generates or parametrizes."""
    collector = _Collector()
    checks_dir = checks_dir or active_course().checks_dir
    files = check_files(exercises, checks_dir=checks_dir)
    if not files:
        return []
    prepare_checks(checks_dir)
    args = session_args(files, checks_dir, collect_only=True)
    with contextlib.redirect_stdout(io.StringIO()):
        code = pytest.main(args, plugins=[collector])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise RuntimeError(f"the checks of {exercises or 'every exercise'} could not be "
                           f"collected (pytest exit code {int(code)})")
    return collector.found
