"""`torchgrade new-exercise NAME --course DIR`: a small but real exercise to start from.

It writes, in the course folder DIR (created, with its `course.toml`, when missing):

    exercises/NAME.py                 the stub: `scale(x, factor)`, its docstring the contract
    solutions/NAME.py                 the reference solution
    checks/test_NAME.py               a visible check
    checks/test_NAME_hidden.py        a hidden check
    mutants/NAME/adds.py              wrong implementations, each declaring on its first line
    mutants/NAME/in_place.py          the checks it must fail

and appends NAME to `exercises` in `course.toml`, editing only that array's text (comments,
other keys and tables are kept as written). The files make `torchgrade verify` pass at once:
the solution scores full marks, the stub zero with "not implemented yet" on every check, each
mutant fails exactly the checks it declares, every check is failed by some mutant, and the
generated mutants of `x * factor` (other operators, a dropped return) fail a check.

The templates are string constants here rather than files under `templates/`: each is a short
Python module with one substitution (the exercise's name, `$name`), so a template language adds
nothing, and keeping them beside the code that fills them keeps the package data unchanged.
Nothing is written when NAME is refused (not an identifier, or an exercise of DIR already),
and no existing file is ever replaced.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from grader.errors import UsageError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

COURSE_FILE = "course.toml"
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

STUB = '''\
"""$name: a starting point written by `torchgrade new-exercise`; make it your own exercise.

Implement `scale` below so that it meets its contract (its docstring).
"""


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

MUTANTS = {
    "adds": '''\
# must fail: scale_multiplies_every_element, scale_keeps_dtype_and_input
"""$name, wrong: adds factor instead of multiplying."""


def scale(x, factor):
    return x + factor
''',
    "in_place": '''\
# must fail: scale_keeps_dtype_and_input
"""$name, wrong: multiplies x in place (right values, but the caller's x is changed)."""


def scale(x, factor):
    x *= factor
    return x
''',
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
    out.update({Path("mutants", name, f"{mutant}.py"): fill(text)
                for mutant, text in MUTANTS.items()})
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
    for rel, text in files.items():
        path = course / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as f:  # "x": never replace a file
            f.write(text)
    # Last, so that course.toml never lists an exercise whose files are not all there.
    toml_path.write_text(new, encoding="utf-8")
    return Scaffold(course=course, created_course=created_course, files=tuple(files))


def refuse_name(name: str) -> None:
    """Raise `UsageError` unless `name` can name an exercise: an ASCII Python identifier (it
    is the module students hand in), not a keyword, and not a name the grader reads as
    something else (a bug hunt's `bughunt_` prefix, a hidden check file's `_hidden` suffix)."""
    if not NAME_PATTERN.fullmatch(name) or keyword.iskeyword(name):
        raise UsageError(f"{name!r} is not a Python identifier (letters, digits and _, not "
                         "starting with a digit, not a keyword): it names the module students "
                         "hand in")
    if name.startswith("bughunt_"):
        raise UsageError(f"{name}: exercise names starting with bughunt_ are bug hunts, "
                         "declared in faults.toml ([[bughunt]]), not scaffolded")
    if name.endswith("_hidden"):
        raise UsageError(f"{name}: an exercise name may not end in _hidden (test_<name>.py "
                         "would read as another exercise's hidden checks)")


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
