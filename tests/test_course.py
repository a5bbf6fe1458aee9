"""Course folders (grader/course/folder.py): a course is loaded, validated with one clear line,
graded, released and diagnosed like the shipped curriculum, and two courses never mix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import faults
from grader.course.patch import apply_patch, make_patch, parse_patch
from grader.course.folder import (CourseError, active_course, default_course, import_checks_from,
                                  load_course, use_course)

STUB = '''"""Scaling: the exercise of a tiny course."""


def scale(x, factor):
    """Return `x` times `factor`, elementwise (x: a numpy array).

    >>> scale(np.array([1.0, 2.0]), 3.0)
    array([3., 6.])
    """
    raise NotImplementedError
'''
SOLUTION = '''"""Scaling: reference solution."""


def scale(x, factor):
    return x * factor
'''
VISIBLE = '''"""Visible checks of scale."""

import numpy as np
from scale_cases import CASES

from grader import check, expect_array, fail


@check(points=2, targets="scale", visibility="visible")
def test_scale_values(sub):
    """scale multiplies every element"""
    for x, factor in CASES:
        got = sub.call("scale", x, factor)
        if isinstance(got, np.ndarray) and got.shape == x.shape and factor == 0 and got.any():
            fail("scale(x, 0) should be all zeros", fault="scale-ignores-zero")
        expect_array(got, x * factor, call=f"scale(x, {factor})")
'''
HIDDEN = '''"""Hidden checks of scale."""

import numpy as np

from grader import check, expect_array


@check(points=1, targets="scale")
def test_scale_negative(sub):
    """scale handles a negative factor"""
    x = np.arange(4.0)
    expect_array(sub.call("scale", x, -2.0), x * -2.0, call="scale(x, -2.0)")
'''
CASES = '''import numpy as np

CASES = [(np.arange(3.0), 2.0), (np.ones((2, 2)), 0.5), (np.arange(3.0), 0.0)]
'''
FAULTS = '''[[fault]]
id = "scale-ignores-zero"
title = "A zero factor is ignored"
symptom = "scale(x, 0) returns x"
cause = "an `if factor:` guard"
fix = "multiply whatever the factor"
exercises = ["scale"]
detected_by = ["scale.scale_values"]
'''


def write_course(root: Path, name: str = "Tiny") -> Path:
    files = {"course.toml": f'name = "{name}"\nexercises = ["scale"]\n',
             "exercises/scale.py": STUB, "solutions/scale.py": SOLUTION,
             "checks/test_scale.py": VISIBLE, "checks/test_scale_hidden.py": HIDDEN,
             "checks/scale_cases.py": CASES, "faults.toml": FAULTS,
             "mutants/scale/ignores_zero.py": "# must fail: scale_values\n"
             "def scale(x, factor):\n    return x * factor if factor else x\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def course_dir(tmp_path):
    return write_course(tmp_path / "tiny")


@pytest.fixture(autouse=True)
def back_to_default():
    yield
    use_course(None)


# --------------------------------------------------------------------------- loading


@pytest.mark.fast
def test_a_course_folder_is_loaded(course_dir):
    course = load_course(course_dir)
    assert course.name == "Tiny" and course.exercises == ("scale",)
    assert course.stub("scale").read_text() == STUB
    assert [m.name for m in course.mutants("scale")] == ["ignores_zero"]
    assert course.mutants("scale")[0].fails == {"scale.scale_values"}
    assert [f.name for f in course.check_files()] == ["test_scale.py", "test_scale_hidden.py"]


@pytest.mark.fast
@pytest.mark.parametrize("problem, files, says", [
    ("missing", {}, "not a course folder"),
    ("bad toml", {"course.toml": "name = \n"}, "not valid TOML"),
    ("no exercises", {"course.toml": 'name = "x"\n'}, "exercises"),
    ("bad name", {"course.toml": 'name = "x"\nexercises = ["Not-A-Name"]\n'}, "Python names"),
    ("unknown key", {"course.toml": 'name = "x"\nexercises = ["a"]\nexercize = 1\n'},
     "exercize"),
])
def test_a_broken_course_gets_one_clear_line(tmp_path, problem, files, says):
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    with pytest.raises(CourseError, match=says) as info:
        load_course(tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.fast
def test_a_mutant_must_say_what_it_fails(course_dir):
    (course_dir / "mutants" / "scale" / "silent.py").write_text("def scale(x, f):\n    return x\n")
    with pytest.raises(CourseError, match="must fail"):
        load_course(course_dir).mutants("scale")


# --------------------------------------------------------------------------- mutants as patches

IGNORES_ZERO = """# must fail: scale_values
# diagnoses: scale-ignores-zero
--- solutions/scale.py
+++ solutions/scale.py
@@ -4,2 +4,2 @@
 def scale(x, factor):
