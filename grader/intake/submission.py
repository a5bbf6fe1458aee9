"""Find and read a student's exercise files: a folder, a single .py/.ipynb, or a .zip.

`load_submission` never raises for bad student input: every problem becomes a note (grading goes
on) or a module's `fatal` message (its checks fail with that message). Nothing is executed here;
the grader only decodes, parses and compiles, to report syntax errors with their line.
"""

from __future__ import annotations

import ast
import codecs
import hashlib
import inspect
import io
import logging
import os
import re
import stat
import sys
import tokenize
import warnings
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePath, PurePosixPath

from grader.course.bughunt import FOLDER as BUGHUNT_FOLDER, exercise_for
from grader.intake.files import (MAX_NAME_CHARS, MAX_PATH_CHARS, Refused, member_name,
                                 open_regular, overlong, read_regular, refusal, zip_entry_bound)
from grader.models import ModuleSource, SourceChunk, Submission
from grader.intake.budget import AnalysisBudget, memory_budget, parse
from grader.intake.notebook import NotebookError, notebook_chunks

MAX_SOURCE_BYTES = 2 << 20
MAX_NOTEBOOK_BYTES = 50 << 20
MAX_FILES = 20_000          # files and folders looked at in one student folder
MAX_ZIP_FILE_BYTES = 200 << 20
MAX_ZIP_ENTRIES = 20_000    # a whole project with its .venv has fewer
MAX_ZIP_LISTING_BYTES_PER_ENTRY = 200  # a listing larger than this per allowed entry is refused
MAX_ZIP_BYTES = 1 << 30     # uncompressed, all entries
MAX_ZIP_RATIO = 200         # uncompressed / compressed, per member over 1 MB
MAX_DEPTH = 3  # a student folder, hw1/, and one more level (zip roots often add one)
SKIP_DIRS = {"__pycache__", "__MACOSX", ".ipynb_checkpoints", ".git", "node_modules"}
# The file a student release's grader package holds (`grader.checking.edition`): a folder with
# it is the grader a release folder ships, never the student's work. Its probes, checks and
# stubs share the exercises' names, and every exercise's note listed them as files not graded.
RELEASE_MARKER = "student_release.json"
SUFFIXES = (".py", ".ipynb")


def suffix_of(name: str | PurePath) -> str:
    """A file name's suffix in lower case: `ALICE.ZIP` and `Clip_Norm.PY` are what they say
    (Windows and some LMSs upper-case names)."""
    return PurePosixPath(name).suffix.lower()

log = logging.getLogger("torchgrade")


@dataclass(frozen=True)
class Found:
    """A candidate exercise file: where it is and how to read at most `limit` + 1 of its bytes."""

    relpath: str
    depth: int
    size: int
    read: Callable[[int], bytes]


def not_submitted(exercise: str) -> str:
    """The message for an exercise file a submission does not hold, naming what was looked for."""
    from grader.course.bughunt import is_bughunt, student_path

    names = f"{exercise}.py or {exercise}.ipynb"
    if is_bughunt(exercise):
        names = f"{student_path(exercise)} (or {names})"
    return f"file not submitted: expected {names}"


# --------------------------------------------------------------------------- student ids

# Names of the class outputs at the top of OUT (grader.outputs.exports writes them); every other
# name there starts with "." (the lock, the marker, temporary files), which no student id does.
INDEX, GRADES, CANVAS_GRADES, MOODLE_GRADES = ("index.html", "grades.csv", "canvas_grades.csv",
                                              "moodle_grades.csv")
# `torchgrade similarity`'s, beside them (grader.outputs.similarity writes them)
SIMILARITY_CSV, SIMILARITY_PAGE = "similarity.csv", "similarity.html"
# (a student folder of one of these names crashed every run at the gradebook's own write)
CLASS_FILES = (INDEX, GRADES, CANVAS_GRADES, MOODLE_GRADES, SIMILARITY_CSV, SIMILARITY_PAGE)
# Written into OUT by every `torchgrade grade` run: `grade` refuses to take a folder holding it
# as SUBMISSIONS (grading result folders as students would overwrite every real grade).
OUT_MARKER = ".torchgrade-output"
MAX_ID = 120  # characters; a longer name keeps its start and gets a digest of the whole


