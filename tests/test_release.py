"""The student release: what it holds, what it must not hold, and that its checks work.

`student_release` and `installed_release` (conftest.py) build the release once per session with
`torchgrade release` and install it with pip into a folder of its own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import EXERCISES, REPO, SOLUTIONS
from grader.checking.edition import StudentRelease
from grader.course.bughunt import is_bughunt
from grader.outputs.writing import read_json
from grader.release.build import (STUDENT_FAULT_FIELDS, ReleaseError, check_helpers,
                                  student_catalogue)
from grader.release.leaks import Secret, joined, scan, secrets, statements, words
from grader.release.notebooks import exercises_root, stub_path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from grader.course.registry import known_exercises
from conftest import CHECKS_DIR
from grader.checking.selection import collect_checks
from mutants import mutants_of

ALL = known_exercises()
STYLES = REPO / "tests" / "styles"


@pytest.fixture(scope="module")
def all_secrets() -> list[Secret]:
    return secrets()


@pytest.fixture(scope="module")
def checks():
    return collect_checks(ALL)


def files_of(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
            and "__pycache__" not in p.parts}


def torchgrade(env, *args, cwd, timeout=900):
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------- contents


def test_release_holds_what_a_student_needs(student_release):
    files = files_of(student_release)
    for required in ("README.md", "pyproject.toml", "constraints.txt",
                     "grader/curriculum/course.toml", "grader/checking/checks.ini",
                     "grader/student_release.json",
                     "grader/templates/report.html.j2", "grader/worker/zygote.py",
                     "grader/cli.py", "grader/jupyter/__init__.py", "grader/jupyter/server.py"):
        assert required in files, required
    for exercise in ALL:
        stub = stub_path(exercise).relative_to(EXERCISES).as_posix()  # bug hunts: a subfolder
        assert f"exercises/{stub}" in files and f"notebooks/{exercise}.ipynb" in files
        assert f"grader/curriculum/checks/test_{exercise}.py" in files  # empty if all hidden
        assert (student_release / "exercises" / stub).read_text() == \
            stub_path(exercise).read_text()
    # The helper modules the visible checks import (checks/README.md: cases and
    # verifiers), and the recorded reference values.
    checks = "grader/curriculum/checks"
    helpers = {f"{checks}/{m}_{role}.py" for role in ("cases", "verify")
               for m in ("strides_broadcasting", "manual_backward", "parameters", "training_loops")}
    helpers |= {f"{checks}/bughunt_{name}_cases.py"
                for name in ("classifier", "finetune", "pipeline", "regression")}
    assert helpers | {f"{checks}/bughunt_visible.py",
                      f"{checks}/recorded/training_loops_reference.json",
                      f"{checks}/recorded/parameters_reference.json"} <= files


def test_release_holds_nothing_grader_only(student_release):
    files = files_of(student_release)
    forbidden = re.compile(r"(^|/)(solutions|samples|tests|mutants|styles|benchmarks)(/|$)"
                           r"|_hidden\.py$|_reference\.py$|\.pyc$")
    assert not [f for f in files if forbidden.search(f)]
    # Probes only hidden checks call stay out (tracing counts the steps of pairwise_sq_dists
    # for a hidden check).
    assert "grader/probes/tracing.py" not in files
    catalogue = tomllib.loads((student_release / "grader" / "curriculum" / "faults.toml")
                              .read_text())
    assert set(catalogue) == {"fault"} and catalogue["fault"]
    assert all(set(f) <= set(STUDENT_FAULT_FIELDS) for f in catalogue["fault"])
    shipped_checks = {Path(f).name for f in files if f.startswith("grader/curriculum/checks/")}
    assert not any(name.endswith(("_hidden.py", "_reference.py")) for name in shipped_checks)


def test_visible_checks_may_not_reach_hidden_helpers_or_other_check_files(tmp_path):
    """A helper named `*_hidden` holds what only hidden checks may see: a visible check that
    imports it (directly or through another helper) fails the build, as one that imports a
    check file does; the real visible checks reach only shipped helpers."""
    (tmp_path / "m_cases_hidden.py").write_text("SECRET_INPUT = 42\n")
    (tmp_path / "m_verify.py").write_text("import m_cases_hidden\n")
    (tmp_path / "test_m_hidden.py").write_text("\n")
    for source in ("from m_cases_hidden import SECRET_INPUT\n",
                   "from m_verify import *\n",
                   "import test_m_hidden\n"):
        (tmp_path / "test_m.py").write_text(source)
        with pytest.raises(ReleaseError, match="m_cases_hidden|check file test_m_hidden"):
            check_helpers([tmp_path / "test_m.py"], checks_dir=tmp_path)
    visible = sorted(p for p in CHECKS_DIR.glob("test_*.py") if not p.stem.endswith("_hidden"))
    shipped = check_helpers(visible, CHECKS_DIR)
    assert "training_loops_verify" in shipped and "training_loops_reference" in shipped
    assert not [name for name in shipped if name.endswith("_hidden")]


def test_hidden_helpers_are_scanned_as_hidden_checks(all_secrets):
    """What moved out of the hidden check files into `*_hidden.py` helpers (their inputs, their
    own verifiers) stays a secret of the leak scan, not part of the public corpus."""
    kinds = {}
    for secret in all_secrets:
        kinds.setdefault(secret.origin.partition(":")[0], set()).add(secret.kind)
    for helper in ("training_loops_cases_hidden", "parameters_verify_hidden",
                   "bughunt_finetune_cases_hidden", "bughunt_finetune_verify_hidden"):
        assert kinds.get(f"checks/{helper}.py") == {"hidden check"}, helper


def test_release_describes_hidden_checks_by_title_only(student_release, checks):
    info = StudentRelease.model_validate_json(
        (student_release / "grader" / "student_release.json").read_text())
    hidden = [c for c in checks if c.info.visibility == "hidden"]
    assert [(h.exercise, h.points) for h in info.hidden] == \
        [(c.exercise, c.info.points) for c in hidden]
    hunts = [c for c in hidden if is_bughunt(c.exercise)]
    assert hunts, "the release has bug hunts"
    for shown, check in zip(info.hidden, hidden):
        # A bug hunt's hidden check titles would list what to look for: untitled in a release.
        assert (shown.title == check.info.title) != is_bughunt(check.exercise), shown
    text = (student_release / "grader" / "student_release.json").read_text()
    assert not any(c.name in text or c.id in text for c in hidden)
    assert not any(c.info.title in text for c in hunts)


# --------------------------------------------------------------------------- the leak scan


def test_leak_scan_of_the_release_and_its_wheel_finds_nothing(student_release, all_secrets,
                                                              tmp_path):
    shutil.copytree(student_release, tmp_path / "release")
    shutil.copytree(student_release, tmp_path / "build-copy")  # pip builds in the folder
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path / "dist"), str(tmp_path / "build-copy")], check=True,
                   capture_output=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("torchgrade_student-*.whl"))
    shutil.copy(wheel, tmp_path / "release" / wheel.name)
    # What pip installs holds every module of the release (the installed tests import the
    # development package for one that is missing, so only the wheel can tell).
    modules = {p.relative_to(student_release).as_posix()
               for p in (student_release / "grader").rglob("*.py")}
    assert modules - set(zipfile.ZipFile(wheel).namelist()) == set()
    assert len(all_secrets) > 300
    leaks, unreadable = scan(tmp_path / "release", all_secrets)
    assert unreadable == []
    assert [str(leak) for leak in leaks if not leak.allowed] == []
    # The one shipped on purpose (a probe seeds the generators set_seed seeds), in the folder
    # and in the wheel.
    assert {leak.path for leak in leaks} == {"grader/curriculum/probes/training_loops.py",
                                             f"{wheel.name}!grader/curriculum/probes/training_loops.py"}


def test_a_hidden_checks_name_that_a_visible_check_also_bears_is_no_secret(all_secrets, checks):
    """Names visible checks bear ship by design; a hidden check's own id stays a secret."""
    visible = {c.name for c in checks if c.info.visibility != "hidden"}
    shared = [c for c in checks if c.info.visibility == "hidden" and c.name in visible]
    assert shared, "some hidden check shares its name with a visible one"
    names = {s.name for s in all_secrets if s.name}
    for check in shared:
        assert check.name not in names and check.name.removeprefix("test_") not in names
        assert check.id in names


