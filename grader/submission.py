"""Find and read a student's exercise files: a folder, a single .py/.ipynb, or a .zip.

`load_submission` never raises for bad student input: every problem becomes a note (grading goes
on) or a module's `fatal` message (its checks fail with that message). Nothing is executed here;
the grader only decodes, parses and compiles, to report syntax errors with their line.
"""

from __future__ import annotations

import io
import os
import tokenize
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grader.bughunt import FOLDER as BUGHUNT_FOLDER, exercise_for
from grader.models import ModuleSource, SourceChunk, Submission
from grader.notebook import NotebookError, notebook_chunks

MAX_SOURCE_BYTES = 2 << 20
MAX_NOTEBOOK_BYTES = 50 << 20
MAX_DEPTH = 3  # a student folder, hw1/, and one more level (zip roots often add one)
SKIP_DIRS = {"__pycache__", "__MACOSX", ".ipynb_checkpoints", ".git", "node_modules"}
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class Found:
    """A candidate exercise file: where it is and how to read its bytes."""

    relpath: str
    depth: int
    size: int
    read: Callable[[], bytes]


def not_submitted(exercise: str) -> str:
    """The message for an exercise file a submission does not hold, naming what was looked for."""
    from grader.bughunt import is_bughunt, student_path

    names = f"{exercise}.py or {exercise}.ipynb"
    if is_bughunt(exercise):
        names = f"{student_path(exercise)} (or {names})"
    return f"file not submitted: expected {names}"


def student_id_for(path: Path) -> str:
    path = Path(path)
    if path.is_dir():
        return path.resolve().name
    if path.suffix == ".zip":
        return path.stem
    return path.resolve().parent.name or "student"


def load_submission(path: Path, *, exercises: Iterable[str], student: str | None = None
                    ) -> Submission:
    """Read every exercise module of `exercises` found under `path`.

    A module not found is simply absent from `Submission.modules`; the caller decides what a
    missing file costs.
    """
    path = Path(path)
    wanted = list(exercises)
    sub = Submission(student=student or student_id_for(path), root=str(path))
    candidates: list[Found] = []
    if path.is_dir():
        candidates = _scan_dir(path, sub.notes)
    elif path.suffix == ".zip":
        candidates = _scan_zip(path, "", sub.notes)
    elif path.suffix in SUFFIXES:
        size = path.stat().st_size
        # bughunt/regression.py handed in alone is still the bug hunt "bughunt_regression".
        name = (f"{BUGHUNT_FOLDER}/{path.name}" if path.resolve().parent.name == BUGHUNT_FOLDER
                else path.name)
        candidates = [Found(name, 0, size, path.read_bytes)]
        if exercise_for(name, wanted) is None:
            sub.notes.append(f"{path.name} is not an exercise file: name it after the exercise, "
                             f"one of {', '.join(f'{w}.py' for w in wanted)}")
    else:
        sub.notes.append(f"{path.name} is not a .py, .ipynb or .zip file")
    by_exercise: dict[str, list[Found]] = {}
    for found in candidates:
        exercise = exercise_for(found.relpath, wanted)
        if exercise is not None:
            by_exercise.setdefault(exercise, []).append(found)
    for exercise in wanted:
        options = sorted(by_exercise.get(exercise, []),
                         key=lambda f: (rank_depth(f), not f.relpath.endswith(".py"), f.relpath))
        if not options:
            continue
        chosen = options[0]
        module = read_module(exercise, chosen)
        if len(options) > 1:
            others = ", ".join(f.relpath for f in options[1:])
            module.notes.append(f"graded {chosen.relpath}; also found {others} (ignored)")
        sub.modules[exercise] = module
    return sub


def rank_depth(found: Found) -> int:
    """How deep a file lies, for choosing among several files of one exercise (shallowest
    first, then .py before .ipynb): a bug hunt's `bughunt/` folder is part of its file's name
    (`bughunt/regression.py`), so `exercises/bughunt/regression.py` ranks with
    `exercises/strides_broadcasting.py`, before `notebooks/bughunt_regression.ipynb` as a
    module's `.py` comes before its notebook (a release folder holds both)."""
    return found.depth - (PurePosixPath(found.relpath).parent.name == BUGHUNT_FOLDER)


