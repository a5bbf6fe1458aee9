"""`torchgrade new-exercise NAME --course DIR`: a small but real exercise to start from.

It writes, in the course folder DIR (created, with its `course.toml`, when missing):

    exercises/NAME.py                 the stub: `scale(x, factor)`, its docstring the contract
    solutions/NAME.py                 the reference solution
    checks/test_NAME.py               a visible check
    checks/test_NAME_hidden.py        a hidden check
    mutants/NAME/adds.diff            wrong implementations as patches of the solution, each
    mutants/NAME/in_place.diff        declaring on its first line the checks it must fail

and appends NAME to `exercises` in `course.toml`, editing only that array's text (comments,
other keys and tables are kept as written). The files make `torchgrade verify` pass at once:
the solution scores full marks, the stub zero with "not implemented yet" on every check, each
mutant fails exactly the checks it declares, every check is failed by some mutant, and the
generated mutants of `x * factor` (other operators, a dropped return) fail a check.

The templates are string constants here rather than files under `templates/`: each is a short
Python module with one substitution (the exercise's name, `$name`), so a template language adds
nothing, and keeping them beside the code that fills them keeps the package data unchanged.
Nothing is written when NAME is refused (not a name a course accepts, or an exercise of DIR
already) or when something cannot be written (checked first; undone if writing fails anyway),
and no existing file is ever replaced.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from grader.course.folder import exercise_name_problem
from grader.course.patch import make_patch
from grader.errors import UsageError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

COURSE_FILE = "course.toml"

STUB = '''\
"""$name: a starting point written by `torchgrade new-exercise`; make it your own exercise.

Implement `scale` below so that it meets its contract (its docstring).
"""

import numpy as np  # noqa: F401 - its example uses np


def scale(x, factor):
    """Return `x` multiplied by `factor`, element by element.

    `x` is a numpy array or a torch tensor of floating point numbers, `factor` a Python float.
    The result is a new array (or tensor) of the same kind, shape and dtype as `x`; `x` itself
    is left as it was.

    Example:
        >>> scale(np.array([1.0, -2.0, 0.5]), 3.0)
        array([ 3. , -6. ,  1.5])
    """
    raise NotImplementedError
'''

SOLUTION = '''\
"""$name: the reference solution (never shipped to students)."""

import numpy as np  # noqa: F401 - its example uses np


def scale(x, factor):
    """Return `x` multiplied by `factor`, element by element.

    `x` is a numpy array or a torch tensor of floating point numbers, `factor` a Python float.
    The result is a new array (or tensor) of the same kind, shape and dtype as `x`; `x` itself
    is left as it was.

    Example:
        >>> scale(np.array([1.0, -2.0, 0.5]), 3.0)
        array([ 3. , -6. ,  1.5])
    """
    return x * factor
'''

VISIBLE = '''\
"""Visible checks of `$name`: students run these themselves, and they are graded too."""

import numpy as np

from grader import check, expect_array, format_call


@check(points=2, targets="scale", visibility="visible")
def test_scale_multiplies_every_element(sub):
    """scale multiplies every element of a float64 array by factor"""
    x = np.random.default_rng(0).normal(size=(3, 4))
    # Several factors, so that x + factor, x ** factor or x / factor cannot pass by chance.
    for factor in (3.0, -0.5, 0.0, 1.5):
        expect_array(sub.call("scale", x, factor), x * factor,
                     call=format_call("scale", (x, factor)), rtol=1e-12,
                     hint="multiply each element by factor; keep the shape")
'''

HIDDEN = '''\
"""Hidden checks of `$name`: graded, never shipped to students."""

import numpy as np
import torch

from grader import check, expect_array, format_call


@check(points=2, targets="scale", visibility="hidden")
def test_scale_keeps_dtype_and_input(sub):
    """scale keeps float32 arrays and tensors as they are and leaves x unchanged"""
    x32 = np.random.default_rng(1).normal(size=(5,)).astype(np.float32)
    for x in (x32, torch.from_numpy(x32.copy())):
        for factor in (2.0, -3.0):
            # Shared with the worker: a call that writes into x fails the check.
            got = sub.call("scale", sub.shared(x, name="x"), factor)
            expect_array(got, x * factor, call=format_call("scale", (x, factor)), rtol=1e-6,
                         hint="return a new array of x's kind and dtype; do not write into x")
'''

# The mutants: each its `# must fail:` line and the change to the solution's body that makes it
# wrong; written as patches of the solution (`mutants/NAME/<mutant>.diff`, see
# grader/course/patch.py), as `diff -u` would make them.
MUTANTS = {
    "adds": ("# must fail: scale_multiplies_every_element, scale_keeps_dtype_and_input\n",
             "    return x * factor\n", "    return x + factor  # adds instead of multiplying\n"),
    "in_place": ("# must fail: scale_keeps_dtype_and_input\n",
                 "    return x * factor\n",
                 "    x *= factor  # right values, but the caller's x is changed\n    return x\n"),
}


@dataclass(frozen=True)
class Scaffold:
    """What `new_exercise` wrote: the course folder, whether it made `course.toml`, and the
    files of the exercise (relative to the folder)."""

    course: Path
    created_course: bool
    files: tuple[Path, ...]


def files_of(name: str) -> dict[Path, str]:
    """The exercise's files for `name`: relative path -> text."""
    fill = lambda template: Template(template).substitute(name=name)  # noqa: E731
    out = {Path("exercises", f"{name}.py"): fill(STUB),
           Path("solutions", f"{name}.py"): fill(SOLUTION),
           Path("checks", f"test_{name}.py"): fill(VISIBLE),
           Path("checks", f"test_{name}_hidden.py"): fill(HIDDEN)}
    solution = out[Path("solutions", f"{name}.py")]
    for mutant, (declared, right, wrong) in MUTANTS.items():
        assert solution.count(right) == 1
        patch = make_patch(solution, solution.replace(right, wrong),
                           label=f"solutions/{name}.py")
        out[Path("mutants", name, f"{mutant}.diff")] = declared + patch
    return out


