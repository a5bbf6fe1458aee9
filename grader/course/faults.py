"""The fault catalogue: the ways training goes silently wrong, in one place.

Every entry says what the student sees (symptom), why it happens (cause), what to change (fix),
the exercises it can appear in and the checks that detect it. Diagnoses name entries by `id`;
reports show their text. The catalogue is data (a course's `faults.toml`), validated by the
`Fault` model when it is loaded. The shipped curriculum's catalogue holds the faults the grader's
diagnosis rules know (`grader.scoring.diagnose`); another course inherits those faults (not the
curriculum's bug hunts) and adds its own, or rewords one by giving its id again.

It also holds the bug hunts (`[[bughunt]]`: a fixed training script and the faults its
exercise file is seeded with) and, for every fault that can be seeded into a bug hunt, how:
`[[fault.inject]]` names the script, the check that scores the fault there, and the textual
replacements that turn the fixed script's correct code into the faulty one. That is the one
source of truth for each fault's wrong code: the exercise files and every per-student variant
are the fixed scripts with some of these replacements applied (`grader.course.bughunt`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grader.course.folder import (Course, CourseError, active_course, declared_check_ids,
                                  default_root)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"


class Injection(BaseModel):
    """How a fault is seeded into one bug hunt: `replace` pairs (old, new), each `old` found
    exactly once in the fixed script; `check` is the check of that exercise whose points the
    fault carries (faults sharing a check are alternatives: a copy holds at most one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exercise: str = Field(pattern=r"^bughunt_[a-z0-9_]+$")
    check: str = Field(pattern=r"^[a-z0-9_]+$", description="check name, without the exercise")
    replace: list[tuple[str, str]] = Field(min_length=1)


class Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=ID_PATTERN, description="stable, e.g. grad-not-zeroed")
    title: str
    symptom: str = Field(description="what the student sees")
    cause: str = Field(description="why it happens")
    fix: str = Field(description="what to change")
    exercises: list[str] = Field(min_length=1, description="exercises it can appear in")
    detected_by: list[str] = Field(min_length=1, description="check ids that detect it")
    inject: list[Injection] = Field([], description="how it is seeded into bug hunts")
    masked_by: list[str] = Field([], description="faults that hide this one's symptom (a copy "
                                 "holding both shows only theirs): a variant never holds both")


class BugHunt(BaseModel):
    """A bug-hunt exercise: the fixed script `solutions/<path>`, the student file `<path>`
    (or `<exercise>.py`), and the faults its exercise file holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exercise: str = Field(pattern=r"^bughunt_[a-z0-9_]+$")
    path: str = Field(pattern=r"^bughunt/[a-z0-9_]+\.py$")
    seeded: list[str] = Field(min_length=3, max_length=5)


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fault: list[Fault] = []
    bughunt: list[BugHunt] = []
    # CURRICULUM.md, "Pitfalls the fault catalogue holds", is generated from this list.
    pitfalls: list[str] = Field([], description="fault ids the curriculum promises the catalogue "
                                "holds; a student release ships none")


def load(course: Course | None = None) -> Catalogue:
    """The catalogue of `course` (default: the active one; see the module docstring),
    validated: ids unique, every injection into a known bug hunt (which the fault's `exercises`
    and `detected_by` name), every seeded fault injectable. CourseError when a faults.toml is
    not valid."""
    course, default = course or active_course(), default_root()
    return _merged(_stamp(course.faults_file), None if course.root == default
                   else _stamp(default / "faults.toml"))


def _stamp(path: Path) -> tuple[Path, float] | None:
    return (path, path.stat().st_mtime) if path.is_file() else None


@lru_cache(maxsize=16)
def _merged(own: tuple[Path, float] | None, base: tuple[Path, float] | None) -> Catalogue:
    data = _read(own[0]) if own else Catalogue()
    if base:
        ids = {f.id for f in data.fault}
        inherited = [f.model_copy(update={"inject": []}) for f in _read(base[0]).fault
                     if f.id not in ids]
        data = data.model_copy(update={"fault": inherited + list(data.fault)})
    try:
        return _validated(data)
    except ValueError as exc:
        raise CourseError(f"{own[0] if own else 'faults.toml'}: "
                          f"{str(exc).removeprefix('faults.toml: ')}") from None


def _read(path: Path) -> Catalogue:
    try:
        data = Catalogue.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise CourseError(f"{path}: not a valid fault catalogue ({exc})") from None
    _refuse_unknown_checks(path, data)
    return data


def _refuse_unknown_checks(path: Path, data: Catalogue) -> None:
    """CourseError unless every `detected_by` of the faults in `path` names a check of the
    course `path` belongs to (`exercise.check`, as checks are identified in results): a typo
    there would silently never diagnose. Inherited faults were checked against their own
    course when its faults.toml was read."""
    checks = declared_check_ids(path.parent / "checks")
    for fault in data.fault:
        unknown = [c for c in fault.detected_by if c.split("[")[0] not in checks]
        if unknown:
            raise CourseError(f"{path}: fault {fault.id}: detected_by names {unknown[0]!r}, "
                              "which is no check of this course (a check is named "
                              "<exercise>.<check>: its test function's name without test_)")


def _validated(data: Catalogue) -> Catalogue:
    ids = [f.id for f in data.fault]
    if len(set(ids)) != len(ids):
        raise ValueError("faults.toml: duplicate fault ids")
    hunts = {b.exercise: b for b in data.bughunt}
    if len(hunts) != len(data.bughunt):
        raise ValueError("faults.toml: a bug hunt is listed twice")
    by_id = {f.id: f for f in data.fault}
    for fault in data.fault:
        if set(fault.masked_by) - set(by_id):
            raise ValueError(f"faults.toml: {fault.id} is masked_by an unknown fault")
        seen = set()
        for inj in fault.inject:
            where = f"faults.toml: {fault.id} injected into {inj.exercise}"
            if inj.exercise not in hunts:
                raise ValueError(f"{where}: no such [[bughunt]]")
            if inj.exercise in seen:
                raise ValueError(f"{where} twice")
            seen.add(inj.exercise)
            if inj.exercise not in fault.exercises:
                raise ValueError(f"{where}, which its `exercises` do not list")
            if f"{inj.exercise}.{inj.check}" not in fault.detected_by:
                raise ValueError(f"{where}: `detected_by` lacks {inj.exercise}.{inj.check}")
    for hunt in data.bughunt:
        for fid in hunt.seeded:
            if fid not in by_id or hunt.exercise not in {i.exercise for i in by_id[fid].inject}:
                raise ValueError(f"faults.toml: {hunt.exercise} is seeded with {fid}, which "
                                 "has no injection there")
    return data


def catalogue() -> dict[str, Fault]:
    """Every fault by id (validated; ids unique)."""
    return {f.id: f for f in load().fault}


def bughunts() -> dict[str, BugHunt]:
    """Every bug hunt by exercise id."""
    return {b.exercise: b for b in load().bughunt}