def _scan_dir(root: Path, notes: list[str]) -> list[Found]:
    found: list[Found] = []
    root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel = Path(dirpath).relative_to(root)
        depth = len(rel.parts)
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith(".") and depth < MAX_DEPTH)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            relpath = (rel / name).as_posix()
            if name.startswith(".") or not name.endswith(SUFFIXES + (".zip",)):
                continue
            if full.is_symlink():
                notes.append(f"{relpath} is a symbolic link and was ignored")
                continue
            if name.endswith(".zip"):
                found += _scan_zip(full, relpath, notes, depth)
            else:
                found.append(Found(relpath, depth, full.stat().st_size, full.read_bytes))
    return found


def _scan_zip(path: Path, relname: str, notes: list[str], depth0: int = 0) -> list[Found]:
    label = relname or path.name
    try:
        archive = zipfile.ZipFile(path)
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        notes.append(f"{label} is not a readable zip file ({exc})")
        return []
    found = []
    for info in infos:
        parts = PurePosixPath(info.filename).parts
        if (info.is_dir() or not parts or any(p in SKIP_DIRS or p.startswith(".") for p in parts)
                or not info.filename.endswith(SUFFIXES) or ".." in parts):
            continue
        depth = depth0 + len(parts) - 1
        if depth > MAX_DEPTH:
            continue

        def read(info=info) -> bytes:
            with zipfile.ZipFile(path) as z, z.open(info) as member:
                return member.read(MAX_NOTEBOOK_BYTES + 1)

        found.append(Found(f"{label}/{info.filename}", depth, info.file_size, read))
    return found


def read_module(exercise: str, found: Found) -> ModuleSource:
    """Decode and syntax-check one exercise file (never raises for bad content)."""
    kind = "ipynb" if found.relpath.endswith(".ipynb") else "py"
    module = ModuleSource(exercise=exercise, path=found.relpath, kind=kind)
    limit = MAX_NOTEBOOK_BYTES if kind == "ipynb" else MAX_SOURCE_BYTES
    if found.size > limit:
        module.fatal = f"{found.relpath} is larger than {limit >> 20} MB and was not graded"
        return module
    try:
        data = found.read()
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError) as exc:
        module.fatal = f"{found.relpath} could not be read ({exc})"
        return module
    if len(data) > limit:
        module.fatal = f"{found.relpath} is larger than {limit >> 20} MB and was not graded"
        return module
    if b"\x00" in data:
        module.fatal = f"{found.relpath} looks like a binary file, not {'a notebook' if kind == 'ipynb' else 'Python source'}"
        return module
    text, note = decode_text(data, found.relpath)
    if note:
        module.notes.append(note)
    if not text.strip():
        module.notes.append(f"{found.relpath} is empty")
    if kind == "py":
        module.chunks = [SourceChunk(code=text, filename=found.relpath, label=found.relpath)]
    else:
        try:
            module.chunks, notes = notebook_chunks(text, found.relpath)
        except NotebookError as exc:
            module.fatal = f"{found.relpath}: {exc}"
            return module
        module.notes += notes
    usable = []
    for chunk in module.chunks:
        problem = syntax_problem(chunk)
        if problem is None:
            usable.append(chunk)
        elif kind == "py":
            module.fatal = problem
            return module
        else:
            module.notes.append(problem + "; the cell was skipped")
    module.chunks = usable
    return module


def decode_text(data: bytes, name: str) -> tuple[str, str | None]:
    """Source text by Python's own rules (BOM, coding cookie, else UTF-8); undecodable bytes are
    replaced and the note says where the first one was."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError):
        encoding = "utf-8"
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        line = data[:exc.start].count(b"\n") + 1
        return data.decode(encoding, "replace"), (
            f"{name} is not valid UTF-8 (byte 0x{bad} on line {line}); undecodable bytes were "
            "replaced with \N{REPLACEMENT CHARACTER}. Save the file as UTF-8.")


def syntax_problem(chunk: SourceChunk) -> str | None:
    """A student-readable syntax error for the chunk, or None when it compiles."""
    try:
        compile(chunk.code, chunk.filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
        text = (exc.text or "").rstrip("\n")
        caret = ""
        if text and exc.offset:
            caret = "\n    " + text + "\n    " + " " * (max(exc.offset, 1) - 1) + "^"
        return f"{type(exc).__name__} in {chunk.filename}, {where}: {exc.msg}{caret}"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return f"{chunk.filename} could not be compiled: {type(exc).__name__}: {exc}"
    return None
