"""Assignments: which exercise modules are graded together, worth how much, due when.

An instructor keeps one small TOML file per assignment:

    name = "hw1"
    due = 2026-03-01T23:59:00+01:00          # optional; a TOML date-time (offset recommended)
    exercises = ["strides_broadcasting", { name = "manual_backward", points = 20 }]
    roster = "students.csv"                  # optional: student_id,last_name,first_name,email

    [late_policy]                            # optional
    penalty_per_day = 0.1                    # fraction of the maximum, per started day late
    max_penalty = 0.5                        # never more than this fraction
    grace_minutes = 15

`points` rescales an exercise's checks so that they add up to that many points (each check
keeps its share). Without it an exercise is worth the points its checks declare.

This module validates that file; `grader.scoring.assignment` applies it to a result.
"""

from __future__ import annotations

import csv
import sys
from datetime import date, datetime, time, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class AssignmentError(ValueError):
    """The assignment file cannot be used; the message is one line for the instructor."""


class ExerciseEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    points: float | None = Field(None, gt=0, description="what the exercise is worth; default: "
                                 "the points its checks declare")


class LatePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    penalty_per_day: float = Field(ge=0, le=1, description="fraction of the maximum score "
                                   "taken off per started day after the due time")
    max_penalty: float = Field(1.0, ge=0, le=1, description="largest fraction taken off")
    grace_minutes: float = Field(0.0, ge=0, description="lateness forgiven entirely")


class StudentInfo(BaseModel):
    """One roster line, as nbgrader's `db student import` reads it."""

    student_id: str
    last_name: str = ""
    first_name: str = ""
    email: str = ""


class Assignment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("", description="shown in the class index and the CSV's `assignment`")
    exercises: list[ExerciseEntry] = Field(min_length=1)
    due: datetime | None = Field(None, description="naive times are the machine's local time")
    late_policy: LatePolicy | None = None
    roster: Path | None = Field(None, description="CSV with student_id, last_name, first_name, "
                                "email; relative to the assignment file")

    @field_validator("exercises", mode="before")
    @classmethod
    def _names_or_tables(cls, value):
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("exercises")
    @classmethod
    def _unique(cls, value: list[ExerciseEntry]) -> list[ExerciseEntry]:
        names = [e.name for e in value]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"exercise {name!r} is listed twice")
        return value

    @field_validator("due", mode="before")
    @classmethod
    def _date_means_end_of_day(cls, value):
        if isinstance(value, date) and not isinstance(value, datetime):
            return datetime.combine(value, time(23, 59, 59))
        return value

    @property
    def exercise_names(self) -> list[str]:
        return [e.name for e in self.exercises]

    @property
    def due_utc(self) -> datetime | None:
        return aware_utc(self.due) if self.due is not None else None

    def points_of(self, exercise: str) -> float | None:
        for entry in self.exercises:
            if entry.name == exercise:
                return entry.points
        return None

    def scoring_key(self) -> str:
        """Everything here that changes a result (what the fingerprint must cover)."""
        return self.model_dump_json(exclude={"roster"})


def from_exercises(exercises: list[str], name: str = "") -> Assignment:
    """The assignment `--exercises a,b` stands for: those modules at their declared points."""
    return Assignment(name=name, exercises=[ExerciseEntry(name=e) for e in exercises])


def load_assignment(path: Path) -> Assignment:
    """Read and validate an assignment file; `AssignmentError` says what is wrong, in one line."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AssignmentError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AssignmentError(f"{path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise AssignmentError(f"{path}: not valid TOML ({exc})") from None
    try:
        assignment = Assignment.model_validate(data)
    except ValidationError as exc:
        raise AssignmentError(f"{path}: {describe_errors(exc)}") from None
    if assignment.roster is not None and not assignment.roster.is_absolute():
        assignment.roster = (path.parent / assignment.roster).resolve()
    if not assignment.name:
        assignment.name = path.stem
    return assignment


def describe_errors(exc: ValidationError) -> str:
    """Pydantic's errors as one line: `where: what; where: what`."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "file"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field (check its spelling)"
        elif error["type"] == "missing":
            message = "required field is missing"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def read_roster(path: Path) -> dict[str, StudentInfo]:
    """Roster lines by student id; a header row names the columns (nbgrader's names)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise AssignmentError(f"roster {path}: cannot be read ({exc})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if rows and "student_id" not in rows[0] and "id" not in rows[0]:
        raise AssignmentError(f"roster {path}: needs a header with student_id (or id), "
                              "last_name, first_name, email")
    roster = {}
    for row in rows:
        sid = (row.get("student_id") or row.get("id") or "").strip()
        if sid:
            roster[sid] = StudentInfo(student_id=sid,
                                      last_name=(row.get("last_name") or "").strip(),
                                      first_name=(row.get("first_name") or "").strip(),
                                      email=(row.get("email") or "").strip())
    return roster


def read_timestamp(student_path: Path) -> datetime | None:
    """When the student submitted, from `timestamp.txt` in their folder (the file nbgrader's
    collect step writes); None when there is none or it cannot be read. ISO 8601; a trailing
    ` UTC` (nbgrader) or no zone at all means UTC."""
    from grader.intake.files import read_regular

    try:  # regular files only, and only a line of them (a named pipe must not block)
        text = read_regular(Path(student_path) / "timestamp.txt", 4096)[:4096].decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return parse_timestamp(text)


def parse_timestamp(text: str) -> datetime | None:
    text = text.strip()
    if text.endswith((" UTC", " utc")):
        text = text[:-4].strip()
    text = text.replace("Z", "+00:00") if text.endswith("Z") else text
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def aware_utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.astimezone()  # naive: the machine's local time