def test_leak_scan_finds_answers_however_they_are_hidden(student_release, all_secrets,
                                                         tmp_path):
    """Plant answers in a copy of the release: each must be found."""
    root = tmp_path / "release"
    shutil.copytree(student_release, root)
    solution = (SOLUTIONS / "strides_broadcasting.py").read_text()
    # 1. A solution function reformatted (other indentation, comments, quotes) in a notebook
    #    cell, in a zip inside a wheel.
    body = solution[solution.index("def is_c_contiguous"):solution.index("def transpose_view")]
    reformatted = body.replace("    ", "  ").replace("return True", "return True  # done")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        cell = {"cell_type": "code", "source": reformatted.splitlines(True)}
        z.writestr("nb/answers.ipynb", json.dumps({"cells": [cell]}))
    with zipfile.ZipFile(root / "extra-0.1-py3-none-any.whl", "w") as z:
        z.writestr("extra/bundle.zip", inner.getvalue())
    # 2. A hidden check's name in a data file, 3. a reference implementation's line in a
    #    markdown file, 4. a hidden check's input in a Python comment-free line.
    hidden = next(c for c in collect_checks(["parameters"]) if c.info.visibility == "hidden")
    (root / "grader" / "extra.json").write_text(json.dumps({"check": hidden.name}))
    reference = (CHECKS_DIR / "training_loops_reference.py").read_text()
    line = next(s for s in reference.splitlines() if "model, optimizer, loss_fn = _objects" in s)
    (root / "NOTES.md").write_text(f"Tip:\n\n    {line.strip()}\n")
    hidden_source = (CHECKS_DIR / "test_strides_broadcasting_hidden.py").read_text()
    hidden_words = {s.words for s in all_secrets if s.kind == "hidden check"}
    statement = next(t for t in statements(hidden_source)
                     if "\n" not in t and joined(words(t)) in hidden_words)
    (root / "exercises" / "more.py").write_text(f"def f():\n    {statement}  # looks harmless\n")
    leaks, _ = scan(root, all_secrets)
    found = {(leak.path, leak.secret.kind) for leak in leaks if not leak.allowed}
    assert ("extra-0.1-py3-none-any.whl!extra/bundle.zip!nb/answers.ipynb", "solution") in found
    assert ("grader/extra.json", "hidden check") in found
    assert ("NOTES.md", "reference") in found
    assert ("exercises/more.py", "hidden check") in found