def safe_id(name: str) -> str:
    """A student id made from a folder or file name as `os.listdir` gives it: printable, valid
    UTF-8, never a class output's name or a dot-name, and reversible (`%XX` stands for the byte
    XX: undecodable bytes, unprintable characters, "%" itself, a leading ".", the dots of a
    reserved name); only names over MAX_ID characters lose information (they end in a digest)."""
    try:
        raw = os.fsencode(name)
    except UnicodeError:  # a lone surrogate os.listdir cannot produce; still an id
        raw = name.encode("utf-8", "surrogatepass")
    text = raw.decode("utf-8", "surrogateescape")
    out = []
    for ch in text:
        if ch == "%" or ch in "/\\" or not ch.isprintable():
            out += [f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape")]
        else:
            out.append(ch)
    sid = "".join(out)
    if sid.startswith("."):
        sid = "%2E" + sid[1:]
    if sid.lower() in CLASS_FILES:
        sid = sid.replace(".", "%2E")
    if len(sid) > MAX_ID:
        sid = sid[:MAX_ID - 17] + "~" + hashlib.sha256(raw).hexdigest()[:16]
    return sid or "student"


def student_id_for(path: Path) -> str:
    """The student id of a submission at `path`: a folder's name, a .zip's name without .zip,
    a single file's folder's name; always a `safe_id`."""
    return safe_id(_id_source(Path(path)) or "student")


def _id_source(path: Path) -> str:
    if path.is_dir():
        return path.resolve().name
    if suffix_of(path) == ".zip":
        return path.stem
    return path.resolve().parent.name


def original_name_note(path: Path, student: str) -> str | None:
    """A note keeping the name as found when the student id had to differ from it."""
    path = Path(path)
    source = _id_source(path)
    if student in (source, path.name, "student"):
        return None
    # A single file is named by its folder: that is the name the id was made from.
    return (f"graded as {student}: the name it was found under is "
            f"{ascii(os.fsencode(source or path.name))[1:]} (its bytes; a student id must be "
            "printable text, unique, and differ from the class outputs)")


def display_path(path: Path) -> str:
    """`path` as valid text (undecodable bytes of a name shown as \\xNN)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# --------------------------------------------------------------------------- which exercise

# What people and LMSs add to a file's name: a browser's " (1)", a re-upload's "-2", "_v2",
# " copy", "Copy of ". Stripped by hand, from the end, in time linear in the name: a regex loop
# (`\s*\(\d+\)$` and the like, once per decoration) is quadratic in a run of spaces.
LEADING = ("copy of ", "copia de ")
TRAILING_WORDS = ("copy", "final")
SEPARATORS = "-_ "


def strip_decorations(stem: str) -> str:
    """`stem` without the decorations people and LMSs add, repeated ("x (1) copy" -> "x"),
    and a leading "Copy of "; never empty when `stem` is not. Linear time: each character is
    looked at a bounded number of times."""
    for prefix in LEADING:
        if stem[:len(prefix)].lower() == prefix:
            stem = stem[len(prefix):]
            break
    end = len(stem)
    while (bare := _without_last_decoration(stem, end)) is not None and bare > 0:
        end = bare
    return stem[:end]


def _without_last_decoration(stem: str, end: int) -> int | None:
    """Where `stem[:end]` ends without its last decoration (" (2)", "-2", "_v2", " copy",
    "_final"), or None when it has none."""
    if end and stem[end - 1] == ")":
        i = end - 1
        while i > 0 and stem[i - 1].isdecimal():
            i -= 1
        if i < end - 1 and i > 0 and stem[i - 1] == "(":
            i -= 1
            while i > 0 and stem[i - 1].isspace():
                i -= 1
            return i
        return None
    for word in TRAILING_WORDS:
        start = end - len(word)
        if start > 0 and stem[start:end].lower() == word and stem[start - 1] in SEPARATORS:
            return start - 1
    i = end
    while i > 0 and stem[i - 1].isdecimal():
        i -= 1
    if i == end:
        return None
    if i > 0 and stem[i - 1] in "vV":
        i -= 1
    return i - 1 if i > 0 and stem[i - 1] in SEPARATORS else None


def match_exercise(relpath: str, wanted: list[str]) -> tuple[str | None, str | None]:
    """The exercise a file of a submission is for, and a note when only its decorated name
    says so: the exact name (`grader.course.bughunt.exercise_for`), else the name with case,
    spaces or hyphens for underscores, decorations (" (1)", "-2", "_v2", " copy") or a prefix
    ending in "_", "-" or " " (Canvas's `name_123_456_`) set aside; the longest exercise name
    wins. (None, None) when nothing matches."""
    exact = exercise_for(relpath, wanted)
    if exact is not None:
        return exact, None
    path = PurePosixPath(relpath)
    if suffix_of(path) not in SUFFIXES:
        return None, None
    if len(path.name) > MAX_NAME_CHARS:  # (`overlong`: zip listings skip such names first)
        return None, None
    stem = strip_decorations(path.stem.strip())
    key = re.sub(r"[\s\-]+", "_", stem.strip().lower())  # (one pass, linear)
    in_hunt = path.parent.name == BUGHUNT_FOLDER
    best = None
    for name in sorted(wanted, key=len, reverse=True):
        for candidate in (name, name.removeprefix("bughunt_") if in_hunt else None):
            if candidate and (key == candidate or key.endswith("_" + candidate)):
                best = name
                break
        if best:
            break
    if best is None:
        return None, None
    return best, (f"{relpath} was graded as {best} (its name differs from {best}.py: name the "
                  "file exactly like that next time)")


def expected_names(wanted: Iterable[str]) -> str:
    return ", ".join(f"{w}.py" for w in wanted)


# --------------------------------------------------------------------------- loading


NOTHING_HANDED_IN = "nothing handed in"


def load_submission(path: Path, *, exercises: Iterable[str], student: str | None = None,
                    note_missing: bool = True) -> Submission:
    """Read every exercise module of `exercises` found under `path`.

    A module not found is simply absent from `Submission.modules`; the caller decides what a
    missing file costs, and, unless `note_missing` is False (a local check of whatever the
    student has), a note names the files expected and those found. Only regular files are read
    (see `grader.intake.files`); what was skipped is in the notes.
    """
    with memory_budget():
        return _load_submission(Path(path), list(exercises), student, note_missing)


def _load_submission(path: Path, wanted: list[str], student: str | None,
                     note_missing: bool) -> Submission:
    budget = AnalysisBudget()
    sub = Submission(student=student or student_id_for(path), root=display_path(path))
    note = original_name_note(path, sub.student)
    if note:
        sub.notes.append(note)
    by_exercise: dict[str, list[tuple[Found, str | None]]] = {}
    candidates = scan(path, wanted, sub.notes)
    unmatched = []  # .py and .ipynb files no exercise has the name of
    for found in candidates:
        exercise, decorated = match_exercise(found.relpath, wanted)
        if exercise is not None:
            by_exercise.setdefault(exercise, []).append((found, decorated))
        elif suffix_of(found.relpath) in SUFFIXES:
            unmatched.append(found.relpath)
    for exercise in wanted:
        # An exactly named file comes before a decorated one, then shallowest, .py first.
        options = sorted(by_exercise.get(exercise, []),
                         key=lambda o: (o[1] is not None, rank_depth(o[0]),
                                        suffix_of(o[0].relpath) != ".py", o[0].relpath))
        if not options:
            continue
        # Then one that can run before the depth, and of equal depth the most finished, of
        # the first few (each is read and parsed here, in the grading process: a submission of
        # a thousand copies must not cost more): a release's untouched stub beside the notebook
        # filled in was graded (0) in its place. (Not before the name nor the depth: a release
        # folder holds its grader, whose test_<exercise>.py and probes/<exercise>.py are
        # finished files too.)
        read = [read_module(exercise, found, budget) for found, _ in options[:MAX_COMPARED]]
        order = sorted(range(len(read)),
                       key=lambda i: finished_first(options[i], read[i], budget)) \
            if len(read) > 1 else [0]
        options = [options[i] for i in order] + options[MAX_COMPARED:]
        (chosen, decorated), module = options[0], read[order[0]]
        if decorated:
            module.notes.insert(0, decorated)
        if len(options) > 1:
            others = ", ".join(o[0].relpath for o in options[1:])
            module.notes.append(f"graded {chosen.relpath}{ALSO_FOUND}{others} (ignored)")
        sub.modules[exercise] = module
    missing = [e for e in wanted if e not in sub.modules]
    if missing and note_missing:
        found_note = files_found_note(path, candidates, missing)
        # A folder with no file at all is said as an absent roster student's is: the class
        # index and the LMS remarks then read the same for both.
        nothing = not sub.modules and found_note.endswith("files found: none")
        sub.notes.append(NOTHING_HANDED_IN if nothing else found_note)
        if unmatched:  # beside a missing exercise: misnamed, most likely
            shown = ", ".join(unmatched[:10]) + (" ..." if len(unmatched) > 10 else "")
            sub.notes.append(f"{NOT_GRADED}{shown} (no exercise has its name)")
    if (note := budget.note()) is not None:
        sub.notes.append(note)
    return sub


# In the note of an exercise with several candidate files, before those not graded: a
# gradebook's remarks repeat it (which file counted is the instructor's question too).
ALSO_FOUND = "; also found "


def other_candidates(note: str) -> bool:
    """Whether an exercise's note says which of several candidate files was graded."""
    return note.startswith("graded ") and ALSO_FOUND in note


# The note of a submission missing an exercise's file and holding Python files or notebooks that
# no exercise has the name of: a misnamed file, most often, which scores as not handed in.
NOT_GRADED = "handed in but not graded: "


def misfiled(note: str) -> str | None:
    """The `NOT_GRADED` note as a gradebook's remark ("not graded: clipnorm.py (no exercise
    has its name)"); None for any other note."""
    return "not graded: " + note[len(NOT_GRADED):] if note.startswith(NOT_GRADED) else None


def files_found_note(path: Path, candidates: list[Found], missing: list[str]) -> str:
    """What a submission holds, for one with no file for some exercise: the names found (at
    most 20; a folder's every file, within MAX_DEPTH) and the names expected."""
    names = [f.relpath for f in candidates]
    if path.is_dir():
        names = []
        for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
            rel = Path(dirpath).relative_to(path)
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS
                                 and not d.startswith(".") and len(rel.parts) < MAX_DEPTH
                                 and not is_release_grader(Path(dirpath) / d))
            names += [display_path(rel / n) for n in sorted(filenames)
                      if not n.startswith(".") and n != "timestamp.txt"]
            if len(names) > 20:
                break
    shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
    return (f"no file for {', '.join(missing)}: expected {expected_names(missing)} (or "
            f".ipynb); files found: {shown or 'none'}")


def rank_depth(found: Found) -> int:
    """How deep a file lies, for choosing among several files of one exercise (shallowest
    first, then .py before .ipynb): a bug hunt's `bughunt/` folder is part of its file's name
    (`bughunt/mnist.py`), so `exercises/bughunt/mnist.py` ranks with
    `exercises/softmax_rows.py`, before `notebooks/bughunt_mnist.ipynb` as a
    module's `.py` comes before its notebook (a release folder holds both)."""
    return found.depth - (PurePosixPath(found.relpath).parent.name == BUGHUNT_FOLDER)


def load_quietly(path: Path, student: str, exercises: list[str]) -> Submission:
    """`load_submission` that never raises: a submission that cannot be read at all is one whose
    note says why (every check then fails with "file not submitted")."""
    try:
        return load_submission(path, exercises=exercises, student=student)
    except Exception as exc:  # noqa: BLE001 - a submission must never stop the batch
        log.exception("torchgrade: could not read %s", display_path(path))
        return Submission(student=student, root=display_path(path), notes=[
            f"the submission could not be read: {type(exc).__name__}: {_text(exc)}"])


def exercises_in(path: Path, exercises: Iterable[str]) -> set[str]:
    """The exercises of `exercises` a submission holds a file of, by names only: bounded (no
    file is read; a zip's listing only within MAX_ZIP_ENTRIES); never raises."""
    wanted = list(exercises)
    try:
        return {e for f in scan(Path(path), wanted, [])
                if (e := match_exercise(f.relpath, wanted)[0])}
    except Exception:  # noqa: BLE001 - the grading process reports the problem
        return set()


def scan(path: Path, wanted: list[str], notes: list[str]) -> list[Found]:
    """The candidate exercise files of a submission (nothing is read yet)."""
    if path.is_dir():
        return _scan_dir(path, notes)
    name = display_path(Path(path.name))
    if suffix_of(path) == ".zip":
        return _scan_zip(path, "", notes)
    if suffix_of(path) in SUFFIXES:
        try:
            st = os.stat(path)
        except OSError as exc:
            notes.append(f"{name} could not be read ({exc.strerror})")
            return []
        # bughunt/mnist.py handed in alone is still the bug hunt "bughunt_mnist".
        relpath = (f"{BUGHUNT_FOLDER}/{name}" if path.resolve().parent.name == BUGHUNT_FOLDER
                   else name)
        if match_exercise(relpath, wanted)[0] is None:
            notes.append(f"{name} is not an exercise file: name it after the exercise, "
                         f"one of {', '.join(f'{w}.py' for w in wanted)}")
        return [Found(relpath, 0, st.st_size, partial(read_regular, path))]
    notes.append(f"{name} is not a .py, .ipynb or .zip file")
    return []


def _scan_dir(root: Path, notes: list[str]) -> list[Found]:
    found: list[Found] = []
    root = root.resolve()
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel = Path(dirpath).relative_to(root)
        depth = len(rel.parts)
        seen += len(dirnames) + len(filenames)
        if seen > MAX_FILES:
            notes.append(f"the submission holds more than {MAX_FILES} files and folders: only "
                         "the first ones were looked at")
            break
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith(".") and depth < MAX_DEPTH
                             and not is_release_grader(Path(dirpath) / d))
        for name in sorted(filenames):
            full = Path(dirpath) / name
            relpath = display_path(rel / name)
            if name.startswith(".") or suffix_of(name) not in SUFFIXES + (".zip",):
                continue
            try:
                st = os.lstat(full)
            except OSError:
                continue
            why = refusal(st)
            if why is not None:
                notes.append(f"{relpath} {why}: it was skipped")
                continue
            if suffix_of(name) == ".zip":
                found += _scan_zip(full, relpath, notes, depth)
            else:
                found.append(Found(relpath, depth, st.st_size, partial(read_regular, full)))
    return found


