"""Assignments: which exercise modules are graded together, worth how much, due when.

An instructor keeps one small TOML file per assignment:

    name = "hw1"
    due = 2026-03-01T23:59:00+01:00          # optional; a TOML date-time (offset recommended)
    exercises = ["softmax_rows", { name = "attention_scores", points = 20 }]
    roster = "students.csv"                  # optional: student_id,last_name,first_name,email

    overrides = "overrides.csv"              # optional: student,target,points,reason

    timezone = "Europe/Berlin"               # optional: the zone of times written without one

    [late_policy]                            # optional
    penalty_per_day = 0.1                    # fraction of the maximum, per started day late
    max_penalty = 0.5                        # never more than this fraction
    grace_minutes = 15

    [extensions]                             # optional: a due date of their own, per student
    "12345" = 2026-03-04T23:59:00+01:00      # (an id of the outputs or the roster's student_id)

The roster's optional `lms_id` column maps the id the LMS gives (Canvas user id, Moodle
participant id, Blackboard username: the id of `OUT/<id>/`) to the roster's student. An
overrides file line sets what a student gets for one exercise or check (`points` a number), or
adds to it (`+2`, `-1.5`), with the instructor's `reason`; extensions and overrides are
recorded in each result and shown in every output. `timezone` (an IANA name) is the zone of
every time written without one: the LMS's hand-in times that carry none (Blackboard's), `due`
and the extensions; without it they are this machine's local time.

`points` rescales an exercise's checks so that they add up to that many points (each check
keeps its share). Without it an exercise is worth the points its checks declare.

This module validates that file; `grader.scoring.assignment` applies it to a result.
"""

from __future__ import annotations

import csv
import sys
from datetime import date, datetime, time, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)


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
    """One roster line, as nbgrader's `db student import` reads it, plus the LMS's id."""

    student_id: str
    last_name: str = ""
    first_name: str = ""
    email: str = ""
    lms_id: str = ""

    @property
    def full_name(self) -> str:
        """"First Last", or what there is of it."""
        return " ".join(p for p in (self.first_name, self.last_name) if p)


class Override(BaseModel):
    """One line of the overrides file: the instructor's word on one exercise or check."""

    model_config = ConfigDict(extra="forbid")

    student: str = Field(min_length=1)
    target: str = Field(min_length=1, description="an exercise name or a check id")
    points: float
    relative: bool = Field(False, description="`points` is added (+2, -1.5), not set")
    reason: str = ""
    line: int = Field(0, exclude=True, description="its line in the overrides file (0: none); "
                      "not part of any fingerprint")