def test_no_value_a_hidden_check_uses_is_shipped(student_release, tmp_path):
    """The recorded values are those of the visible checks' calls only: record what the hidden
    checks call too; the release must hold strictly less (the hidden checks call the references
    with inputs of their own), and nothing the visible checks did not call."""
    subprocess.run([sys.executable, "-m", "grader.release.replay", "--hidden", str(tmp_path), *ALL],
                   check=True, capture_output=True, timeout=1800)
    recorded = student_release / "grader" / "curriculum" / "checks" / "recorded"
    assert sorted(recorded.glob("*.json"))
    for path in sorted(recorded.glob("*.json")):
        shipped = set(json.loads(path.read_text())["calls"])
        everything = set(json.loads((tmp_path / path.name).read_text())["calls"])
        assert shipped < everything


def test_release_fault_catalogue_keeps_only_what_students_may_read():
    """No bug-hunt injections (they hold the fixed code), no bug-hunt table, no links to hidden
    checks, no field nobody decided a student may see."""
    data = {
        "bughunt": [{"exercise": "bughunt_x", "path": "bughunt/x.py", "seeded": ["a", "b"]}],
        "fault": [
            {"id": "a", "title": "A", "symptom": "s", "cause": "c", "fix": "f",
             "exercises": ["training_loops", "bughunt_x"],
             "detected_by": ["training_loops.visible_one", "bughunt_x.hidden_one"],
             "inject": [{"exercise": "bughunt_x", "check": "hidden_one",
                         "replace": [["optimizer.zero_grad()", ""]]}],
             "internal_note": "x"},
            {"id": "b", "title": "B", "symptom": "s", "cause": "c", "fix": "f",
             "exercises": ["bughunt_x"], "detected_by": ["bughunt_x.hidden_one"]},
        ],
        "future_table": {"secret": 1},
    }
    assert student_catalogue(data, {"training_loops.visible_one"}) == {"fault": [
        {"id": "a", "title": "A", "symptom": "s", "cause": "c", "fix": "f",
         "exercises": ["training_loops"], "detected_by": ["training_loops.visible_one"]}]}


# --------------------------------------------------------------------------- checking with it