def new_exercise(name: str, course: Path) -> Scaffold:
    """Write exercise `name` into the course folder `course` (see the module docstring).

    Raises `UsageError` (one line; nothing written) when `name` is not a plain identifier or
    names something the grader reads otherwise, when `course` already has that exercise (in
    `course.toml` or as any of the files), or when `course.toml` cannot be edited safely.
    """
    course = Path(course)
    refuse_name(name)
    if course.exists() and not course.is_dir():
        raise UsageError(f"--course {course}: not a folder")
    toml_path = course / COURSE_FILE
    created_course = not toml_path.exists()
    old = "" if created_course else _read(toml_path)
    new = (new_course_toml(course_name(course), name) if created_course
           else add_exercise(old, name, where=toml_path))
    files = files_of(name)
    clashes = [str(rel) for rel in files if (course / rel).exists()]
    if clashes:
        raise UsageError(f"exercise {name} already exists in {course}: {clashes[0]} is there")
    refuse_unwritable(course, [*files, Path(COURSE_FILE)])
    made: list[Path] = []  # what this call created, folders included, in order
    try:
        for rel, text in files.items():
            _write_new(course / rel, text, made)
        # Last, so that course.toml never lists an exercise whose files are not all there.
        if created_course:
            _write_new(toml_path, new, made)
        else:
            toml_path.write_text(new, encoding="utf-8")
    except OSError as exc:
        for path in reversed(made):  # write nothing on failure: undo what was made
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        raise UsageError(f"{exc.filename or course}: cannot be written "
                         f"({exc.strerror or exc}); nothing was written") from None
    return Scaffold(course=course, created_course=created_course, files=tuple(files))


def refuse_unwritable(course: Path, rels: list[Path]) -> None:
    """UsageError (nothing written yet) when a file of `rels` (relative to `course`) could not
    be written: the file exists and is read-only, or the nearest existing folder on its way is
    not writable or not a folder. A check before writing, so that the common case (a read-only
    course.toml, a read-only folder) never leaves a half-made exercise behind; what it cannot
    foresee, `new_exercise` undoes."""
    for rel in rels:
        path = course / rel
        if path.exists():
            if not os.access(path, os.W_OK):
                raise UsageError(f"{path}: not writable; nothing was written")
            continue
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{folder}: cannot write {rel} into it (not a writable folder); "
                             "nothing was written")


def _write_new(path: Path, text: str, made: list[Path]) -> None:
    """Write the new file `path` ("x": never replace one), its missing folders first; append
    to `made` every folder and the file created."""
    missing = [f for f in reversed(path.parents) if not f.exists()]
    for folder in missing:
        folder.mkdir()
        made.append(folder)
    with path.open("x", encoding="utf-8") as f:
        made.append(path)
        f.write(text)