class Assignment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("", description="shown in the class index and the CSV's `assignment`")
    exercises: list[ExerciseEntry] = Field(min_length=1)
    due: datetime | None = Field(None, description="naive times are in `timezone`")
    late_policy: LatePolicy | None = None
    roster: Path | None = Field(None, description="CSV with student_id, last_name, first_name, "
                                "email, lms_id; relative to the assignment file")
    extensions: dict[str, datetime] = Field({}, description="student -> their own due date")
    overrides: Path | None = Field(None, description="CSV with student, target (exercise or "
                                   "check id), points, reason; relative to the assignment file")
    override_rows: list[Override] = Field([], description="the overrides file, as read")
    timezone: str | None = Field(None, description="IANA zone (\"Europe/Berlin\") of the times "
                                 "written without one (LMS hand-in times, due dates); default: "
                                 "this machine's local zone")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                raise ValueError(f"timezone {value!r} is no known time zone (an IANA name such "
                                 "as \"Europe/Berlin\" or \"America/New_York\")") from None
        return value

    @property
    def zone(self) -> tzinfo | None:
        """The zone of times without one (None: this machine's local zone)."""
        return ZoneInfo(self.timezone) if self.timezone else None

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

    @field_validator("extensions", mode="before")
    @classmethod
    def _dates_mean_end_of_day(cls, value):
        if isinstance(value, dict):
            return {str(k): cls._date_means_end_of_day(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _extensions_are_later(self) -> Assignment:
        # An "extension" before the due date made an on-time student late, silently: a typo.
        if self.due is not None:
            for student, until in self.extensions.items():
                if aware_utc(until, self.zone) < aware_utc(self.due, self.zone):
                    raise ValueError(f"the extension of {student} ({until}) is before the due "
                                     f"date ({self.due}): an extension gives a later one")
        return self

    @property
    def exercise_names(self) -> list[str]:
        return [e.name for e in self.exercises]

    @property
    def due_utc(self) -> datetime | None:
        return aware_utc(self.due, self.zone) if self.due is not None else None

    def points_of(self, exercise: str) -> float | None:
        for entry in self.exercises:
            if entry.name == exercise:
                return entry.points
        return None

    def scoring_key(self) -> str:
        """Everything here that changes every result (what the fingerprint must cover); what
        changes one student's is their `student_key`."""
        key = self.model_dump_json(exclude={"roster", "extensions", "overrides",
                                            "override_rows", "timezone"})
        # (only when set: a file without it keeps the key, and the results, it had)
        return key + (f"\ntimezone {self.timezone}" if self.timezone else "")

    def student_key(self, student: str) -> str:
        """What of this assignment is the student's own (their extension, their overrides):
        part of their fingerprint, so that a changed override regrades them."""
        due = self.extensions.get(student)
        rows = [r.model_dump_json() for r in self.override_rows if r.student == student]
        return f"extension {due.isoformat() if due else ''}\noverrides {rows}"

    def due_of(self, student: str) -> datetime | None:
        """The student's due date: their extension's, else the assignment's (aware, UTC)."""
        due = self.extensions.get(student, self.due)
        return aware_utc(due, self.zone) if due is not None else None

    def with_aliases(self, aliases: dict[str, str]) -> Assignment:
        """This assignment with extensions and overrides keyed by the outputs' ids (a roster's
        student_id becomes the LMS id it maps to, see `read_roster`)."""
        copy = self.model_copy(deep=True)
        copy.extensions = {aliases.get(k, k): v for k, v in self.extensions.items()}
        for row in copy.override_rows:
            row.student = aliases.get(row.student, row.student)
        return copy


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
    if assignment.overrides is not None:
        if not assignment.overrides.is_absolute():
            assignment.overrides = (path.parent / assignment.overrides).resolve()
        assignment.override_rows = read_overrides(assignment.overrides)
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


def read_overrides(path: Path) -> list[Override]:
    """The overrides file: a header `student,target,points,reason` (`exercise` or `check` may
    name the target column); `points` a number (set) or signed (`+2`: added)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise AssignmentError(f"overrides {path}: cannot be read ({exc})") from None
    rows = []
    for n, row in enumerate(csv.DictReader(text.splitlines()), start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        target = row.get("target") or row.get("check") or row.get("exercise") or ""
        points = row.get("points", "")
        if not row.get("student") and not target and not points:
            continue  # a blank line
        try:
            value = float(points)
        except ValueError:
            raise AssignmentError(f"overrides {path}, line {n}: points {points!r} is not a "
                                  "number (e.g. 7, +2 or -1.5)") from None
        if not row.get("student") or not target:
            raise AssignmentError(f"overrides {path}, line {n}: needs a student and a target "
                                  "(an exercise or a check id)")
        rows.append(Override(student=row["student"], target=target, points=value,
                             relative=points[:1] in "+-", reason=row.get("reason", ""),
                             line=n))
    return rows


def read_roster(path: Path) -> dict[str, StudentInfo]:
    """Roster lines by the id the outputs use: the `lms_id` column's when the line has one,
    else `student_id` (as a `safe_id`: a roster's id is a folder's name under OUT); a header
    row names the columns (nbgrader's names)."""
    from grader.intake.submission import safe_id

    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise AssignmentError(f"roster {path}: cannot be read ({exc})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if rows and not {"student_id", "id", "lms_id"} & set(rows[0]):
        raise AssignmentError(f"roster {path}: needs a header with student_id (or id), "
                              "last_name, first_name, email, and optionally lms_id")
    roster = {}
    # Each id names one student: a second row with an lms_id, student_id or email already
    # taken was silently the first row's grade under the second's name, the first gone.
    seen: dict[tuple[str, str], int] = {}
    for line, row in enumerate(rows, start=2):
        sid = (row.get("student_id") or row.get("id") or "").strip()
        lms_id = (row.get("lms_id") or "").strip()
        email = (row.get("email") or "").strip()
        if not (sid or lms_id):
            continue
        for column, value in (("lms_id", lms_id), ("student_id", sid),
                              ("email", email.lower())):
            if value and (column, value) in seen:
                raise AssignmentError(f"roster {path}: rows {seen[column, value]} and {line} "
                                      f"have the same {column} {value!r}: one row per student")
            seen[column, value] = line
        roster[safe_id(lms_id or sid)] = StudentInfo(
            student_id=sid or lms_id, last_name=(row.get("last_name") or "").strip(),
            first_name=(row.get("first_name") or "").strip(), email=email, lms_id=lms_id)
    return roster


def roster_aliases(roster: dict[str, StudentInfo]) -> dict[str, str]:
    """A roster's student_ids (and emails) -> the ids of the outputs, where they differ."""
    aliases = {}
    for key, info in roster.items():
        for other in (info.student_id, info.email):
            if other and other != key and other not in roster:  # (a row's own id is that row)
                aliases[other] = key
    return aliases


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


UNREADABLE_TIME = "does not read as a time"  # in the note of a timestamp.txt that does not


def submission_time(student_path: Path) -> tuple[datetime | None, str | None]:
    """When the student submitted, and a note for the instructor when it cannot be told: from
    `timestamp.txt` in their folder, else from one in a folder of it (nbgrader's exchange keeps
    `<student>/<assignment>/timestamp.txt`; several: the latest). A file that is there but does
    not read as a time is said, not taken as on time in silence (a student's own folder may
    hold one)."""
    folder = Path(student_path)
    found = [folder / "timestamp.txt"]
    if not found[0].is_file():
        try:
            found = sorted(p for p in folder.glob("*/timestamp.txt") if p.is_file())
        except OSError:
            found = []
    times = [(read_timestamp(p.parent), p) for p in found]
    known = [moment for moment, _ in times if moment is not None]
    unread = [p for moment, p in times if moment is None]
    note = None
    if unread:
        names = ", ".join(str(p.relative_to(folder)) for p in unread)
        note = (f"{names} {UNREADABLE_TIME} (ISO 8601, as nbgrader writes it): "
                + ("the other one was used" if known else
                   "not counted late; check when this was submitted"))
    return (max(known) if known else None), note


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


def aware_utc(moment: datetime, zone: tzinfo | None = None) -> datetime:
    """`moment` with a zone: a naive one is in `zone` (None: the machine's local time)."""
    if moment.tzinfo:
        return moment
    return moment.replace(tzinfo=zone) if zone is not None else moment.astimezone()
