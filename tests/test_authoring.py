"""Course authoring: `torchgrade new-exercise` and the author's guide's worked example.

The slow tests grade real course folders in the sandbox: the worked example's files, extracted
from docs/AUTHORING.md, and a freshly scaffolded exercise. For each: the solution scores full
marks, the stub zero with a message on every check, every mutant fails exactly the checks its
`# must fail:` line declares, and every check is failed by some mutant. The fast ones test the
scaffold's refusals and its minimal edits of course.toml (no sandbox).
"""

from __future__ import annotations

import doctest

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from grader.authoring.verify import verify
from grader.authoring.scaffold import add_exercise, files_of, new_exercise
from grader.course.folder import load_course
from grader.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "AUTHORING.md"
MARKER = re.compile(r"<!-- example-file: (\S+) -->\n```[a-z]*\n(.*?)\n```", re.DOTALL)
EXAMPLE = "softmax-course"

fast = pytest.mark.fast


def example_files() -> dict[str, str]:
    """The worked example's files as the guide writes them: relative path -> text."""
    return {path: body + "\n" for path, body in MARKER.findall(GUIDE.read_text(encoding="utf-8"))}


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- grading a course


def declared_failures(mutant: Path) -> set[str]:
    first = mutant.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# must fail:"), f"{mutant}: line 1 is not `# must fail: ...`"
    return {name.strip() for name in first.removeprefix("# must fail:").split(",") if name.strip()}


def prove(course: Path, exercise: str) -> None:
    """What `torchgrade verify` proves of one exercise of a course folder (its solution three
    times at full marks, its stub at zero with a message on every check, each mutant failing
    exactly its `# must fail:` line, every check failed by some mutant), by verify itself."""
    verdict = verify(load_course(course), [exercise], max_mutants=0, jobs=1).exercises[exercise]
    assert verdict.problems == [], verdict.problems
    assert verdict.solution_full_marks and verdict.stub_scores_zero
    assert verdict.declared_mutants.total == verdict.declared_mutants.as_declared > 0
    assert verdict.checks_never_failed == []
    mutants = sorted((course / "mutants" / exercise).glob("*.*"))
    assert mutants
    for mutant in mutants:
        declared_failures(mutant)  # the guide's line-1 format, for patches and whole copies


@pytest.fixture
def worked_example(tmp_path) -> Path:
    """The worked example, extracted from the guide."""
    write_files(tmp_path, example_files())
    return tmp_path / EXAMPLE


def test_the_worked_example_grades_as_the_guide_says(worked_example):
    prove(worked_example, "softmax_rows")


def test_a_new_exercise_passes_at_once(tmp_path):
    course = tmp_path / "mycourse"
    new_exercise("scaled_rows", course)
    prove(course, "scaled_rows")


# --------------------------------------------------------------------------- fast: the guide


@fast
def test_the_worked_example_is_complete():
    files = example_files()
    ex = f"{EXAMPLE}/"
    expected = {"course.toml", "exercises/softmax_rows.py", "solutions/softmax_rows.py",
                "checks/test_softmax_rows.py", "checks/test_softmax_rows_hidden.py"}
    assert expected <= {p.removeprefix(ex) for p in files}
    assert any(p.startswith(f"{ex}mutants/softmax_rows/") for p in files)
    course = tomllib.loads(files[f"{ex}course.toml"])
    assert course["exercises"] == ["softmax_rows"]
    for path, text in files.items():
        if path.endswith(".py"):
            compile(text, path, "exec")
    # The guide's checks use the public API only.
    for path, text in files.items():
        if "/checks/test_" in path:
            imports = re.findall(r"^from (\S+) import", text, re.MULTILINE)
            assert set(imports) <= {"grader", "softmax_rows_cases"}, (path, imports)