def refuse_name(name: str) -> None:
    """Raise `UsageError` unless `name` can name an exercise: the rule of course folders
    (`grader.course.folder.exercise_name_problem`: a lower-case ASCII Python identifier, not a
    keyword, not ending in `_hidden`), and not a bug hunt's `bughunt_` prefix (bug hunts are
    declared in faults.toml, not scaffolded)."""
    if problem := exercise_name_problem(name):
        raise UsageError(problem)
    if name.startswith("bughunt_"):
        raise UsageError(f"{name}: exercise names starting with bughunt_ are bug hunts, "
                         "declared in faults.toml ([[bughunt]]), not scaffolded")


def course_name(course: Path) -> str:
    return course.resolve().name or "course"


def new_course_toml(course: str, exercise: str) -> str:
    return (f"# A torchgrade course: see docs/AUTHORING.md.\n"
            f"name = {_quote(course)}\n"
            f"exercises = [{_quote(exercise)}]\n")


def add_exercise(text: str, name: str, *, where: Path | str = COURSE_FILE) -> str:
    """`text` (a course.toml) with `name` appended to its top-level `exercises` array, edited
    in place as text: every other line, comment and table stays as written. Raises
    `UsageError` when the file is not valid TOML, already lists `name`, or the edit would
    change anything but that array (then the author adds the name by hand)."""
    data = _parse(text, where)
    exercises = data.get("exercises", [])
    if not isinstance(exercises, list) or not all(isinstance(e, str) for e in exercises):
        raise UsageError(f"{where}: `exercises` must be a list of exercise names")
    if name in exercises:
        raise UsageError(f"exercise {name} already exists in {where}")
    new = _append(text, name) if "exercises" in data else _insert_key(text, name)
    expected = {**data, "exercises": [*exercises, name]}
    if new is None or _parse(new, where) != expected:
        raise UsageError(f"{where}: could not add {name!r} to `exercises` without changing "
                         "anything else; add it by hand")
    return new


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read ({exc})") from None


def _parse(text: str, where: Path | str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not valid TOML ({exc})") from None


def _quote(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for the characters a name holds)."""
    return json.dumps(text, ensure_ascii=False)


_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)
_KEY = re.compile(r"^[ \t]*exercises[ \t]*=[ \t]*\[", re.MULTILINE)


def _top_level(text: str) -> int:
    """Where the top-level keys end: the first table header, or the end of the text."""
    found = _TABLE.search(text)
    return found.start() if found else len(text)


def _insert_key(text: str, name: str) -> str:
    """`exercises = [name]` added at the end of the top-level keys."""
    at = _top_level(text)
    head, tail = text[:at], text[at:]
    if head and not head.endswith("\n"):
        head += "\n"
    return f"{head}exercises = [{_quote(name)}]\n{tail}"


def _append(text: str, name: str) -> str | None:
    """`name` added as the last element of the array of the top-level `exercises = [...]`,
    in the array's own style (one line, or one element per line with a trailing comma); None
    when the array cannot be found by this reading."""
    found = _KEY.search(text, 0, _top_level(text))
    if found is None:
        return None
    close, last = _array_end(text, found.end())
    if close is None:
        return None
    item = _quote(name)
    before = text[last]
    if before == "[":
        insert = item
    elif before == ",":
        multiline = "\n" in text[found.end():close]
        line = text[text.rfind("\n", 0, last) + 1:last]
        indent = line[:len(line) - len(line.lstrip(" \t"))]  # the last element's line's
        insert = f"\n{indent}{item}," if multiline else f" {item},"
    else:
        insert = f", {item}"
    return text[:last + 1] + insert + text[last + 1:]


def _array_end(text: str, start: int) -> tuple[int | None, int]:
    """From just after an array's `[` at `start - 1`: the index of its closing `]` and the
    index of the last significant character before it (the `[` itself when it is empty),
    skipping strings and comments; (None, _) when the array is not closed plainly."""
    last, i, depth = start - 1, start, 0
    while i < len(text):
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if c in "\"'":
            if text.startswith(c * 3, i):
                return None, last  # a multi-line string in the list: not read here
            end = i + 1
            while end < len(text) and text[end] != c:
                end += 2 if c == '"' and text[end] == "\\" else 1
            if end >= len(text):
                return None, last
            last, i = end, end + 1
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            if depth == 0:
                return i, last
            depth -= 1
        if not c.isspace():
            last = i
        i += 1
    return None, last
