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
from functools import lru_cache
from importlib import resources
from pathlib import Path

import grader

CHUNK = 1 << 20
# Folders the loader never looks into (grader.submission.SKIP_DIRS) do not change a grade either.
IGNORED_DIRS = {"__pycache__", ".ipynb_checkpoints", ".git"}


def submission_digest(path: Path) -> str:
    """sha256 of the submission's files: relative paths and contents, in a fixed order."""
    path = Path(path)
    h = hashlib.sha256()
    if path.is_file():
        h.update(b"file\0")
        _hash_file(h, path)
        return h.hexdigest()
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(path).as_posix()
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            if full.is_symlink():  # the loader ignores links; their target does not matter
                h.update(b"link\0")
                continue
            _hash_file(h, full)
    return h.hexdigest()


def _hash_file(h, path: Path) -> None:
    try:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        h.update(b"\0ok\0")
    except OSError as exc:  # unreadable: hash the reason, so it regrades once readable
        h.update(f"\0unreadable {exc.errno}\0".encode())


@lru_cache(maxsize=1)
def grader_digest() -> str:
    """The grader version and a digest of every source file that can change a result or a
    report (computed once per process)."""
    h = hashlib.sha256(f"torchgrade {grader.__version__}\0".encode())
    package = Path(grader.__file__).resolve().parent
    # faults.toml: the catalogue decides diagnoses and what a bug-hunt copy is scored on.
    files = sorted(p for p in package.rglob("*") if p.suffix in (".py", ".ini", ".toml")
                   and "__pycache__" not in p.parts)
    for p in files:
        h.update(p.relative_to(package).as_posix().encode() + b"\0")
        _hash_file(h, p)
    # Shipped inside the package when installed, beside it in a checkout: reports are made from
    # the templates, and a check may compute references from the solutions.
    for package_name, suffixes in (("grader.templates", (".j2", ".css")),
                                   ("grader.solutions", (".py",))):
        folder = resources.files(package_name)
        for name, entry in _walk(folder):  # solutions/bughunt/: the bug hunts' fixed scripts
            if name.endswith(suffixes):
                h.update(f"{package_name}/{name}\0".encode() + entry.read_bytes() + b"\0")
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