def test_a_patch_made_as_the_guide_says_is_proved_by_verify(worked_example, tmp_path):
    """The guide's recipe: copy the solution, put the mistake in the copy, `diff -u` under a
    `# must fail:` line; verify grades the patched solution and finds it fails as declared."""
    mutants = worked_example / "mutants" / "softmax_rows"
    for old in mutants.iterdir():
        old.unlink()
    solution = worked_example / "solutions" / "softmax_rows.py"
    wrong = tmp_path / "no_shift.py"
    wrong.write_text(solution.read_text().replace("np.exp(shifted)", "np.exp(x)"))
    diff = subprocess.run(["diff", "-u", str(solution), str(wrong)], capture_output=True,
                          text=True)
    assert diff.returncode == 1, diff.stderr
    (mutants / "no_shift.diff").write_text(f"# must fail: large_scores\n{diff.stdout}")
    (mutants / "columns.py").write_text(  # a whole copy, beside it
        "# must fail: matches_torch, large_scores\nimport numpy as np\n\n\n"
        "def softmax_rows(x):\n    e = np.exp(x - x.max(axis=0, keepdims=True))\n"
        "    return e / e.sum(axis=0, keepdims=True)\n")
    verdict = verify(load_course(worked_example), ["softmax_rows"], max_mutants=0,
                     jobs=1).exercises["softmax_rows"]
    assert verdict.problems == [] and verdict.checks_never_failed == [], verdict
    assert verdict.declared_mutants.total == verdict.declared_mutants.as_declared == 2


@fast
def test_every_guide_block_that_names_a_file_is_extracted():
    """A marker not followed by a code block would silently drop a file from the test above."""
    text = GUIDE.read_text(encoding="utf-8")
    assert text.count("<!-- example-file:") == len(example_files())


# --------------------------------------------------------------------------- fast: new-exercise


@fast
def test_new_exercise_creates_the_course(tmp_path):
    course = tmp_path / "ml101"
    made = new_exercise("scale_it", course)
    assert made.created_course
    data = tomllib.loads((course / "course.toml").read_text(encoding="utf-8"))
    assert data == {"name": "ml101", "exercises": ["scale_it"]}
    assert {str(p) for p in made.files} == {str(p) for p in files_of("scale_it")}
    for rel in made.files:
        if rel.suffix == ".py":
            compile((course / rel).read_text(encoding="utf-8"), str(rel), "exec")
    # The mutants are patches of the solution that state only their change.
    mutants = load_course(course).mutants("scale_it")
    assert {m.path.name for m in mutants} == {"adds.diff", "in_place.diff"}
    for m in mutants:
        assert len(m.path.read_text(encoding="utf-8").splitlines()) < 12, m.path
        compile(m.source(), str(m.path), "exec")
        assert "x + factor" in m.source() or "x *= factor" in m.source()
    visible = (course / "checks" / "test_scale_it.py").read_text(encoding="utf-8")
    assert "from grader import" in visible and "grader." not in visible.replace(
        "from grader import", "")
    # The examples in the docstrings run as written (the stub's too: students try them).
    for rel in made.files:
        if rel.parts[0] in ("exercises", "solutions"):
            namespace: dict = {}
            exec(compile((course / rel).read_text(encoding="utf-8"), str(rel), "exec"),
                 namespace)
            if rel.parts[0] == "solutions":
                finder = doctest.DocTestFinder()
                for test in finder.find(namespace["scale"], "scale", globs=namespace):
                    assert doctest.DocTestRunner().run(test).failed == 0, rel
            assert "np" in namespace, rel
    second = new_exercise("other", course)
    assert not second.created_course
    assert tomllib.loads((course / "course.toml").read_text())["exercises"] == ["scale_it",
                                                                                "other"]


@fast
@pytest.mark.parametrize("name, why", [
    ("1abc", "not a Python identifier"), ("class", "not a Python identifier"),
    ("a-b", "not a Python identifier"), ("", "not a Python identifier"),
    ("bughunt_x", "bug hunts"), ("softmax_hidden", "_hidden"),
])
def test_new_exercise_refuses_a_bad_name_and_writes_nothing(tmp_path, name, why):
    with pytest.raises(UsageError, match=why) as caught:
        new_exercise(name, tmp_path / "c")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "c").exists()


@fast
def test_new_exercise_refuses_an_existing_exercise_and_changes_nothing(tmp_path):
    course = tmp_path / "c"
    new_exercise("scale_it", course)
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    with pytest.raises(UsageError, match="already exists"):
        new_exercise("scale_it", course)
    # Files there but not listed (an author's own stub): refused too, nothing replaced.
    (course / "exercises" / "mine.py").write_text("# mine\n")
    with pytest.raises(UsageError, match="already exists.*exercises/mine.py"):
        new_exercise("mine", course)
    assert (course / "exercises" / "mine.py").read_text() == "# mine\n"
    after = {p: p.read_bytes() for p in course.rglob("*") if p.is_file() and p.name != "mine.py"}
    assert after == before


