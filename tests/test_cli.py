"""The command-line contract: grade, check, demo, usage errors, and the pytest entry point."""

import csv
import json
import subprocess
import sys
import zipfile

import pytest

from conftest import CHECKS_DIR, EXERCISES, SOLUTIONS
from grader.outputs.writing import read_json
from grader.models import SubmissionResult

EXERCISE = "strides_broadcasting"


def torchgrade(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    subs = root / "submissions"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py").read_text())
    (subs / "bob" / "hw1").mkdir(parents=True)
    (subs / "bob" / "hw1" / f"{EXERCISE}.py").write_text((EXERCISES / f"{EXERCISE}.py").read_text())
    (subs / "carol").mkdir()
    (subs / "carol" / f"{EXERCISE}.py").write_text("def c_strides(:\n")
    (subs / "dave").mkdir()  # handed in nothing
    with zipfile.ZipFile(subs / "erin.zip", "w") as z:
        z.writestr(f"erin/{EXERCISE}.py", (SOLUTIONS / f"{EXERCISE}.py").read_text())
    (subs / "=frank").mkdir()
    (subs / "=frank" / f"{EXERCISE}.py").write_text(
        (SOLUTIONS / f"{EXERCISE}.py").read_text() + "\nprint('<script>alert(1)</script>')\n")
    out = root / "out"
    proc = torchgrade("grade", subs, "--out", out)
    return proc, out


def test_grade_writes_every_output_and_exits_zero(graded_class):
    proc, out = graded_class
    assert proc.returncode == 0, proc.stderr
    students = ["=frank", "alice", "bob", "carol", "dave", "erin"]
    for s in students:
        result = read_json(out / s / "results.json")  # validates against the model
        assert result.student == s and (out / s / "report.html").stat().st_size > 0
    index = (out / "index.html").read_text()
    assert all(f'href="{s.replace("=", "%3D")}/report.html"' in index for s in students)
    rows = list(csv.DictReader((out / "grades.csv").open()))
    scores = {r["student"]: float(r["score"]) for r in rows}
    assert scores["alice"] == scores["erin"] == scores["'=frank"] == float(rows[0]["max_score"]) > 0
    assert scores["bob"] == scores["carol"] == scores["dave"] == 0


def test_results_json_has_the_contract_fields(graded_class):
    _, out = graded_class
    data = json.loads((out / "alice" / "results.json").read_text())
    for key in ("student", "score", "max_score", "grader_version", "checks"):
        assert key in data
    check = data["checks"][0]
    for key in ("id", "exercise", "targets", "points", "max_points", "status", "message",
                "diagnoses", "duration_s"):
        assert key in check
    assert check["exercise"] == EXERCISE and check["targets"] == ["c_strides"]
    SubmissionResult.model_validate(data)


def test_bad_submissions_get_clear_messages(graded_class):
    _, out = graded_class
    carol = read_json(out / "carol" / "results.json")
    assert all("SyntaxError in strides_broadcasting.py, line 1" in c.message for c in carol.checks)
    dave = read_json(out / "dave" / "results.json")
    assert all(c.message.startswith("file not submitted") for c in dave.checks)
    bob = read_json(out / "bob" / "results.json")
    assert bob.exercises[0].path == "hw1/strides_broadcasting.py"


def test_student_output_is_escaped_in_reports(graded_class):
    _, out = graded_class
    html = (out / "=frank" / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_check_prints_verdicts_and_sets_the_exit_code(tmp_path):
    good = torchgrade("check", SOLUTIONS / f"{EXERCISE}.py", "--out", tmp_path / "a")
    assert good.returncode == 0, good.stderr
    assert "[ PASSED  ]" in good.stdout and (tmp_path / "a" / EXERCISE / "report.html").exists()
    bad = torchgrade("check", EXERCISES / f"{EXERCISE}.py", "--out", tmp_path / "b")
    assert bad.returncode == 1
    assert "not implemented yet" in bad.stdout and "Score: 0 /" in bad.stdout
    # A stub is not finished yet, not broken: its own state, not ERROR.
    assert "[  TODO   ]" in bad.stdout and "[  ERROR  ]" not in bad.stdout
    stub = read_json(tmp_path / "b" / EXERCISE / "results.json")
    assert {(c.status, c.reason) for c in stub.checks} == {("error", "not_implemented")}
    # The report says what the hidden checks add, as the terminal does; a later check into the
    # same folder is no regrade (a student's checks are not grades)
    html = (tmp_path / "b" / EXERCISE / "report.html").read_text()
    assert "Hidden checks: " in html and "run when your work is graded" in html
    again = torchgrade("check", SOLUTIONS / f"{EXERCISE}.py", "--out", tmp_path / "b")
    assert again.returncode == 0, again.stderr
    assert "Regraded" not in (tmp_path / "b" / EXERCISE / "report.html").read_text()
    assert read_json(tmp_path / "b" / EXERCISE / "results.json").replaced is None


def test_check_starts_its_sandbox_before_the_grader_imports_torch():
    """Issue 21: what `torchgrade check` imports before it launches the zygote (the command,
    the edition, the terminal, the worker client) imports no torch, so that the grader's own
    import of torch overlaps the zygote's instead of preceding it."""
    code = ("import sys\n"
            "import grader.cli, grader.commands.check, grader.checking.edition\n"
            "import grader.outputs.terminal, grader.worker.client\n"
            "print(sorted(m for m in ('torch', 'matplotlib', 'nbformat', 'jinja2')\n"
            "             if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_check_warms_torch_dynamo_only_for_work_that_may_build_an_optimizer(tmp_path):
    """The zygote's warm import of torch._dynamo (~1.8 s) is skipped for exercises whose stub
    and student code name no optimizer; kept when either does."""
    from grader.commands.check import may_build_optimizers
    from grader.commands.common import one_submission

    def warms(path, exercises=None):
        submission, chosen = one_submission(path, exercises)
        return may_build_optimizers(submission, chosen)

    assert not warms(SOLUTIONS / f"{EXERCISE}.py")
    assert warms(SOLUTIONS / "training_loops.py") and warms(SOLUTIONS / "parameters.py")
    assert warms(EXERCISES / "training_loops.py")  # the stub names it, not the student
    own = tmp_path / f"{EXERCISE}.py"
    own.write_text((SOLUTIONS / f"{EXERCISE}.py").read_text()
                   + "\nimport torch\nSTEP = torch.optim.SGD\n")
    assert warms(own)


def test_check_writes_one_report_per_exercise_titled_by_it(tmp_path):
    """Checking files one after another, or a folder of several, never overwrites another
    exercise's report: torchgrade-check/<exercise>/report.html, titled by the exercise."""
    folder = tmp_path / "work"
    folder.mkdir()
    for name in (EXERCISE, "parameters"):
        (folder / f"{name}.py").write_text((EXERCISES / f"{name}.py").read_text())
    first = torchgrade("check", folder / f"{EXERCISE}.py", cwd=tmp_path)
    second = torchgrade("check", folder / "parameters.py", cwd=tmp_path)
    assert first.returncode == second.returncode == 1, first.stderr + second.stderr
    out = tmp_path / "torchgrade-check"
    assert sorted(p.name for p in out.iterdir()) == ["parameters", EXERCISE]
    for name in (EXERCISE, "parameters"):
        html = (out / name / "report.html").read_text()
        assert f'Feedback for <span class="student">{name}</span>' in html
        assert {c.exercise for c in read_json(out / name / "results.json").checks} == {name}
    both = torchgrade("check", folder, "--out", tmp_path / "both", cwd=tmp_path)
    assert both.returncode == 1
    assert "Reports: " in both.stdout and both.stdout.count("report.html") == 2
    assert sorted(p.name for p in (tmp_path / "both").iterdir()) == ["parameters", EXERCISE]


@pytest.mark.parametrize("source", [EXERCISES, SOLUTIONS], ids=["untouched", "fixed"])
def test_check_of_a_bug_hunt_runs_its_visible_checks_and_names_no_fault(tmp_path, source):
    """A bug hunt's visible checks pass on the untouched script and on the fixed one alike
    (they reveal no fault); its hidden checks are one line, and its report says it too."""
    proc = torchgrade("check", source / "bughunt" / "regression.py", "--out", tmp_path / "o",
                      "--color", "never")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "bughunt_regression: 0 / 0 points, 4 of 4 checks passed" in proc.stdout
    line = "4 faults to find, 8 points, graded when you hand in"
    assert line in proc.stdout and "[ HIDDEN  ]" not in proc.stdout
    # (and never "every check passed", which read as "no fault left")
    assert "No check ran" not in proc.stdout and "Every check passed" not in proc.stdout
    assert ("The 4 visible checks that ran passed; a bug hunt's visible checks look for none of "
            "its faults, which are judged when you hand in (4 faults, 8 points).") in proc.stdout
    html = (tmp_path / "o" / "bughunt_regression" / "report.html").read_text()
    assert line in html and "Every check passed" not in html
    # Passing them says nothing of the hunt: they do not unlock the solution.
    gate = torchgrade("solution", "bughunt_regression", "--attempts", tmp_path / "o")
    assert gate.returncode == 2 and "try bughunt_regression first" in gate.stderr


@pytest.mark.parametrize("args, words", [
    (["grade", "/no/such/folder", "--out", "x"], "no such folder"),
    (["grade", "{empty}", "--out", "x"], "holds no student folders"),
    (["check", "/no/such/file.py"], "no such file"),
    (["check", "{empty}"], "no exercise file found"),
    (["grade", "{empty}"], "required: --out"),
    (["grade", "{empty}", "--out", "x", "--frobnicate"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
    (["check", "{solutions}", "--exercises", "nope"], "unknown exercise 'nope'"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, words):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [a.format(empty=empty, solutions=SOLUTIONS) for a in args]
    proc = torchgrade(*args, cwd=tmp_path)
    assert proc.returncode == 2 and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_demo_grades_the_bundled_class(tmp_path):
    proc = torchgrade("demo", "--out", tmp_path / "demo", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "index.html" in proc.stdout.splitlines()[-1]
    results = {p.parent.name: read_json(p)
               for p in (tmp_path / "demo" / "results").glob("*/results.json")}
    assert {"ada_correct", "ben_stub", "eve_notebook", "gus_zipped", "hal_hostile"} <= set(results)
    full = results["ada_correct"].max_score
    assert results["ada_correct"].score == results["gus_zipped"].score == full
    assert results["eve_notebook"].score == full  # a scratch cell that raises costs nothing
    assert results["ben_stub"].score == 0
    hal = {c.status for c in results["hal_hostile"].checks}
    assert {"timeout", "crashed", "error", "failed", "passed"} <= hal


def test_pytest_runs_the_checks_directly(tmp_path):
    results = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(CHECKS_DIR),
                           "--submission", str(SOLUTIONS), "--results-json", str(results), "-q"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "torchgrade:" in proc.stdout
    result = read_json(results)
    assert result.score == result.max_score > 0
    stub = subprocess.run([sys.executable, "-m", "pytest", str(CHECKS_DIR),
                           "--submission", str(EXERCISES), "-q"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert stub.returncode == 1 and "not implemented yet" in stub.stdout


def test_a_report_that_cannot_be_written_still_shows_the_verdict(tmp_path):
    """--out where nothing can be written (inside a file): the summary is printed, then one
    line saying the report is not saved, exit 1; no traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = torchgrade("check", str(SOLUTIONS / f"{EXERCISE}.py"), "--only", "c_strides",
                      "--out", str(blocker / "out"), cwd=tmp_path)
    assert done.returncode == 1
    assert "Every check passed" in done.stdout and "Traceback" not in done.stderr
    assert "the report could not be written in" in done.stderr
    assert "Not a directory" in done.stderr


@pytest.mark.fast
def test_a_check_of_what_a_student_has_does_not_list_what_they_lack():
    """`torchgrade check strides_broadcasting.py` checks that file: a note naming the nine
    other exercises' missing files is noise in its output and report. Asked for by name
    (`--exercises`), a missing one is still said."""
    from grader.commands.common import one_submission

    submission, chosen = one_submission(SOLUTIONS / f"{EXERCISE}.py", None)
    assert chosen == [EXERCISE] and not [n for n in submission.notes if "no file for" in n]
    submission, _ = one_submission(SOLUTIONS / f"{EXERCISE}.py", [EXERCISE, "parameters"])
    assert [n for n in submission.notes if n.startswith("no file for parameters")]


@pytest.mark.parametrize("only, refused", [("nope", "nope"), ("c_strides,c_stridez", "c_stridez")])
def test_only_refuses_a_name_no_check_is_about_even_beside_one_that_is(tmp_path, only, refused):
    """`--only Value,fit_linear` checked Value alone and said nothing of fit_linear."""
    done = torchgrade("check", str(SOLUTIONS / f"{EXERCISE}.py"), "--only", only,
                      "--no-server", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"is about {refused} (give the name of a function or class" in done.stderr
    assert "the checks are about: broadcast_shape, broadcast_strides, c_strides," in done.stderr


@pytest.mark.fast
@pytest.mark.parametrize("where", ["parse_args", "intake", "grading"])
def test_a_ctrl_c_anywhere_in_a_command_is_one_line_and_130(monkeypatch, capsys, where):
    """A Ctrl-C while the command line is parsed or its first imports run (the first second of
    every command) was a traceback and exit -2; one while `grade` reads the class said that
    index.html named who was not graded, before anything was written."""
    from grader import cli
    from grader.commands import grade

    def interrupt(*args, **kwargs):
        if where == "grading":
            kwargs["on_start"](3, 0)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.Parser if where == "parse_args" else grade,
                        "parse_args" if where == "parse_args" else "grade", interrupt)
    code = cli.main(["grade", "subs", "--out", "out"])
    err = capsys.readouterr().err
    assert code == 130, err
    said = {"parse_args": cli.INTERRUPTED_EARLY, "intake": cli.GRADE_INTERRUPTED_EARLY,
            "grading": cli.GRADE_INTERRUPTED.format(again=cli.AGAIN)}[where]
    assert err.strip().endswith(said), err


@pytest.mark.fast
@pytest.mark.parametrize("mistake", ["no such class", "a bad assignment"])
def test_a_usage_error_of_grade_is_its_one_line_and_nothing_before_it(tmp_path, capsys,
                                                                      mistake):
    """Issue 41: "Grading SUBMISSIONS ..." was printed, then the usage error."""
    from grader.cli import main

    subs, extra = tmp_path / "subs", []
    if mistake == "a bad assignment":
        (subs / "ann").mkdir(parents=True)
        (subs / "ann" / f"{EXERCISE}.py").write_text("x = 1\n")
        (tmp_path / "hw.toml").write_text('name = "x"\nexercises = ["nope"]\n')
        extra = ["--assignment", str(tmp_path / "hw.toml")]
    assert main(["grade", str(subs), "--out", str(tmp_path / "out"), *extra]) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1, said
    assert said.err.startswith("torchgrade: error: ")