-    return x * factor
+    return x * factor if factor else x
"""


@pytest.mark.fast
def test_a_patch_mutant_is_the_solution_with_its_change(course_dir):
    """`<name>.diff`: the declaration lines, then a unified diff of the solution; the module
    graded is those lines over the patched solution (line numbers as a whole copy's)."""
    mutants = course_dir / "mutants" / "scale"
    (mutants / "ignores_zero.py").unlink()
    (mutants / "ignores_zero.diff").write_text(IGNORES_ZERO)
    [m] = load_course(course_dir).mutants("scale")
    assert (m.name, m.fails, m.diagnoses) == ("ignores_zero", {"scale.scale_values"},
                                               {"scale-ignores-zero"})
    assert m.source() == ("# must fail: scale_values\n# diagnoses: scale-ignores-zero\n"
                          + SOLUTION.replace("x * factor\n", "x * factor if factor else x\n"))


@pytest.mark.fast
def test_both_forms_load_side_by_side_and_a_name_is_one_or_the_other(course_dir):
    mutants = course_dir / "mutants" / "scale"
    (mutants / "doubles.diff").write_text(IGNORES_ZERO.replace("x * factor if factor else x",
                                                               "2 * x * factor"))
    course = load_course(course_dir)
    assert [(m.name, m.path.suffix) for m in course.mutants("scale")] == [
        ("doubles", ".diff"), ("ignores_zero", ".py")]
    whole = course.mutants("scale")[1]
    assert whole.source() == (mutants / "ignores_zero.py").read_text()  # as before
    (mutants / "ignores_zero.diff").write_text(IGNORES_ZERO)
    with pytest.raises(CourseError, match="ignores_zero is there twice") as info:
        load_course(course_dir).mutants("scale")
    assert "\n" not in str(info.value)


@pytest.mark.fast
def test_a_patch_that_no_longer_applies_is_one_line_naming_the_file_and_the_hunk(course_dir):
    """The solution edited under the patch: CourseError naming the mutant, the hunk and the
    line that differs. Lines gained elsewhere do not matter (the hunk is found where it is)."""
    mutants = course_dir / "mutants" / "scale"
    (mutants / "ignores_zero.diff").write_text(IGNORES_ZERO.replace("ignores_zero", "x"))
    (mutants / "ignores_zero.py").unlink()
    solution = course_dir / "solutions" / "scale.py"
    solution.write_text("import math\n\n" + SOLUTION)  # moved down two lines: still applies
    assert "factor if factor else x" in load_course(course_dir).mutants("scale")[0].source()
    solution.write_text(SOLUTION.replace("return x * factor", "return factor * x"))
    with pytest.raises(CourseError) as info:
        load_course(course_dir).mutants("scale")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{mutants / 'ignores_zero.diff'}: hunk 1 (@@ -4,2 +4,2 @@) "
                              "does not apply to solutions/scale.py: line 5 reads "
                              "'    return factor * x', the hunk expects "
                              "'    return x * factor'"), message