@fast
def test_the_cli_says_one_line_and_exits_2(tmp_path, capsys, monkeypatch):
    from grader.cli import main

    monkeypatch.delenv("TORCHGRADE_COURSE", raising=False)
    assert main(["new-exercise", "x y", "--course", str(tmp_path / "c")]) == 2
    assert main(["new-exercise", "ok_name"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "not a Python identifier" in err[0] and "--course" in err[1]
    monkeypatch.setenv("TORCHGRADE_COURSE", str(tmp_path / "env"))
    assert main(["new-exercise", "ok_name"]) == 0
    assert (tmp_path / "env" / "exercises" / "ok_name.py").exists()
    assert "torchgrade verify --course" in capsys.readouterr().out


TOML_CASES = {
    "one line": ('name = "c"\nexercises = ["a", "b"]\n',
                 'name = "c"\nexercises = ["a", "b", "new"]\n'),
    "empty": ('name = "c"\nexercises = []\n', 'name = "c"\nexercises = ["new"]\n'),
    "one per line": ('name = "c"\nexercises = [\n    "a",  # first\n    "b",\n]\n\n'
                     '[[equivalent]]\nexercise = "a"\nchange = "x"\nreason = "y"\n',
                     'name = "c"\nexercises = [\n    "a",  # first\n    "b",\n    "new",\n]\n\n'
                     '[[equivalent]]\nexercise = "a"\nchange = "x"\nreason = "y"\n'),
    "no trailing comma": ('exercises = [\n  "a",\n  "b"  # ]\n]\nname = "c"\n',
                          'exercises = [\n  "a",\n  "b", "new"  # ]\n]\nname = "c"\n'),
    "brackets in a string": ("name = 'c]['\nexercises = ['a]'] # tail\n",
                             "name = 'c]['\nexercises = ['a]', \"new\"] # tail\n"),
    "no key": ('# my course\nname = "c"\n\n[[equivalent]]\nexercise = "a"\n'
               'change = "x"\nreason = "y"\n',
               '# my course\nname = "c"\n\nexercises = ["new"]\n[[equivalent]]\n'
               'exercise = "a"\nchange = "x"\nreason = "y"\n'),
}


@fast
@pytest.mark.parametrize("case", sorted(TOML_CASES))
def test_course_toml_gets_the_name_and_nothing_else(case):
    before, after = TOML_CASES[case]
    assert add_exercise(before, "new") == after
    old, new = tomllib.loads(before), tomllib.loads(after)
    assert new == {**old, "exercises": [*old.get("exercises", []), "new"]}


@fast
def test_course_toml_that_cannot_be_edited_safely_is_refused():
    with pytest.raises(UsageError, match="not valid TOML"):
        add_exercise('name = "c\n', "new")
    with pytest.raises(UsageError, match="list of exercise names"):
        add_exercise('exercises = "a"\n', "new")
    with pytest.raises(UsageError, match="already exists"):
        add_exercise('exercises = ["new"]\n', "new")
    # A list this reading does not follow (a multi-line string in it): by hand.
    with pytest.raises(UsageError, match="add it by hand"):
        add_exercise('exercises = ["""a"""]\n', "new")


def test_the_student_release_ships_no_authoring_tools(student_release):
    """`grader.authoring` is for instructors: its scaffold's templates hold a whole exercise
    with its solution and hidden check (a course made with it would leak them), and the
    release's `new-exercise` says it is not part of the release."""
    import subprocess
    import sys

    assert (student_release / "grader" / "api.py").exists()  # checks import `from grader`
    assert not (student_release / "grader" / "authoring").exists()
    proc = subprocess.run([sys.executable, "-m", "grader", "new-exercise", "x", "--course",
                           str(student_release.parent / "c")], cwd=student_release,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not part of the student release" in proc.stderr
    assert not (student_release.parent / "c").exists()


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in root.rglob("*")}


@fast
@pytest.mark.parametrize("blocker", ["exercises", "mutants", "mutants/scale_it"])
def test_new_exercise_that_cannot_write_everything_writes_nothing(tmp_path, blocker):
    """A file where the scaffold needs a folder (the last one it writes into, too): refused in
    one line before anything is written."""
    course = tmp_path / "c"
    course.mkdir()
    (course / "course.toml").write_text('name = "c"\nexercises = []\n')
    (course / blocker).parent.mkdir(parents=True, exist_ok=True)
    (course / blocker).write_text("in the way\n")
    before = _snapshot(course)
    with pytest.raises(UsageError, match="nothing was written") as caught:
        new_exercise("scale_it", course)
    assert "\n" not in str(caught.value) and blocker in str(caught.value)
    assert _snapshot(course) == before


@fast
def test_new_exercise_with_a_read_only_course_toml_writes_nothing(tmp_path, monkeypatch):
    """course.toml is written last: a read-only one is refused before the exercise's files are
    written (root may write anyway, so os.access says what a user's would), and a write that
    fails all the same is undone."""
    import os

    import grader.authoring.scaffold as scaffold

    course = tmp_path / "c"
    new_exercise("first", course)
    toml = course / "course.toml"
    toml.chmod(0o444)
    before = _snapshot(course)
    real_access = os.access
    monkeypatch.setattr(scaffold.os, "access",
                        lambda p, mode: mode != os.W_OK and real_access(p, mode)
                        if Path(p) == toml else real_access(p, mode))
    with pytest.raises(UsageError, match="course.toml: not writable; nothing was written"):
        new_exercise("scale_it", course)
    assert _snapshot(course) == before
    monkeypatch.undo()

    real_write = Path.write_text

    def refuse(self, *args, **kwargs):
        if self == toml:
            raise PermissionError(13, "Permission denied", str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refuse)
    with pytest.raises(UsageError, match="course.toml: cannot be written.*nothing was written"):
        new_exercise("scale_it", course)
    assert _snapshot(course) == before


@fast
@pytest.mark.parametrize("name", ["Foo", "MyExercise", "é"])
def test_new_exercise_writes_only_names_a_course_accepts(tmp_path, name):
    with pytest.raises(UsageError, match="lower case"):
        new_exercise(name, tmp_path / "c")
    assert not (tmp_path / "c").exists()
    new_exercise(name.lower() if name.isascii() else "e", tmp_path / "c")
    load_course(tmp_path / "c").check_sources()


@fast
@pytest.mark.parametrize("option, where, says", [
    ("--html", "{folder}", "is a folder"),
    ("--json", "{file}/report.json", "is not a folder"),
    ("--html", "{file}/deeper/page.html", "is not a folder"),
])
def test_verify_refuses_an_unwritable_output_before_it_runs(tmp_path, capsys, monkeypatch,
                                                             option, where, says):
    """--html and --json are written after the whole (long) run: a path that cannot take them
    is refused first, in one line, exit 2, nothing graded."""
    from grader.cli import main

    course = tmp_path / "c"
    new_exercise("scale_it", course)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file\n")
    path = where.format(folder=tmp_path / "folder", file=tmp_path / "file")
    monkeypatch.setenv("TORCHGRADE_COURSE", "")
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--course", str(course), "--max-mutants", "0", option, path]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and f"{option} {path}: cannot be written there" in err[0], err
    assert says in err[0] and "Verifying" not in captured.out


@fast
@pytest.mark.parametrize("action", ["always", "error"])
def test_compiling_a_submission_shows_no_compiler_warning(action):
    """`verify`'s generated mutants say `x is 0` (a `None` -> `0` change): the grader's syntax
    check of a submission prints no SyntaxWarning on the terminal, and under -W error does
    not take one for a syntax error."""
    import warnings

    from grader.intake.budget import AnalysisBudget
    from grader.intake.submission import syntax_problem
    from grader.models import SourceChunk

    chunk = SourceChunk(code="def f(x):\n    return x is 0\n", filename="m.py", label="m.py")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        assert syntax_problem(chunk, AnalysisBudget()) is None
    assert caught == []


@fast
def test_the_notebook_title_says_the_exercise_once(tmp_path):
    """The scaffolded stub's docstring begins with the exercise's name: the notebook's title is
    that summary, not `name: name: ...`; a summary without it gets the name in front."""
    from grader.release.notebooks import exercise_notebook

    source = files_of("scale_it")[Path("exercises", "scale_it.py")]
    title = exercise_notebook("scale_it", source=source).cells[0].source.splitlines()[0]
    assert title.replace("\\", "") == ("# scale_it: a starting point written by `torchgrade "
                                       "new-exercise`; make it your own exercise.")
    wrapped = '"""Scaling arrays,\nelement by element.\n\nThe contract."""\n'
    intro = exercise_notebook("scale_it", source=wrapped).cells[0].source
    assert intro.startswith("# scale_it: Scaling arrays, element by element.\n\nThe contract.")
