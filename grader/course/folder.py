"""STAND-IN for the course loader of issue 19 (branch h-verify only).

The lead writes the real `grader/course/folder.py` (spec: /work/wt/COURSE19.md) in parallel;
this file implements only the names `grader.authoring.verify` needs, with the same signatures,
so that `torchgrade verify` can be built and tested before the merge. Replace it with the real
one on merge (keep the real one's; nothing here is meant to survive).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.course.registry import check_files as registry_check_files
from grader.errors import UsageError


class CourseError(UsageError):
    """A course folder that is not one: one clear line."""


@dataclass(frozen=True)
class Equivalent:
    exercise: str
    change: str   # the change as `verify` prints it, or a generated mutant's id
    reason: str


@dataclass(frozen=True)
class DeclaredMutant:
    exercise: str
    name: str
    path: Path
    fails: frozenset[str]       # check ids "exercise.check_name"
    diagnoses: frozenset[str]   # fault ids

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Course:
    root: Path
    name: str
    exercises: tuple[str, ...]
    equivalent: tuple[Equivalent, ...] = ()
    # Stand-in only: the shipped curriculum is not a course folder yet in this branch, so its
    # folders can be given one by one (None: the course layout under `root`).
    layout: dict[str, Path] = field(default_factory=dict, compare=False)

    def _dir(self, name: str) -> Path:
        return self.layout.get(name, self.root / name)

    @property
    def exercises_dir(self) -> Path:
        return self._dir("exercises")

    @property
    def solutions_dir(self) -> Path:
        return self._dir("solutions")

    @property
    def checks_dir(self) -> Path:
        return self._dir("checks")

    @property
    def mutants_dir(self) -> Path:
        return self._dir("mutants")

    @property
    def samples_dir(self) -> Path:
        return self._dir("samples")

    @property
    def faults_file(self) -> Path:
        return self.layout.get("faults.toml", self.root / "faults.toml")

    def student_file(self, exercise: str) -> str:
        if exercise.startswith("bughunt_"):
            return f"bughunt/{exercise.removeprefix('bughunt_')}.py"
        return f"{exercise}.py"

    def stub(self, exercise: str) -> Path:
        return self.exercises_dir / self.student_file(exercise)

    def solution(self, exercise: str) -> Path:
        return self.solutions_dir / self.student_file(exercise)

    def check_files(self, exercises=None) -> list[Path]:
        return registry_check_files(list(exercises) if exercises is not None else None,
                                    checks_dir=self.checks_dir)

    def mutants(self, exercise: str) -> list[DeclaredMutant]:
        folder = self.mutants_dir / exercise
        return [parse_mutant(exercise, p) for p in sorted(folder.glob("*.py"))] \
            if folder.is_dir() else []


def parse_mutant(exercise: str, path: Path) -> DeclaredMutant:
    """Line 1 `# must fail: a, b` (check names without `test_`), optional line 2
    `# diagnoses: fault-id, ...`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head = lines[0] if lines else ""
    if not head.startswith("# must fail:"):
        raise CourseError(f"{path}: line 1 must be `# must fail: <check>, <check>`")
    fails = _names(head.removeprefix("# must fail:"))
    diagnoses: list[str] = []
    if len(lines) > 1 and lines[1].startswith("# diagnoses:"):
        diagnoses = _names(lines[1].removeprefix("# diagnoses:"))
    return DeclaredMutant(exercise=exercise, name=path.stem, path=path,
                          fails=frozenset(f"{exercise}.{c.removeprefix('test_')}" for c in fails),
                          diagnoses=frozenset(diagnoses))


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def load_course(root: Path | str) -> Course:
    root = Path(root)
    toml = root / "course.toml"
    if not toml.is_file():
        raise CourseError(f"{root} is no course folder: it has no course.toml")
    try:
        data = tomllib.loads(toml.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CourseError(f"{toml}: {exc}") from None
    exercises = data.get("exercises")
    if not isinstance(exercises, list) or not all(isinstance(e, str) for e in exercises):
        raise CourseError(f"{toml}: `exercises` must be a list of exercise names")
    equivalent = []
    for i, entry in enumerate(data.get("equivalent", [])):
        try:
            equivalent.append(Equivalent(exercise=entry["exercise"], change=entry["change"],
                                         reason=entry["reason"]))
        except (KeyError, TypeError):
            raise CourseError(f"{toml}: [[equivalent]] number {i + 1} needs exercise, change "
                              "and reason") from None
    return Course(root=root, name=str(data.get("name", root.name)), exercises=tuple(exercises),
                  equivalent=tuple(equivalent))


def default_course() -> Course:
    """Stand-in: the shipped exercises where they are in this branch."""
    from grader.course.registry import CHECKS_DIR, known_exercises

    repo = CHECKS_DIR.parents[1]
    return Course(root=repo, name="torchgrade", exercises=tuple(known_exercises()),
                  layout={"exercises": repo / "exercises", "solutions": repo / "solutions",
                          "checks": CHECKS_DIR, "mutants": repo / "curriculum-mutants"})


_ACTIVE: list[Course] = []


def active_course() -> Course:
    if _ACTIVE:
        return _ACTIVE[-1]
    env = os.environ.get("TORCHGRADE_COURSE")
    return load_course(env) if env else default_course()


def use_course(course: Course) -> None:
    _ACTIVE[:] = [course]