def test_release_check_runs_the_visible_checks_and_lists_the_hidden(installed_release,
                                                                    checks, tmp_path):
    good = torchgrade(installed_release, "check", SOLUTIONS, "--out", tmp_path / "a",
                      "--color", "never", cwd=tmp_path)
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    hidden = [c for c in checks if c.info.visibility == "hidden"]
    visible = [c for c in checks if c.info.visibility == "visible"]
    assert good.stdout.count("[ PASSED  ]") == len(visible)
    # A bug hunt's hidden checks are one line that names none of them.
    assert good.stdout.count("[ HIDDEN  ]") == sum(not is_bughunt(c.exercise) for c in hidden)
    hunts = sorted({c.exercise for c in checks if is_bughunt(c.exercise)})
    assert good.stdout.count("faults to find") == len(hunts) > 0
    assert all((c.info.title in good.stdout) != is_bughunt(c.exercise) for c in hidden)
    assert not any(c.name in good.stdout for c in hidden)
    # (the release's bug hunts are among them: no "every check passed" over their faults)
    assert "visible checks that ran passed; a bug hunt's" in good.stdout
    assert "Every check passed" not in good.stdout and "\x1b[" not in good.stdout
    for exercise in ALL:  # one report per exercise
        result = read_json(tmp_path / "a" / exercise / "results.json")
        assert {c.visibility for c in result.checks} == {"visible"}
        assert {c.exercise for c in result.checks} == {exercise}
    bad = torchgrade(installed_release, "check", EXERCISES / "strides_broadcasting.py",
                     "--out", tmp_path / "b", cwd=tmp_path)
    assert bad.returncode == 1 and "not implemented yet" in bad.stdout
    for args, said in ((["check", SOLUTIONS, "--hidden"], "not part of the student release"),
                        (["solution", "parameters", "--i-have-tried"], "not part of the student"),
                        (["release", "--out", tmp_path / "r"], "not part of the student")):
        proc = torchgrade(installed_release, *args, cwd=tmp_path)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr


def test_check_in_a_release_folder_checks_every_exercise_file_with_its_own_report(
        installed_release, student_release, tmp_path):
    """`torchgrade check .` in the release folder checks the same kind of file for every
    exercise, the `.py` under exercises/ (a bug hunt's exercises/bughunt/<name>.py too, not its
    notebook), and writes one report per exercise, titled by it."""
    folder = tmp_path / "release"
    shutil.copytree(student_release, folder)
    proc = torchgrade(installed_release, "check", ".", "--color", "never", cwd=folder)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the stubs
    assert "[  ERROR  ]" not in proc.stdout and "[  TODO   ]" in proc.stdout
    for exercise in ALL:
        result = read_json(folder / "torchgrade-check" / exercise / "results.json")
        assert [e.path for e in result.exercises] == [
            "exercises/" + stub_path(exercise).relative_to(exercises_root()).as_posix()]
        html = (folder / "torchgrade-check" / exercise / "report.html").read_text()
        assert f'Feedback for <span class="student">{exercise}</span>' in html
        if is_bughunt(exercise):  # the untouched script passes its visible checks
            assert result.checks and all(c.status == "passed" for c in result.checks)
            assert "4 faults to find, 8 points, graded when you hand in" in html


def test_a_check_whose_values_were_not_recorded_says_it_runs_at_grading(
        installed_release, student_release, tmp_path):
    """Another torch could build other test data from the same seeds: simulated by a release
    whose recording lost its values."""
    site = Path(installed_release["PYTHONPATH"])
    broken = tmp_path / "site"
    shutil.copytree(site, broken)
    path = (broken / "grader" / "curriculum" / "checks" / "recorded"
            / "training_loops_reference.json")
    data = json.loads(path.read_text())
    data["calls"] = {}
    path.write_text(json.dumps(data))
    env = {**installed_release, "PYTHONPATH": str(broken)}
    proc = torchgrade(env, "check", SOLUTIONS / "training_loops.py", "--out", tmp_path / "o",
                      "--only", "train_epoch", cwd=tmp_path)
    assert proc.returncode == 1
    assert "could not run here" in proc.stdout and "runs when your work is graded" in proc.stdout


