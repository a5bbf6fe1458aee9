"""What `torchgrade release --course DIR` must refuse in an instructor's course: a solution in a
stub's docstring, comments or strings, a hidden check's name or data copied into a shipped file,
a visible check that needs what never ships, a helper that shadows an installed module.

Most tests scan a folder holding only the files under test (`scan` reads whatever it is given),
so that they need no release build; one builds a release end to end.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.folder import load_course, use_course
from grader.release.leaks import scan, secrets

STUB = '''"""Scores: standardise columns, keep a running meter."""

import numpy as np


def zscore(x):
    """Each column of the 2-d array `x` minus its mean, divided by its standard deviation (a
    constant column becomes zeros)."""
    raise NotImplementedError


class Meter:
    """Values added one by one."""

    def __init__(self, name):
        self.name = name
        self.values = []

    def __repr__(self):
        return f"Meter({self.name!r}, {len(self.values)} values, last {self.values[-1:]})"

    def add(self, value):
        """Append `value` (a float) and return the mean so far."""
        raise NotImplementedError
'''
SOLUTION = '''"""Scores: reference solution."""

import numpy as np


def zscore(x):
    centered = x - x.mean(axis=0, keepdims=True)
    spread = x.std(axis=0, keepdims=True)
    return centered / np.where(spread > 0, spread, 1.0)


class Meter:
    def __init__(self, name):
        self.name = name
        self.values = []

    def __repr__(self):
        return f"Meter({self.name!r}, {len(self.values)} values, last {self.values[-1:]})"

    def add(self, value):
        self.values.append(float(value))
        return sum(self.values) / len(self.values)
'''
# The body of the solution's zscore, as an author would paste it.
BODY = SOLUTION[SOLUTION.index("    centered"):SOLUTION.index("\n\n\nclass")]
VISIBLE = '''"""Visible checks of scores."""

from scores_cases import CASES

from grader import check, expect_array


@check(points=2, targets="zscore", visibility="visible")
def test_zscore_values(sub):
    """zscore standardises each column"""
    for x in CASES:
        got = sub.call("zscore", x)
        expect_array(got, (x - x.mean(axis=0)) / x.std(axis=0), call="zscore(x)")
'''
HIDDEN = '''"""Hidden checks of scores."""

import numpy as np

from grader import check, expect_array


@check(points=1, targets="zscore")
def test_zscore_constant_columns_become_zeros(sub):
    """a constant column becomes zeros"""
    x = np.array([[1.0, 7.25], [3.0, 7.25], [8.0, 7.25]])
    got = sub.call("zscore", x)
    expect_array(got[:, 1], np.zeros(3), call="zscore(x)  # second column constant")
'''
CASES = '''import numpy as np

CASES = [np.arange(6.0).reshape(3, 2), np.array([[1.0, -1.0], [2.0, 4.0]])]
'''
HIDDEN_DATA = "x = np.array([[1.0, 7.25], [3.0, 7.25], [8.0, 7.25]])"


def write_course(root: Path, **changed: str) -> Path:
    files = {"course.toml": 'name = "Scores"\nexercises = ["scores"]\n',
             "exercises/scores.py": STUB, "solutions/scores.py": SOLUTION,
             "checks/test_scores.py": VISIBLE, "checks/test_scores_hidden.py": HIDDEN,
             "checks/scores_cases.py": CASES,
             "mutants/scores/no_centering.py": "# must fail: zscore_values\n"
             "import numpy as np\n\n\ndef zscore(x):\n    return x / x.std(axis=0)\n"}
    files.update({k.replace("__", "/").replace("_py", ".py"): v for k, v in changed.items()})
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(autouse=True)
def back_to_default():
    yield
    use_course(None)


def leaks_in(course: Path, shipped: dict[str, str], tmp_path: Path) -> set[tuple[str, str]]:
    """(file, secret origin) of every leak the scan finds in a folder holding `shipped`, the
    secrets being those of `course`."""
    use_course(load_course(course))
    found = secrets()
    folder = tmp_path / "shipped"
    for rel, text in shipped.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    leaks, unreadable = scan(folder, found)
    assert unreadable == []
    return {(leak.path, leak.secret.origin) for leak in leaks if not leak.allowed}


# --------------------------------------------------------------------------- 1: stubs


def _in_docstring(stub: str) -> str:
    return stub.replace("    constant column becomes zeros).\"\"\"",
                        f"    constant column becomes zeros).\n\n    Hint:\n\n{BODY}\n    \"\"\"")


def _in_comments(stub: str) -> str:
    commented = "\n".join("    # " + line.strip() for line in BODY.splitlines())
    return stub.replace("    raise NotImplementedError\n\n\nclass",
                        f"{commented}\n    raise NotImplementedError\n\n\nclass")


def _in_a_string(stub: str) -> str:
    return stub + f'\n\n_ANSWER = """\ndef zscore(x):\n{BODY}\n"""\n'


def _under_another_name(stub: str) -> str:
    return stub + f"\n\ndef _unused(x):\n{BODY}\n"


@pytest.mark.fast
@pytest.mark.parametrize("paste", [_in_docstring, _in_comments, _in_a_string,
                                   _under_another_name])
def test_a_solution_pasted_into_its_stub_is_found(tmp_path, paste):
    """A stub's docstrings, comments and strings are no licence to ship the solution's code,
    and neither is code under another name: only code the stub provides as the same
    definition is public."""
    stub = paste(STUB)
    course = write_course(tmp_path / "course", exercises__scores_py=stub)
    found = leaks_in(course, {"exercises/scores.py": stub}, tmp_path)
    assert ("exercises/scores.py", "solutions/scores.py: zscore") in found


@pytest.mark.fast
def test_a_solution_in_a_notebooks_escaped_markdown_is_found(tmp_path):
    """A stub's docstring becomes markdown in its notebook, escaped (`result = \\[\\]`): the
    escapes do not hide the copy."""
    import json

    from grader.release.notebooks import escape_markdown

    course = write_course(tmp_path / "course")
    cell = {"cell_type": "markdown", "metadata": {}, "source": escape_markdown(BODY)}
    notebook = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    assert escape_markdown(BODY) != BODY
    found = leaks_in(course, {"notebooks/scores.ipynb": notebook}, tmp_path)
    assert ("notebooks/scores.ipynb", "solutions/scores.py: zscore") in found


@pytest.mark.fast
def test_code_a_stub_provides_is_no_secret(tmp_path):
    """`Meter.__init__` and `Meter.__repr__` are given ready-made by the stub: the unchanged
    stub ships without a leak, and they are no secret; the bodies students write are."""
    course = write_course(tmp_path / "course")
    assert leaks_in(course, {"exercises/scores.py": STUB}, tmp_path) == set()
    origins = {s.origin for s in secrets()}
    assert "solutions/scores.py: zscore" in origins
    assert "solutions/scores.py: Meter.add" in origins
    assert not {"solutions/scores.py: Meter.__repr__", "solutions/scores.py: Meter.__init__"} \
        & origins


@pytest.mark.fast
def test_code_the_shipped_stubs_provide_stays_public():
    """The shipped curriculum: manual_backward's stub gives `Value.__repr__`, a bug hunt's stub
    is its solution with faults injected; what they give as code is no secret, what they
    do not give is."""
    origins = {s.origin for s in secrets()}
    assert "solutions/manual_backward.py: Value.__repr__" not in origins
    assert "solutions/bughunt/classifier.py: make_images" not in origins
    assert "solutions/manual_backward.py: Value.backward" in origins


# --------------------------------------------------------------------------- 2: hidden checks


HIDDEN_NAME = "zscore_constant_columns_become_zeros"
COPIES = {  # what is copied -> (the copy, the origin of the secret it gives away)
    "data": (f"import numpy as np\n\n{HIDDEN_DATA}\n",
             f"checks/test_scores_hidden.py: `{HIDDEN_DATA}`"),
    "name in a string": (f'SEE = "{HIDDEN_NAME}"\n',
                         "scores.zscore_constant_columns_become_zeros (a constant column "
                         "becomes zeros)"),
    "name in a comment": (f"# see {HIDDEN_NAME}\n",
                          "scores.zscore_constant_columns_become_zeros (a constant column "
                          "becomes zeros)"),
}


@pytest.mark.fast
@pytest.mark.parametrize("copy", sorted(COPIES))
@pytest.mark.parametrize("where", ["checks/scores_cases.py", "checks/test_scores.py",
                                   "exercises/scores.py"])
def test_hidden_checks_content_copied_into_a_shipped_file_is_found(tmp_path, where, copy):
    """A visible check, its helper or a stub cannot vouch for a hidden check's data or name by
    holding a copy of them: they are what ships."""
    source = {"checks/scores_cases.py": CASES, "checks/test_scores.py": VISIBLE,
              "exercises/scores.py": STUB}[where]
    text, origin = COPIES[copy]
    copied = f"{source}\n{text}"
    course = write_course(tmp_path / "course", **{where.replace("/", "__").replace(".py", "_py"):
                                                  copied})
    found = {origin for path, origin in leaks_in(course, {where: copied}, tmp_path)}
    assert origin in found


@pytest.mark.fast
def test_hidden_idioms_a_visible_check_shares_are_no_secret(tmp_path):
    """A hidden check's call without data (`got = sub.call("zscore", x)`) that a visible check
    shares is no secret: the unchanged course ships its visible files without a leak."""
    course = write_course(tmp_path / "course")
    assert leaks_in(course, {"checks/test_scores.py": VISIBLE,
                             "checks/scores_cases.py": CASES}, tmp_path) == set()


# --------------------------------------------------------------------------- the release


def torchgrade(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_a_release_with_a_solution_in_a_stub_docstring_is_refused_in_one_line(tmp_path):
    course = write_course(tmp_path / "course", exercises__scores_py=_in_docstring(STUB))
    out = tmp_path / "release"
    proc = torchgrade("release", "--out", out, "--course", course, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "exercises/scores.py: solution solutions/scores.py: zscore" in lines[0]
    assert not out.exists() or not any(out.iterdir())
    # The course as written releases.
    shutil.rmtree(course)
    write_course(course)
    proc = torchgrade("release", "--out", out, "--course", course, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- 3: unshipped reach

REACHES = {
    "imported": 'from grader import solution_module\n\nREF = solution_module("scores")\n',
    "attribute": 'import grader\n\nREF = grader.solution_module("scores")\n',
    "getattr": 'import grader\n\nREF = getattr(grader, "solution_module")("scores")\n',
    "getattr folded": 'import grader\n\nREF = getattr(grader, "solution" + "_module")\n',
    "getattr computed": 'import grader as g\n\nNAME = "sol"\nREF = getattr(g, NAME + "ution")\n',
    "import_module": 'import importlib\n\nM = importlib.import_module("scores_secret_hidden")\n',
    "__import__ folded": 'M = __import__("scores_secret" + "_hid" "den")\n',
    "joined": 'import importlib\n\n'
              'M = importlib.import_module("".join(["scores_", "secret_hidden"]))\n',
    "computed": 'from importlib import import_module as im\n\nBASE, KIND = "scores_secret", "hid"\n'
                'M = im(BASE + "_" + KIND + "den")\n',
    "sys.modules": 'import sys\n\nM = sys.modules.get("scores_secret_hidden")\n',
    "a course helper dynamically": 'import importlib\n\n'
                                   'M = importlib.import_module("scores_more")\n',
    "spec from file": 'import importlib.util as u\n\n'
                      'S = u.spec_from_file_location("m", "../solutions/scores.py")\n',
}


@pytest.mark.fast
@pytest.mark.parametrize("where", ["test_scores.py", "scores_cases.py"])
@pytest.mark.parametrize("reach", sorted(REACHES))
def test_a_shipped_check_that_reaches_what_never_ships_is_refused(tmp_path, reach, where):
    """A visible check (or a helper it imports) that needs a solution or a hidden helper works
    in the full grader and fails for every student: the release refuses it, in one line."""
    from grader.release.build import ReleaseError, _refuse_unshipped_reach

    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "scores_secret_hidden.py").write_text("SECRET = 1\n")
    (checks / "scores_more.py").write_text("MORE = 1\n")
    (checks / "test_scores.py").write_text("from scores_cases import CASES\n")
    (checks / "scores_cases.py").write_text("CASES = []\n")
    (checks / where).write_text((checks / where).read_text() + REACHES[reach])
    with pytest.raises(ReleaseError) as caught:
        _refuse_unshipped_reach([checks / "test_scores.py"], {"scores_cases"}, checks)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{where}, line ")


@pytest.mark.fast
def test_honest_shipped_checks_reach_nothing_unshipped(tmp_path):
    """The shipped curriculum's visible checks and helpers, and honest look-alikes: a docstring
    naming a hidden helper, `model.eval()`, importing a library dynamically by a constant."""
    from grader.release.build import _refuse_unshipped_reach, check_helpers
    from grader.course.folder import default_course

    checks_dir = default_course().checks_dir
    visible = sorted(p for p in checks_dir.glob("test_*.py") if not p.stem.endswith("_hidden"))
    _refuse_unshipped_reach(visible, check_helpers(visible, checks_dir), checks_dir)
    (tmp_path / "scores_secret_hidden.py").write_text("SECRET = 1\n")
    (tmp_path / "test_scores.py").write_text(
        '"""Cases live in scores_secret_hidden.py for the hidden checks."""\n'
        "import importlib\n\nJSON = importlib.import_module('json')\n\n\n"
        "def f(model):\n    return model.eval()\n")
    _refuse_unshipped_reach([tmp_path / "test_scores.py"], set(), tmp_path)


# --------------------------------------------------------------------------- 4: shadowing


@pytest.mark.fast
@pytest.mark.parametrize("name", ["numpy", "torch", "grader", "pytest", "json", "_pytest",
                                  "test_scores"])
def test_a_check_helper_named_like_an_installed_module_is_refused(tmp_path, name):
    """A file of checks/ is imported by plain name with checks/ first on sys.path: named like
    an installed module it hides it from the grader and the checks (or is hidden by it). Every
    file counts; `test_scores` is installed nowhere and stays allowed."""
    from grader.course.folder import CourseError

    course = write_course(tmp_path / "course")
    (course / "checks" / f"{name}.py").write_text("X = 1\n")
    if name == "test_scores":
        load_course(course)
        return
    with pytest.raises(CourseError) as caught:
        load_course(course)
    message = str(caught.value)
    assert "\n" not in message and f"checks/{name}.py" in message
    assert f"installed module {name} " in message


@pytest.mark.fast
def test_a_helper_added_after_loading_is_seen(tmp_path):
    from grader.course.folder import CourseError

    course = write_course(tmp_path / "course")
    load_course(course)
    (course / "checks" / "pytest.py").write_text("X = 1\n")
    with pytest.raises(CourseError, match="pytest"):
        load_course(course)


@pytest.mark.slow
@pytest.mark.parametrize("command", [("check", "exercises/scores.py"),
                                     ("release", "--out", "rel"),
                                     ("grade", "class", "--out", "out")])
def test_every_command_refuses_a_shadowing_course_in_one_line(tmp_path, command):
    course = write_course(tmp_path / "course", checks__numpy_py="X = 1\n")
    (tmp_path / "class" / "ada").mkdir(parents=True)
    (tmp_path / "class" / "ada" / "scores.py").write_text(SOLUTION)
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "scores.py").write_text(SOLUTION)
    proc = torchgrade(*command, "--course", course, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "numpy.py" in lines[0] and "installed module numpy" in lines[0]


@pytest.mark.fast
def test_another_courses_helpers_on_sys_path_are_no_installed_modules(tmp_path):
    """A process that graded one course has its checks folder on sys.path: a second course
    with helpers of the same names is no collision."""
    import sys

    from grader.course.folder import import_checks_from

    first = write_course(tmp_path / "first")
    import_checks_from(first / "checks")
    try:
        load_course(write_course(tmp_path / "second"))
    finally:
        sys.path.remove(str((first / "checks").resolve()))
