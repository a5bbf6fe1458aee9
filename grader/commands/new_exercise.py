"""`torchgrade new-exercise NAME --course DIR`: scaffold an exercise that `verify` passes at once
(`grader.authoring.scaffold`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from typing import TYPE_CHECKING

from grader.commands.common import full_package_only
from grader.errors import UsageError

if TYPE_CHECKING:
    from grader.authoring.scaffold import Scaffold

COURSE_ENV = "TORCHGRADE_COURSE"


def course_folder(course: Path | None) -> Path:
    """`--course DIR`, else $TORCHGRADE_COURSE. Unlike other commands, no default: the shipped
    curriculum is package data, not a folder to write into."""
    if course is not None:
        return Path(course)
    if os.environ.get(COURSE_ENV):
        return Path(os.environ[COURSE_ENV])
    raise UsageError(f"new-exercise needs the course folder to write into: --course DIR "
                     f"(or {COURSE_ENV})")


def summary(made: Scaffold, name: str) -> str:
    lines = [f"created {made.course / 'course.toml'}" if made.created_course
             else f"added {name} to {made.course / 'course.toml'}"]
    lines += [f"created {made.course / rel}" for rel in made.files]
    lines.append(f"next: edit them, then `torchgrade verify --course {made.course} {name}`")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    full_package_only("new-exercise")  # a student release ships no grader.authoring
    from grader.authoring.scaffold import new_exercise

    made = new_exercise(args.name, course_folder(args.course))
    print(summary(made, args.name))
    return 0
