"""Where a user's check server listens, and what it must agree with a client on to answer.

Standard library only: the client computes all of this before it imports anything heavier, on
every `torchgrade check`, in a few milliseconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
from pathlib import Path

from grader.course.location import ENV as COURSE_ENV

SERVER_ENV = "TORCHGRADE_CHECK_SERVER"  # "0": neither use a server nor leave one
DIR_ENV = "TORCHGRADE_CHECK_SERVER_DIR"  # the servers' folder (default: see `runtime_dir`)
IDLE_ENV = "TORCHGRADE_CHECK_SERVER_IDLE"  # seconds without a request before a server exits
IDLE_SECONDS = 15 * 60
# Settings that do not change an answer: the server's own, and the course folder's variable
# (`--course` sets it in the client; the course root is part of the key and the name already).
OWN_SETTINGS = {SERVER_ENV, DIR_ENV, IDLE_ENV, COURSE_ENV}

# What a server has imported and a client would run: a change to any of these files means the
# server answers with other code than the client's installation holds.
DEPENDENCIES = ("torch", "numpy", "pytest", "pydantic", "jinja2", "nbformat")
# The parts of a course folder that `check` reads (mutants and samples it never does).
COURSE_PARTS = ("course.toml", "faults.toml", "checks", "exercises", "solutions")


MAX_IDLE_SECONDS = 7 * 24 * 3600  # IDLE_ENV beyond this (or not a number) means the default


def enabled() -> bool:
    """Whether `torchgrade check` may use a server or leave one (SERVER_ENV not "0", "no",
    "off" or "false", in any case)."""
    return os.environ.get(SERVER_ENV, "1").strip().lower() not in ("0", "no", "off", "false")


def idle_seconds() -> float:
    """IDLE_ENV when it is a number of seconds from 1 to MAX_IDLE_SECONDS, else IDLE_SECONDS."""
    try:
        value = float(os.environ.get(IDLE_ENV, IDLE_SECONDS))
    except ValueError:
        return IDLE_SECONDS
    return value if 1 <= value <= MAX_IDLE_SECONDS else IDLE_SECONDS


def describe_idle() -> str:
    """The idle time in words: "15 idle minutes", "20 idle seconds"."""
    seconds = idle_seconds()
    if seconds < 120:
        return f"{seconds:g} idle seconds"
    return f"{round(seconds / 60)} idle minutes"


def runtime_dir() -> Path | None:
    """This user's servers' folder, made if missing (mode 0700): DIR_ENV, else
    $XDG_RUNTIME_DIR/torchgrade, else /tmp/torchgrade-<uid>. None when it is not safely ours
    (another owner, or open to others): then no server is used or left."""
    chosen = os.environ.get(DIR_ENV)
    if chosen:
        path = Path(os.path.abspath(chosen))  # a server runs elsewhere: the same folder
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "torchgrade"
    else:
        path = Path("/tmp") / f"torchgrade-{os.geteuid()}"
    try:
        path.mkdir(mode=0o700, parents=False, exist_ok=True)
        info = path.lstat()
    except OSError:
        return None
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid()
            or info.st_mode & 0o077):
        return None
    return path


def server_name(course_root: Path) -> str:
    """The file name (without suffix) of the server of this Python environment and this
    course."""
    text = f"{_python()}\0{course_root}"
    return "check-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _python() -> str:
    """This Python environment, however it was started (`python`, `python3` and a console
    script's shebang name one interpreter): its prefix and the interpreter's real file."""
    return f"{sys.prefix}\0{os.path.realpath(sys.executable)}"


def version_key(course_root: Path) -> str:
    """A digest of everything a server's answer depends on besides the request: this Python,
    torchgrade's files, the course's, the dependencies' (their top-level module's file) and
    the TORCHGRADE_* settings. Stamps, not contents: each file's path, size and mtime."""
    import grader

    digest = hashlib.sha256()
    digest.update(f"{_python()}\0{sys.version}\0{course_root}\0".encode())
    package = Path(grader.__file__).resolve().parent
    for root in [package, *_templates(package)]:
        _stamp_tree(digest, root)
    for part in COURSE_PARTS:
        _stamp_tree(digest, course_root / part)
    for name in DEPENDENCIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        _stamp_file(digest, spec.origin if spec is not None and spec.origin else name)
    for name in sorted(os.environ):
        if name.startswith("TORCHGRADE_") and name not in OWN_SETTINGS:
            digest.update(f"{name}={os.environ[name]}\0".encode())
    return digest.hexdigest()


def _templates(package: Path) -> list[Path]:
    """The report templates' folder of a source checkout (installed, it is in the package)."""
    outside = package.parent / "templates"
    return [outside] if outside.is_dir() and not (package / "templates").is_dir() else []


def _stamp_tree(digest, root: Path) -> None:
    if not root.is_dir():
        _stamp_file(digest, str(root))
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            _stamp_file(digest, os.path.join(folder, name))


def _stamp_file(digest, path: str) -> None:
    try:
        info = os.stat(path)
        digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    except OSError:
        digest.update(f"{path}\0missing\0".encode())