@pytest.mark.fast
@pytest.mark.parametrize("text, says", [
    ("# must fail: scale_values\ndef scale(x, f):\n    return x\n",
     "line 2: expected a unified diff"),
    ("# must fail: scale_values\n--- a\n+++ b\n", "holds no hunk"),
    ("# must fail: scale_values\n@@ -3,2 +3,2 @@\n def scale(x, factor):\n",
     r"hunk 1 \(@@ -3,2 \+3,2 @@, line 2\) ends early"),
    ("# must fail: scale_values\n@@ -3,1 +3,1 @@\n-    return x * factor\n+    return x\n"
     "+    pass\n", "line 5: expected a hunk"),
    ("# must fail: scale_values\n@@ -3,2 +3,2 @@\n*def scale(x, factor):\n",
     "does not fit its header's counts"),
    ("--- solutions/scale.py\n@@ -4 +4 @@\n-    return x * factor\n+    return x\n",
     "line 1 must be `# must fail:"),
])
def test_a_patch_that_cannot_be_read_is_one_line(course_dir, text, says):
    (course_dir / "mutants" / "scale" / "bad.diff").write_text(text)
    with pytest.raises(CourseError, match=says) as info:
        load_course(course_dir).mutants("scale")
    assert "\n" not in str(info.value) and "bad.diff" in str(info.value)


@pytest.mark.fast
def test_a_patch_reads_as_diff_writes_it(course_dir):
    """What `diff -u` prints (dated file lines), `git diff` (its own lines before them), a
    blank context line whose space an editor stripped, and a file without a final newline."""
    solution = course_dir / "solutions" / "scale.py"
    solution.write_text(SOLUTION + "\nLIMIT = 3")
    patch = ("# must fail: scale_values\n"
             "diff --git a/solutions/scale.py b/solutions/scale.py\n"
             "index 1234567..89abcde 100644\n"
             "--- solutions/scale.py\t2026-12-07 10:00:00.000000000 +0100\n"
             "+++ /tmp/wrong.py\t2026-12-07 10:01:00.000000000 +0100\n"
             "@@ -4,4 +4,4 @@\n"
             " def scale(x, factor):\n"
             "     return x * factor\n"
             "\n"
             "-LIMIT = 3\n"
             "\\ No newline at end of file\n"
             "+LIMIT = 4\n")
    (course_dir / "mutants" / "scale" / "limit.diff").write_text(patch)
    limit = {m.name: m for m in load_course(course_dir).mutants("scale")}["limit"]
    assert limit.source() == "# must fail: scale_values\n" + SOLUTION + "\nLIMIT = 4\n"


@pytest.mark.fast
def test_make_patch_gives_back_the_copy_exactly():
    """`make_patch` then `apply_patch` is the identity on the wrong copy, whatever its lines
    hold (form feeds and Unicode separators are not line ends here) and however it ends."""
    base = "a\nb\x0cc\nd\u2028e\nf\ng\nh\n"
    for wrong in ("a\nB\x0cc\nd\u2028e\nf\ng\nh\n", base + "i", "x\n" + base, base[:-1],
                  "a\nb\x0cc\nd\u2028E\nf\ng\nh\r\n", "", "z\n"):
        patch = make_patch(base, wrong, label="solutions/m.py", context=1)
        assert apply_patch(parse_patch(patch), base) == wrong, (patch, wrong)


@pytest.mark.fast
def test_the_shipped_mutants_are_patches_under_10000_lines():
    """Issue 39: each shipped mutant states only its change; every file under the shipped
    course's mutants folder counted, under 10,000 lines. Each applies to its solution."""
    course = default_course()
    files = [p for p in course.mutants_dir.rglob("*") if p.is_file()
             and "__pycache__" not in p.parts]
    assert files and all(p.suffix == ".diff" for p in files), [
        p for p in files if p.suffix != ".diff"][:5]
    assert sum(p.read_bytes().count(b"\n") for p in files) < 10_000
    loaded = [m for e in course.exercises for m in course.mutants(e)]
    assert len(loaded) == len(files)