def is_release_grader(folder: Path) -> bool:
    """Whether `folder` is the grader package of a student release (see RELEASE_MARKER)."""
    try:
        return stat.S_ISREG(os.lstat(folder / RELEASE_MARKER).st_mode)
    except OSError:
        return False


def _scan_zip(path: Path, relname: str, notes: list[str], depth0: int = 0) -> list[Found]:
    """The candidate files in a zip, after bounding it: at most MAX_ZIP_ENTRIES entries (counted
    from its end record, before its listing is parsed), MAX_ZIP_BYTES uncompressed in total and
    no member inflating more than MAX_ZIP_RATIO times (zip bombs)."""
    label = relname or display_path(Path(path.name))
    try:
        fd, st = open_regular(path)
    except Refused as exc:
        notes.append(f"{label} {exc}: it was skipped")
        return []
    except OSError as exc:
        notes.append(f"{label} could not be read ({exc.strerror})")
        return []
    with os.fdopen(fd, "rb") as f:
        if st.st_size > MAX_ZIP_FILE_BYTES:
            notes.append(f"{label} is larger than {MAX_ZIP_FILE_BYTES >> 20} MB and was not "
                         "opened")
            return []
        try:
            entries = zip_entry_bound(f, MAX_ZIP_LISTING_BYTES_PER_ENTRY)
            if entries > MAX_ZIP_ENTRIES:
                notes.append(f"{label} holds {entries} entries or more (by its end record); "
                             f"the limit is {MAX_ZIP_ENTRIES}: it was not opened")
                return []
            infos = zipfile.ZipFile(f).infolist()
            if len(infos) > MAX_ZIP_ENTRIES:
                notes.append(f"{label} holds {len(infos)} entries; the limit is "
                             f"{MAX_ZIP_ENTRIES}: it was not opened")
                return []
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            notes.append(f"{label} is not a readable zip file ({_text(exc)})")
            return []
    total = sum(i.file_size for i in infos)
    if total > MAX_ZIP_BYTES:
        notes.append(f"{label} would unpack to {total >> 20} MB; the limit is "
                     f"{MAX_ZIP_BYTES >> 20} MB: it was not opened")
        return []
    found = []
    long_names = 0
    for info in infos:
        name = member_name(info)
        if overlong(name):
            long_names += 1
            continue
        parts = PurePosixPath(name).parts
        if (info.is_dir() or not parts or any(p in SKIP_DIRS or p.startswith(".") for p in parts)
                or suffix_of(name) not in SUFFIXES or ".." in parts):
            continue
        depth = depth0 + len(parts) - 1
        if depth > MAX_DEPTH:
            continue
        relpath = f"{label}/{name}"
        packed = max(info.compress_size, 1)
        if info.file_size > (1 << 20) and info.file_size > MAX_ZIP_RATIO * packed:
            notes.append(f"{relpath} inflates {info.file_size // packed} "
                         f"times (a zip bomb?); the limit is {MAX_ZIP_RATIO}: it was skipped")
            continue
        found.append(Found(relpath, depth, info.file_size, partial(_read_member, path, info)))
    if long_names:
        notes.append(f"{label}: {long_names} member(s) with a name longer than "
                     f"{MAX_NAME_CHARS} characters (or a path longer than {MAX_PATH_CHARS}) "
                     "were skipped")
    return found


