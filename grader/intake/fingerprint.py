"""Fingerprints that let a rerun of `torchgrade grade` skip what it already graded.

A submission's fingerprint hashes (1) every file of the submission as found on disk (a student
folder: each file's relative path and bytes; a .zip: its bytes), and (2) the grading: the grader
version and a digest of its source (checks, probes, comparisons, templates: a check fixed in a
development checkout regrades everything), the exercises and their points, the due date and late
policy, and the worker limits. A result whose `fingerprint` equals the one computed now would be
graded the same again.
"""

from __future__ import annotations

import hashlib
import os
import stat
from functools import lru_cache
from importlib import resources
from pathlib import Path

import grader
from grader.course.folder import active_course
from grader.intake.files import open_regular, refusal

CHUNK = 1 << 20
MAX_HASHED_FILE = 256 << 20    # bigger than anything the loader reads (a zip: 200 MB)
MAX_HASHED_BYTES = 512 << 20   # per submission; beyond it files count by size and time
MAX_ENTRIES = 50_000
# Folders the loader never looks into (grader.intake.submission.SKIP_DIRS) do not change a grade
# either.
IGNORED_DIRS = {"__pycache__", ".ipynb_checkpoints", ".git"}


def submission_digest(path: Path) -> str:
    """sha256 of the submission's files: relative paths and contents, in a fixed order.

    Bounded and never blocking: only regular files with one link are opened (see
    `grader.intake.files`; a named pipe, device, socket, link or hard link counts by its kind and
    size), a file over MAX_HASHED_FILE or past MAX_HASHED_BYTES in all counts by its size and
    modification time, and at most MAX_ENTRIES names are looked at."""
    path = Path(path)
    h = hashlib.sha256()
    budget = [MAX_HASHED_BYTES]
    if not path.is_dir():
        h.update(b"file\0")
        _hash_entry(h, path, budget)
        return h.hexdigest()
    seen = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS)
        seen += len(filenames) + len(dirnames)
        if seen > MAX_ENTRIES:
            h.update(b"\0too many files\0")
            break
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(path).as_posix()
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            _hash_entry(h, full, budget)
    return h.hexdigest()


def _hash_entry(h, path: Path, budget: list[int]) -> None:
    """Hash one file of a submission: its bytes when it is a regular file within the budget,
    else what it is (the loader does not read it either, or reads it only within its caps)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        h.update(f"\0missing {exc.errno}\0".encode())
        return
    if refusal(st) is not None or st.st_size > MAX_HASHED_FILE or st.st_size > budget[0]:
        h.update(f"\0{stat.S_IFMT(st.st_mode)} {st.st_nlink > 1} {st.st_size} "
                 f"{st.st_mtime_ns}\0".encode())
        return
    budget[0] -= st.st_size
    try:
        fd, _ = open_regular(path)
        with os.fdopen(fd, "rb") as f:
            left = MAX_HASHED_FILE
            while left > 0 and (chunk := f.read(min(CHUNK, left))):
                h.update(chunk)
                left -= len(chunk)
        h.update(b"\0ok\0")
    except OSError as exc:  # unreadable or refused: hash the reason, so it regrades once readable
        h.update(f"\0unreadable {exc.errno} {exc}\0".encode("utf-8", "backslashreplace"))


def _hash_file(h, path: Path) -> None:
    """Hash one of the grader's own files."""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    h.update(b"\0ok\0")


def grader_digest() -> str:
    """The grader version and a digest of every source file that can change a result or a
    report: the grader's, its templates', and the active course's (computed once per process
    and course)."""
    return _digest(active_course().root)


@lru_cache(maxsize=8)
def _digest(course_root: Path) -> str:
    h = hashlib.sha256(f"torchgrade {grader.__version__}\0".encode())
    package = Path(grader.__file__).resolve().parent
    files = sorted(p for p in package.rglob("*") if p.suffix in (".py", ".ini", ".toml")
                   and "__pycache__" not in p.parts and "curriculum" not in p.parts)
    for p in files:
        h.update(p.relative_to(package).as_posix().encode() + b"\0")
        _hash_file(h, p)
    # Reports are made from the templates (shipped inside the package when installed).
    for name, entry in _walk(resources.files("grader.templates")):
        if name.endswith((".j2", ".css")):
            h.update(f"templates/{name}\0".encode() + entry.read_bytes() + b"\0")
    # The course: its checks and probes, the solutions and stubs they may compute references
    # from, and its catalogue (diagnoses, what a bug-hunt copy is scored on). Not its mutants or
    # samples.
    for part in ("course.toml", "faults.toml", "checks", "probes", "solutions", "exercises"):
        top = course_root / part
        for p in sorted([top] if top.is_file() else top.rglob("*.py") if top.is_dir() else []):
            h.update(p.relative_to(course_root).as_posix().encode() + b"\0")
            _hash_file(h, p)
    return h.hexdigest()


def grading_digest(*, exercises: list[str], scoring: str, limits: str) -> str:
    """What the grading of every submission in one run shares."""
    h = hashlib.sha256(grader_digest().encode())
    for part in ("\0".join(exercises), scoring, limits):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def fingerprint(submission: str, grading: str) -> str:
    return "sha256:" + hashlib.sha256(f"{submission}\0{grading}".encode()).hexdigest()


def _walk(folder, prefix: str = ""):
    """(relative name, file) of every file under a package folder, sorted, recursively."""
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _walk(entry, f"{prefix}{entry.name}/")
        else:
            yield prefix + entry.name, entry