@pytest.mark.fast
def test_the_shipped_curriculum_is_a_course_folder():
    course = default_course()
    assert course.exercises[0] == "strides_broadcasting" and len(course.exercises) == 10
    for exercise in course.exercises:
        assert course.stub(exercise).is_file() and course.solution(exercise).is_file()
        assert course.mutants(exercise), exercise


@pytest.mark.fast
def test_a_course_inherits_the_shipped_faults_and_adds_its_own(course_dir):
    use_course(load_course(course_dir))
    catalogue = faults.catalogue()
    assert "scale-ignores-zero" in catalogue and "grad-not-zeroed" in catalogue
    assert not catalogue["grad-not-zeroed"].inject  # the shipped bug hunts are not its own
    assert faults.bughunts() == {}
    use_course(None)
    assert "scale-ignores-zero" not in faults.catalogue()


@pytest.mark.fast
def test_helpers_of_two_courses_never_mix(tmp_path):
    for name, value in (("one", 1), ("two", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "shared_cases.py").write_text(f"VALUE = {value}\n")
    seen = []
    for name in ("one", "two", "one"):
        import_checks_from(tmp_path / name)
        import shared_cases  # noqa: PLC0415 - the point: a plain-name import, as checks do

        seen.append(shared_cases.VALUE)
        del shared_cases
    assert seen == [1, 2, 1]
    import_checks_from(default_course().checks_dir)


# --------------------------------------------------------------------------- commands


def torchgrade(*args, cwd: Path, env: dict | None = None, timeout: float = 600):
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_grade_check_and_release_with_a_course(course_dir, tmp_path):
    cls = tmp_path / "class"
    for student, source in (("ada", SOLUTION), ("ben", STUB),
                            ("cy", "def scale(x, factor):\n    return x * factor if factor "
                                   "else x\n")):
        (cls / student).mkdir(parents=True)
        (cls / student / "scale.py").write_text(source)
    proc = torchgrade("grade", cls, "--out", tmp_path / "out", "--course", course_dir, "-j", "1",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {s: json.loads((tmp_path / "out" / s / "results.json").read_text())
               for s in ("ada", "ben", "cy")}
    assert results["ada"]["score"] == results["ada"]["max_score"] == 3
    assert results["ben"]["score"] == 0
    cy = {c["id"]: c for c in results["cy"]["checks"]}
    assert cy["scale.scale_values"]["status"] == "failed"
    assert cy["scale.scale_values"]["diagnoses"] == ["scale-ignores-zero"]
    assert "A zero factor is ignored" in (tmp_path / "out" / "cy" / "report.html").read_text()

    # The same course through TORCHGRADE_COURSE, from a student's point of view.
    checked = torchgrade("check", cls / "ada" / "scale.py", cwd=tmp_path,
                         env={"TORCHGRADE_COURSE": str(course_dir)})
    assert checked.returncode == 0 and "2 / 2" in checked.stdout, checked.stdout[-2000:]

    release = tmp_path / "release"
    built = torchgrade("release", "--out", release, "--course", course_dir, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    shipped = {p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file()}
    assert "grader/curriculum/checks/test_scale.py" in shipped
    assert "grader/curriculum/checks/scale_cases.py" in shipped
    assert "exercises/scale.py" in shipped
    assert not [f for f in shipped if "solutions" in f or "_hidden" in f or "mutants" in f]
    assert "scale_negative" not in "".join(
        (release / f).read_text(errors="replace") for f in shipped if not f.endswith(".whl"))
    # The release's own default course is the released one.
    student = torchgrade("check", cls / "ada" / "scale.py", cwd=release,
                         env={"TORCHGRADE_COURSE": ""})
    assert student.returncode == 0 and "2 / 2" in student.stdout, student.stdout[-2000:]


@pytest.mark.slow
def test_a_check_that_fails_itself_leaves_a_grade_that_is_not_final(course_dir, tmp_path):
    """A bug in a course's check (here a NameError in the hidden one) cost every student its
    points, the run exited 0 and the next run kept the results as up to date. Now: exit 1, the
    summary says so, and the next run grades them again (by then the check may be fixed)."""
    hidden = course_dir / "checks" / "test_scale_hidden.py"
    hidden.write_text(HIDDEN.replace("x = np.arange(4.0)", "x = np.arange(4.0) + undefined_name"))
    cls = tmp_path / "class"
    (cls / "ada").mkdir(parents=True)
    (cls / "ada" / "scale.py").write_text(SOLUTION)
    for _ in range(2):
        proc = torchgrade("grade", cls, "--out", tmp_path / "out", "--course", course_dir,
                          "-j", "1", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr[-2000:]
        assert "1 with checks that FAILED THEMSELVES" in proc.stdout, proc.stdout
        assert "already graded" not in proc.stdout  # graded again, not kept
    result = json.loads((tmp_path / "out" / "ada" / "results.json").read_text())
    failed = [c for c in result["checks"] if c["status"] != "passed"]
    assert [(c["id"], c["reason"]) for c in failed] == [("scale.scale_negative", "grader_error")]
    assert result["fingerprint"] is None and result["score"] == 2


@pytest.mark.slow
def test_an_unknown_course_is_a_usage_error(tmp_path):
    proc = torchgrade("grade", tmp_path, "--out", tmp_path / "o", "--course", tmp_path / "none",
                      cwd=tmp_path)
    assert proc.returncode == 2 and "not a course folder" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.fast
def test_active_course_follows_the_environment(course_dir, monkeypatch):
    monkeypatch.setenv("TORCHGRADE_COURSE", str(course_dir))
    assert active_course().name == "Tiny"
    monkeypatch.delenv("TORCHGRADE_COURSE")
    assert active_course() == default_course()


@pytest.mark.fast
def test_a_check_name_may_start_with_a_digit_and_a_bad_one_is_named(course_dir):
    mutants = course_dir / "mutants" / "scale"
    (mutants / "ignores_zero.py").write_text("# must fail: 3d_values\ndef scale(x, f):\n"
                                             "    return x\n")
    assert load_course(course_dir).mutants("scale")[0].fails == {"scale.3d_values"}
    (mutants / "ignores_zero.py").write_text("# must fail: values-match\n")
    with pytest.raises(CourseError, match=r"\['values-match'\].*cannot be check names"):
        load_course(course_dir).mutants("scale")


@pytest.mark.fast
def test_notebooks_of_a_course_name_it_in_their_check_cells(course_dir):
    from grader.release.notebooks import check_cell_source

    assert "course=" not in check_cell_source("scale", ["scale"])
    cell = check_cell_source("scale", ["scale"], str(course_dir))
    assert f"check('scale', 'scale', course={str(course_dir)!r})" in cell


# --------------------------------------------------------------------------- broken courses
# A course an author broke gets one line naming the file (exit 2) from every command that reads
# it, before it does anything: never a traceback, and never a class graded without the checks
# that did not load (grading used to drop them and give full marks over a smaller total).


@pytest.mark.fast
@pytest.mark.parametrize("rel, what", [("exercises/scale.py", "stub"),
                                       ("checks/test_scale.py", "visible check file")])
def test_load_course_names_a_missing_stub_or_visible_check(course_dir, rel, what):
    (course_dir / rel).unlink()
    with pytest.raises(CourseError, match=f"scale: its {what} .*{rel} is missing") as info:
        load_course(course_dir)
    assert "\n" not in str(info.value)
    (course_dir / rel).mkdir()  # a folder where the file should be
    with pytest.raises(CourseError, match=f"{rel} is not a file"):
        load_course(course_dir)


@pytest.mark.fast
def test_a_bug_hunt_is_found_without_its_faults_table_and_a_stray_path_is_refused(tmp_path):
    # A student release's course has no [[bughunt]] table (it would name the seeded faults):
    # the script is found by the name rule alone, so faults.toml may not say otherwise.
    root = tmp_path / "hunts"
    files = {"course.toml": 'name = "Hunts"\nexercises = ["bughunt_tiny"]\n',
             "exercises/bughunt/tiny.py": "def run():\n    return {}\n",
             "checks/test_bughunt_tiny.py": "def test_runs(sub):\n    pass\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    course = load_course(root)
    assert course.stub("bughunt_tiny") == root.resolve() / "exercises" / "bughunt" / "tiny.py"
    (root / "faults.toml").write_text('[[bughunt]]\nexercise = "bughunt_tiny"\n'
                                      'path = "bughunt/other.py"\nseeded = ["a", "b", "c"]\n')
    with pytest.raises(CourseError, match="bughunt/tiny.py") as info:
        load_course(root)
    assert "\n" not in str(info.value)


@pytest.mark.fast
def test_the_hidden_check_file_is_optional(course_dir):
    (course_dir / "checks" / "test_scale_hidden.py").unlink()
    assert load_course(course_dir).check_files() == [course_dir.resolve() / "checks" /
                                                     "test_scale.py"]


def _syntax(path: Path) -> None:
    path.write_text('"""A check file with a typo."""\n\ndef test_x(sub:\n    pass\n')


def _latin1(path: Path) -> None:
    path.write_bytes('"""Vérifie: written in Latin-1."""\n'.encode("latin-1"))


def _folder(path: Path) -> None:  # unreadable, even to root
    path.unlink()
    path.mkdir()


def _missing(path: Path) -> None:
    path.unlink()


BREAKS = {"syntax": _syntax, "latin1": _latin1, "folder": _folder, "missing": _missing}
BROKEN_FILES = ["exercises/scale.py", "solutions/scale.py", "checks/test_scale.py",
                "checks/test_scale_hidden.py", "checks/scale_cases.py"]


def forget_course_env(monkeypatch) -> None:
    """No TORCHGRADE_COURSE, and none left after the test: `--course` exports it, and delenv
    of a variable that is not set records nothing to restore."""
    monkeypatch.setenv("TORCHGRADE_COURSE", "")
    monkeypatch.delenv("TORCHGRADE_COURSE")


def command_line(command: str, course: Path, tmp: Path) -> list[str]:
    cls = tmp / "class"
    (cls / "ada").mkdir(parents=True, exist_ok=True)
    (cls / "ada" / "scale.py").write_text(SOLUTION)
    (tmp / "roster.csv").write_text("student_id\nada\n")
    out = ["--out", str(tmp / "out")]
    return {"grade": ["grade", str(cls), *out, "-j", "1"],
            "check": ["check", str(cls / "ada" / "scale.py"), *out],
            "release": ["release", *out], "notebooks": ["notebooks", *out],
            "notebooks --solutions": ["notebooks", "--solutions", *out],
            "variants": ["variants", "--roster", str(tmp / "roster.csv"), "--seed", "1", *out],
            "gradescope-bundle": ["gradescope-bundle", *out], "demo": ["demo", *out],
            "solution": ["solution", "scale", "--i-have-tried"],
            "verify": ["verify", "--max-mutants", "0", "--html", str(tmp / "v.html")],
            "prairielearn": ["prairielearn", *out]}[command] + ["--course", str(course)]


# What a command needs: grading needs no solution (only hidden checks that use one, and those
# fail on their own), nor a stub.
GRADES = {"grade", "check"}
COMMANDS = ["grade", "check", "release", "notebooks", "notebooks --solutions", "variants",
            "gradescope-bundle", "demo", "solution", "verify", "prairielearn"]


def broken_cases():
    for command in COMMANDS:
        for rel in BROKEN_FILES:
            for how in BREAKS:
                if how == "missing" and (rel != "solutions/scale.py" or command in GRADES
                                         or command == "notebooks"):
                    continue  # a missing stub or check: load_course, tested above
                yield command, rel, how


@pytest.mark.fast
@pytest.mark.parametrize("command, rel, how", list(broken_cases()))
def test_every_command_names_a_broken_course_file_in_one_line(course_dir, tmp_path, capsys,
                                                              monkeypatch, command, rel, how):
    from grader.cli import main

    forget_course_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    BREAKS[how](course_dir / rel)
    assert main(command_line(command, course_dir, tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchgrade: error: ") and rel in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("rel", ["checks/test_scale.py", "checks/scale_cases.py"])
def test_check_run_as_the_program_names_a_broken_course_file_in_one_line(course_dir, tmp_path,
                                                                         monkeypatch, rel):
    """Run as the program, `check` proves the course's files while its zygote starts (issue
    21): a broken one is still one line, exit 2, no report, and no sandbox folder left."""
    forget_course_env(monkeypatch)
    _syntax(course_dir / rel)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = torchgrade(*command_line("check", course_dir, tmp_path), cwd=tmp_path,
                      env={"TMPDIR": str(scratch)})
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(err) == 1 and err[0].startswith("torchgrade: error: ") and rel in err[0], err
    assert not (tmp_path / "out").exists()
    left = [p.name for p in scratch.iterdir() if p.name.startswith("torchgrade-")]
    assert left in ([], ["torchgrade-uid-locks"])  # that one is shared by every grader


@pytest.mark.fast
def test_a_course_whose_files_are_whole_passes_the_same_check(course_dir):
    course = load_course(course_dir)
    course.check_sources()
    assert course_dir.resolve() / "checks" / "scale_cases.py" in course.sources()
    default_course().check_sources()


@pytest.mark.fast
@pytest.mark.parametrize("name", ["Foo", "scale\n", "class", "ok_hidden", "é"])
def test_course_toml_refuses_what_new_exercise_refuses(tmp_path, name):
    from grader.authoring.scaffold import refuse_name
    from grader.errors import UsageError

    (tmp_path / "course.toml").write_text(f'name = "x"\nexercises = [{json.dumps(name)}]\n')
    with pytest.raises(CourseError, match="exercises must be") as info:
        load_course(tmp_path)
    with pytest.raises(UsageError) as refused:
        refuse_name(name)
    # The same rule, said the same way.
    assert str(refused.value) in str(info.value)


@pytest.mark.fast
@pytest.mark.parametrize("named", ["scale.no_such_check", "scale_values", "other.scale_values",
                                   "scale.test_scale_values"])
def test_detected_by_must_name_a_check_of_the_course(course_dir, tmp_path, capsys, monkeypatch,
                                                     named):
    """`detected_by` names checks as results do, `exercise.check`: a typo would silently never
    diagnose. Refused when the catalogue is loaded, and by every command before it starts (a
    catalogue read while grading would fail each submission on its own)."""
    from grader.cli import main

    faults_file = course_dir / "faults.toml"
    faults_file.write_text(FAULTS.replace('"scale.scale_values"', f'"{named}"'))
    use_course(load_course(course_dir))
    with pytest.raises(CourseError, match=f"scale-ignores-zero: detected_by names '{named}'"):
        faults.catalogue()
    use_course(None)
    forget_course_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(command_line("grade", course_dir, tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and "faults.toml" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.fast
@pytest.mark.parametrize("differ", [None, True, False])
def test_eval_outputs_differ_is_recorded_as_a_flag(monkeypatch, differ):
    """The dropout check records `eval_outputs_differ` as the bool `E` declares, or not at
    all when the probe had no two outputs to compare (it said None)."""
    import torch

    from grader import evidence as ev
    from grader.course.knowledge import knowledge

    use_course(default_course())
    import_checks_from(default_course().checks_dir)
    import bughunt_common

    rec = {"eval_outputs_differ": differ, "train_outputs_differ": True,
           "active_dropout_in_eval": 0, "modules_created_in_forward": 0}
    monkeypatch.setattr(bughunt_common, "model_record", lambda *a: rec)
    evidence: dict = {}
    try:
        bughunt_common.verify_dropout(None, "Net", [], torch.zeros(1), evidence)
    except Exception:  # noqa: BLE001 - a failed check is fine here: the evidence is the point
        pass
    assert ev.problems(evidence, knowledge(default_course()).keys) == []
    assert evidence.get("eval_outputs_differ") is differ


@pytest.mark.fast
def test_a_mutant_that_is_not_utf8_is_named(course_dir):
    (course_dir / "mutants" / "scale" / "latin1.py").write_bytes(
        "# must fail: scale_values\n# é\n".encode("latin-1"))
    with pytest.raises(CourseError, match=r"mutants/scale/latin1.py: not UTF-8") as info:
        load_course(course_dir).mutants("scale")
    assert "\n" not in str(info.value)
    # A mutant that does not compile is a wrong module like any other: accepted.
    (course_dir / "mutants" / "scale" / "latin1.py").write_text("# must fail: scale_values\n"
                                                                "def scale(:\n")
    assert len(load_course(course_dir).mutants("scale")) == 2


@pytest.mark.slow
def test_verify_reports_a_mutant_that_is_not_utf8_and_runs_the_others(course_dir, tmp_path):
    (course_dir / "mutants" / "scale" / "latin1.py").write_bytes(
        "# must fail: scale_values\n# é\n".encode("latin-1"))
    # A patch whose solution was edited under it: a problem of its own, one line.
    (course_dir / "mutants" / "scale" / "stale.diff").write_text(
        IGNORES_ZERO.replace("return x * factor\n", "return factor * x\n", 1))
    proc = torchgrade("verify", "--course", course_dir, "--max-mutants", "0", "--json",
                      tmp_path / "v.json", "--html", tmp_path / "v.html", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    verdict = json.loads((tmp_path / "v.json").read_text())["exercises"]["scale"]
    latin1, stale = verdict["problems"]
    assert "mutants/scale/latin1.py: not UTF-8" in latin1
    assert ("mutants/scale/stale.diff: hunk 1 (@@ -4,2 +4,2 @@) does not apply to "
            "solutions/scale.py: line 5 reads '    return x * factor'") in stale
    assert "\n" not in stale
    assert verdict["declared_mutants"]["as_declared"] == 1  # ignores_zero still ran


@pytest.mark.fast
def test_a_course_file_is_proved_by_its_fresh_bytecode_and_compiled_when_it_is_stale(
        tmp_path, monkeypatch):
    """`course_source` takes a .pyc that the import system would use (this Python's magic
    number, the source's current mtime and size) as proof that the file compiles, and compiles
    (and refuses) a file whose .pyc is stale or missing: an edit that broke it is always seen."""
    import py_compile

    from grader.course import folder

    compiled = []
    real_compile = compile

    def counting(text, filename, *args, **kwargs):
        compiled.append(Path(filename).name)
        return real_compile(text, filename, *args, **kwargs)

    monkeypatch.setattr(folder, "compile", counting, raising=False)
    good = tmp_path / "helper.py"
    good.write_text("VALUE = 1\n")
    assert folder.course_source(good) == "VALUE = 1\n" and compiled == ["helper.py"]
    py_compile.compile(str(good), doraise=True)  # what pip (or an import) leaves behind
    assert folder.compiled_as_it_is(good)
    compiled.clear()
    assert folder.course_source(good) == "VALUE = 1\n" and compiled == []
    # Broken after it was compiled (other size, later mtime): compiled again, and refused.
    good.write_text("VALUE = (\n")
    os.utime(good, (good.stat().st_atime, good.stat().st_mtime + 5))
    assert not folder.compiled_as_it_is(good)
    with pytest.raises(CourseError, match="helper.py, line 1: not valid Python"):
        folder.course_source(good)
    # Not UTF-8 is refused even with a fresh .pyc (a coding cookie lets Python compile it).
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\n")
    py_compile.compile(str(latin), doraise=True)
    with pytest.raises(CourseError, match="latin.py: not UTF-8"):
        folder.course_source(latin)