def _read_member(path: Path, info: zipfile.ZipInfo, limit: int) -> bytes:
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f, zipfile.ZipFile(f) as z, z.open(info) as member:
        return member.read(limit + 1)


def _text(exc: BaseException) -> str:
    """An exception's message as valid, short text."""
    return str(exc).encode("utf-8", "backslashreplace").decode("utf-8")[:300]


def finished_first(option: tuple[Found, str | None], module: ModuleSource,
                   budget: AnalysisBudget) -> tuple:
    """The order of candidate files for one exercise (`option`: the file and its name's
    decoration note, `module`: the file read): exactly named, able to run, shallowest, most
    finished."""
    cannot_run, todo = unfinished(module, budget)
    return option[1] is not None, cannot_run, rank_depth(option[0]), todo


def unfinished(module: ModuleSource, budget: AnalysisBudget) -> tuple[bool, int]:
    """How far from finished a candidate file is: whether it cannot run at all, then how many
    of its functions do nothing but raise NotImplementedError (a stub's, not filled in yet).
    A piece over `budget` is counted without a parse: its lines that raise it."""
    if module.fatal is not None:
        return True, 0
    todo = 0
    for chunk in module.chunks:
        tree = parse(chunk.code, budget, chunk.label)
        if tree is None:
            todo += sum(line.lstrip().startswith("raise NotImplementedError")
                        for line in chunk.code.splitlines())
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                todo += bool(body) and all(_raises_not_implemented(n) for n in body)
    return False, todo


