"""Where the course is, without reading it: the shipped curriculum's folder and the variable
that names another. Imports only the standard library: `torchgrade check`'s warm path
(`grader.checkserver.client`) finds its server by the course's folder before anything heavier
than argparse is imported."""

from __future__ import annotations

import os
from pathlib import Path

COURSE_FILE = "course.toml"
ENV = "TORCHGRADE_COURSE"
# A course's own files: these at its root and everything under these folders. Nothing else in
# its folder belongs to it (the repository's root is the shipped course beside the grader's own
# source, tests and docs; an author's folder may hold a venv), so nothing else is sent to a
# cluster's workers or counted as the course.
COURSE_ROOT_FILES = (COURSE_FILE, "faults.toml")
COURSE_FOLDERS = ("exercises", "solutions", "checks", "probes", "mutants", "samples")


def default_root() -> Path:
    """The shipped curriculum's folder: `grader/curriculum/` once installed (package data),
    the repository's root in a source checkout or an editable install (the root is that
    course folder: course.toml, exercises/, solutions/, checks/ beside grader/)."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "curriculum"
    return installed if installed.is_dir() else package.parent


def course_root(option: str | None) -> Path:
    """The folder a command's `--course` value names (None: TORCHGRADE_COURSE, else the shipped
    curriculum), resolved; whether it is a course is not checked here."""
    chosen = option or os.environ.get(ENV)
    return Path(chosen).expanduser().resolve() if chosen else default_root()