def replaying_exercises() -> set[str]:
    """The exercises whose visible checks (or the helpers they import: `<exercise>_cases.py`,
    `<exercise>_verify.py`) use a grader-side reference, `<exercise>_reference.py`: a release
    replays its values, recorded at build time."""
    out = set()
    for reference in CHECKS_DIR.glob("*_reference.py"):
        exercise = reference.stem.removesuffix("_reference")
        shipped = [CHECKS_DIR / f"test_{exercise}.py", CHECKS_DIR / f"{exercise}_cases.py",
                   CHECKS_DIR / f"{exercise}_verify.py"]
        if any(p.is_file() and reference.stem in p.read_text(encoding="utf-8") for p in shipped):
            out.add(exercise)
    return out


def test_every_exercise_that_replays_references_is_found():
    assert replaying_exercises() >= {"autograd_graph", "manual_backward", "parameters",
                                     "training_loops"}


def test_release_gives_the_full_graders_visible_verdicts_on_every_mutant(
        installed_release, checks, tmp_path):
    """Every wrong implementation in tests/mutants/ and every correct style in tests/styles/ of
    every exercise whose visible checks replay recorded reference values, graded with the
    release (`torchgrade grade` from the installed release: its checks are the visible ones
    only): exactly the visible checks the full grader fails."""
    recorded = replaying_exercises()
    visible = {c.id for c in checks if c.info.visibility == "visible"}
    expected = {}
    root = tmp_path / "class"
    for exercise in sorted(recorded):
        solution = (SOLUTIONS / f"{exercise}.py").read_text()
        submissions = {f"solution-{exercise}": (solution, set())}
        submissions |= {f"{exercise}-{m.name}": (m.source(), set(m.fails) & visible)
                        for m in mutants_of(exercise)}
        submissions |= {f"style-{p.stem}": (p.read_text(), set())
                        for p in STYLES.glob(f"{exercise}__*.py")}
        for student, (source, fails) in submissions.items():
            (root / student).mkdir(parents=True)
            (root / student / f"{exercise}.py").write_text(source)
            expected[student] = (exercise, fails)
    out = tmp_path / "out"
    proc = torchgrade(installed_release, "grade", root, "--out", out, "--exercises",
                      ",".join(sorted(recorded)), "-j", "2", cwd=tmp_path, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wrong = {}
    for student, (exercise, fails) in expected.items():
        result = read_json(out / student / "results.json")
        got = {c.id for c in result.checks if c.exercise == exercise and c.status != "passed"}
        assert {c.visibility for c in result.checks} == {"visible"}
        if got != fails:
            wrong[student] = (sorted(got), sorted(fails))
    assert wrong == {}


def test_the_release_installed_in_a_venv_as_its_readme_says_checks_a_file(student_release,
                                                                          tmp_path):
    """The student's set-up, literally: a venv inside the release folder, `pip install -c
    constraints.txt .`, then `torchgrade check` there, cold and then warm. Each of its steps
    broke once while every other test passed (they install with --target and import what the
    release lacks from the development package): the wheel lacked `grader.commands`, and the
    venv's site-packages was left out of the workers' view, so no zygote could start."""
    from grader.worker import sandbox

    if not (sandbox.is_root() and sandbox.bwrap_works()):
        pytest.skip("a full view needs root and bubblewrap")
    release = tmp_path / "release"
    shutil.copytree(student_release, release)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=release,
                   check=True, timeout=120)
    venv_python = release / ".venv" / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv_python),
                                "install", "-q", "-c", "constraints.txt", "."], cwd=release,
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-2000:]
    work = release / "exercises" / "strides_broadcasting.py"
    work.write_text((SOLUTIONS / "strides_broadcasting.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    (tmp_path / "servers").mkdir(mode=0o700)
    env["TORCHGRADE_CHECK_SERVER_DIR"] = str(tmp_path / "servers")
    env["TORCHGRADE_CHECK_SERVER_IDLE"] = "5"  # the server it leaves goes by itself
    env["TORCHGRADE_CHECK_SERVER"] = "1"  # the suite turns servers off (conftest)
    command = [str(release / ".venv" / "bin" / "torchgrade"), "check",
               "exercises/strides_broadcasting.py"]
    try:
        cold = subprocess.run(command, cwd=release, env=env, capture_output=True, text=True,
                              timeout=600)
        assert cold.returncode == 0, cold.stdout[-2000:] + cold.stderr[-2000:]
        assert "Every check passed" in cold.stdout and "warning" not in cold.stderr
        assert "a check server stays up" in cold.stderr  # the view is private: full isolation
    finally:
        for lock in (tmp_path / "servers").glob("*.lock"):
            pid = lock.read_text().strip()
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGTERM)