def _raises_not_implemented(node: ast.stmt) -> bool:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


MAX_COMPARED = 8  # candidate files for one exercise read to find the most finished
SKIPPED_CELL = "; the cell was skipped"  # ends the note of a notebook cell that does not compile


def read_module(exercise: str, found: Found, budget: AnalysisBudget | None = None
                ) -> ModuleSource:
    """Decode and syntax-check one exercise file. Never raises: whatever goes wrong reading,
    decoding or parsing this one file is its module's `fatal` message, and the submission's
    other files are read as usual."""
    try:
        return _read_module(exercise, found,
                            budget if budget is not None else AnalysisBudget())
    except Exception as exc:  # noqa: BLE001 - one file's problem costs that file only
        log.warning("torchgrade: reading %s failed: %s: %s", found.relpath,
                    type(exc).__name__, _text(exc))
        kind = "ipynb" if suffix_of(found.relpath) == ".ipynb" else "py"
        return ModuleSource(exercise=exercise, path=found.relpath, kind=kind,
                            fatal=f"{found.relpath} could not be read "
                                  f"({type(exc).__name__}: {_text(exc)})")


def _read_module(exercise: str, found: Found, budget: AnalysisBudget) -> ModuleSource:
    kind = "ipynb" if suffix_of(found.relpath) == ".ipynb" else "py"
    module = ModuleSource(exercise=exercise, path=found.relpath, kind=kind)
    limit = MAX_NOTEBOOK_BYTES if kind == "ipynb" else MAX_SOURCE_BYTES
    # (a notebook's outputs count: pictures make one large long before its code does)
    too_large = (f"{found.relpath} is larger than {limit >> 20} MB and was not graded"
                 + ("; its outputs count too: clear them (Kernel > Restart & Clear Output, or "
                    "Edit > Clear All Outputs), save, and hand it in again"
                    if kind == "ipynb" else ""))
    if found.size > limit:
        module.fatal = too_large
        return module
    try:
        data = found.read(limit)
    except Refused as exc:
        module.fatal = f"{found.relpath} {exc}: it was not graded"
        return module
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError, EOFError) as exc:
        module.fatal = f"{found.relpath} could not be read ({_text(exc)})"
        return module
    if len(data) > limit:
        module.fatal = too_large
        return module
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # (UTF-32's marks start so too)
        module.fatal = (f"{found.relpath} is saved as UTF-16 or UTF-32 (Windows Notepad's "
                        "\"Unicode\"): save it as UTF-8")
        return module
    if b"\x00" in data:
        module.fatal = (f"{found.relpath} looks like a binary file, "
                        f"not {'a notebook' if kind == 'ipynb' else 'Python source'}")
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
            module.chunks, notes = notebook_chunks(text, found.relpath, budget)
        except NotebookError as exc:
            module.fatal = f"{found.relpath}: {exc}"
            return module
        module.notes += notes
    usable = []
    for chunk in module.chunks:
        problem = syntax_problem(chunk, budget)
        if problem is None:
            usable.append(chunk)
        elif kind == "py":
            module.fatal = problem
            return module
        else:
            module.notes.append(problem + SKIPPED_CELL)
    module.chunks = usable
    return module


def decode_text(data: bytes, name: str) -> tuple[str, str | None]:
    """Source text by Python's own rules (BOM, coding cookie, else UTF-8); undecodable bytes are
    replaced and the note says where the first one was."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError):
        encoding = "utf-8"
    if not linear_codec(encoding):
        return _as_utf8(data, name, f"declares the encoding {encoding!r}, which the grader does "
                                    "not decode (its decoder's time grows faster than the file)")
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        line = data[:exc.start].count(b"\n") + 1
        return data.decode(encoding, "replace"), (
            f"{name} is not valid UTF-8 (byte 0x{bad} on line {line}); undecodable bytes were "
            "replaced with \N{REPLACEMENT CHARACTER}. Save the file as UTF-8.")
    except Exception as exc:  # noqa: BLE001 - a codec that is no text codec (rot13, punycode)
        return _as_utf8(data, name, f"declares the encoding {encoding!r}, which cannot "
                                    f"decode it ({type(exc).__name__}: {_text(exc)})")


# Decoders written in C, linear in their input: the UTF family's wrappers call them.
_UTF = {"utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le",
        "utf-32-be", "utf-7"}


def linear_codec(encoding: str) -> bool:
    """Whether decoding with `encoding` costs the grader time linear in the bytes: a decoder
    in C (ASCII, Latin-1, the CJK multibyte codecs, the escapes), a charmap codec (a C lookup
    through its table: cp1252, iso8859-*, koi8-r, mac-roman...), or the UTF family. Not the
    codecs written in Python, such as punycode (quadratic: 2 MB, the cap of a .py, took 430 s
    of the grading process's CPU) and idna."""
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        return False
    if info.name in _UTF or inspect.isbuiltin(info.decode):
        return True
    module = sys.modules.get(getattr(info.decode, "__module__", "") or "")
    return module is not None and hasattr(module, "decoding_table")


def _as_utf8(data: bytes, name: str, why: str) -> tuple[str, str]:
    """`data` read as UTF-8 (what Python reads when no coding cookie says otherwise), and a
    note on `name` saying why its declared encoding was not used."""
    return data.decode("utf-8", "replace"), (
        f"{name} {why}: it was read as UTF-8. Remove the `coding:` line and save the file as "
        "UTF-8.")


# What `syntax_problem` says of a chunk that is no valid Python: the compiler's error type first
# ("SyntaxError in a.py, line 3: ..."; a notebook cell's note goes on after it).
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
_SAYS_SYNTAX = re.compile(rf"^({'|'.join(SYNTAX_ERRORS)}) in ", re.M)


def says_syntax_error(note: str) -> bool:
    """Whether `note` (an exercise's, as a result holds it) is `syntax_problem`'s: its words'
    one reader, beside their writer (`grader.checking.loading.load_state` yields the typed
    state every later stage branches on)."""
    return bool(_SAYS_SYNTAX.search(note))


def syntax_problem(chunk: SourceChunk, budget: AnalysisBudget) -> str | None:
    """A student-readable syntax error for the chunk, or None when it compiles (or is over
    `budget`: compiling costs the grading process, outside the worker's memory limit, up to
    ~650 bytes per byte of source; the worker's import says such a chunk's syntax error)."""
    if not budget.allows(chunk.code, chunk.label):
        return None
    try:
        # Only errors: the compiler's warnings (`x is 0`, common in `verify`'s generated
        # mutants) would print on the grader's terminal, and under -W error be taken for one.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
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
