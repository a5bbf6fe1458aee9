"""`torchgrade verify` on a tiny course folder written here with the public API: a weak check
lets a generated mutant survive (reported, not fatal; fatal with --strict unless marked
equivalent), a mutant declared wrongly makes it exit 1, and so does a check that passes for a
hollow implementation (one that does nothing but raise, return None or its input, or zeros
shaped like its answer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SOLUTION = '''"""Row sums."""
import numpy as np


def row_sums(x, offset=0.0):
    """The sum of each row of x, plus offset."""
    return np.asarray(x).sum(axis=1) + offset
'''
STUB = '''"""Row sums."""
import numpy as np


def row_sums(x, offset=0.0):
    """The sum of each row of x, plus offset."""
    raise NotImplementedError("row_sums: not implemented yet")
'''
# Weak on purpose: a symmetric matrix has the same row and column sums, so summing over the
# wrong axis passes.
CASES = "import numpy as np\n\nSYMMETRIC = np.array([[1.0, 2.0], [2.0, 5.0]])\n"
VISIBLE = '''"""Visible checks of row_sums."""
from row_sums_cases import SYMMETRIC

from grader import check, expect_array


@check(points=1, targets="row_sums", visibility="visible")
def test_symmetric(sub):
    """row_sums of a symmetric matrix"""
    expect_array(sub.call("row_sums", SYMMETRIC), SYMMETRIC.sum(axis=1), call="row_sums(x)")
'''
HIDDEN = '''"""Hidden checks of row_sums."""
from row_sums_cases import SYMMETRIC

from grader import check, expect_array


@check(points=1, targets="row_sums", visibility="hidden")
def test_offset(sub):
    """row_sums adds the offset"""
    expect_array(sub.call("row_sums", SYMMETRIC, 3.0), SYMMETRIC.sum(axis=1) + 3.0,
                 call="row_sums(x, 3.0)")
'''
NO_OFFSET = "# must fail: offset\n" + SOLUTION.replace(") + offset", ")")
ZEROS = "# must fail: symmetric, offset\n" + SOLUTION.replace(
    "np.asarray(x).sum(axis=1) + offset", "np.zeros(len(x))")
SURVIVOR = "`axis=1` -> `axis=0` in row_sums"


def write_course(root: Path, *, extra_toml: str = "") -> Path:
    files = {
        "course.toml": f'name = "tiny"\nexercises = ["row_sums"]\n{extra_toml}',
        "exercises/row_sums.py": STUB,
        "solutions/row_sums.py": SOLUTION,
        "checks/row_sums_cases.py": CASES,
        "checks/test_row_sums.py": VISIBLE,
        "checks/test_row_sums_hidden.py": HIDDEN,
        "mutants/row_sums/no_offset.py": NO_OFFSET,
        "mutants/row_sums/zeros.py": ZEROS,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def run_verify(tmp: Path, course: Path, *args: str) -> tuple[int, dict, str]:
    out = tmp / "verify.json"
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "verify", "--course", str(course),
                           "--json", str(out), "--html", str(tmp / "verify.html"), "-j", "1",
                           *args], capture_output=True, text=True, timeout=600, cwd=tmp)
    return proc.returncode, json.loads(out.read_text()), proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("good")
    return tmp, run_verify(tmp, write_course(tmp / "course"))


def test_verify_passes_and_reports_the_weak_check(good):
    tmp, (code, report, output) = good
    assert code == 0, output
    assert set(report) == {"ok", "exercises"} and report["ok"] is True
    ex = report["exercises"]["row_sums"]
    assert ex["solution_full_marks"] and ex["stub_scores_zero"], output
    assert ex["declared_mutants"] == {"total": 2, "as_declared": 2, "wrong": []}
    assert ex["checks_never_failed"] == []
    generated = ex["generated_mutants"]
    assert [s["change"] for s in generated["survivors"]] == [SURVIVOR], output
    assert generated["survivors"][0]["where"] == "solutions/row_sums.py:7"
    assert 0 < generated["killed"] == generated["total"] - 1
    assert SURVIVOR in output and "exit 0" in output
    page = (tmp / "verify.html").read_text()
    assert "solutions/row_sums.py:7" in page and "sum(axis=0)" in page


def test_strict_makes_a_survivor_fatal_unless_marked_equivalent(tmp_path):
    course = write_course(tmp_path / "course")
    code, report, output = run_verify(tmp_path, course, "--strict")
    assert code == 1 and report["ok"] is False, output
    marked = write_course(tmp_path / "marked", extra_toml=(
        f'\n[[equivalent]]\nexercise = "row_sums"\nchange = "{SURVIVOR}"\n'
        'reason = "the checks only use symmetric matrices (on purpose, in this test)"\n'))
    code, report, output = run_verify(tmp_path, marked, "--strict")
    assert code == 0, output
    generated = report["exercises"]["row_sums"]["generated_mutants"]
    assert generated["survivors"] == []
    assert [e["change"] for e in generated["equivalent"]] == [SURVIVOR]
    assert generated["unmatched_equivalent"] == []


def test_a_mutant_declared_wrongly_makes_verify_exit_1(tmp_path):
    course = write_course(tmp_path / "course")
    # It fails `offset` only, but declares `symmetric`.
    (course / "mutants/row_sums/declared_wrongly.py").write_text(
        "# must fail: symmetric\n" + SOLUTION.replace(") + offset", ")"), encoding="utf-8")
    code, report, output = run_verify(tmp_path, course, "--max-mutants", "0")
    assert code == 1 and report["ok"] is False, output
    declared = report["exercises"]["row_sums"]["declared_mutants"]
    assert (declared["total"], declared["as_declared"]) == (3, 2)
    [wrong] = declared["wrong"]
    assert wrong["name"] == "declared_wrongly"
    assert wrong["failed"] == ["row_sums.offset"] and wrong["must_fail"] == ["row_sums.symmetric"]
    assert "declared_wrongly" in output and "exit 1" in output


# A side property alone: `row_sums` that does nothing but raise ValueError passes it.
REJECTS_1D = '''

@check(points=1, targets="row_sums", visibility="hidden")
def test_rejects_vectors(sub):
    """row_sums raises ValueError for a 1-d x"""
    import numpy as np
    sub.raises(ValueError, "row_sums", np.ones(3))
'''
# The same property, and the behaviour it is a property of.
REJECTS_1D_ONLY = REJECTS_1D + '''    x = np.ones((2, 3))
    expect_array(sub.call("row_sums", x), np.full(2, 3.0), call="row_sums(x)")
'''


# A shape alone: `row_sums` answering zeros of its answer's shape passes it (and only that
# hollow implementation does: None, x itself and a raise fail it).
ZEROS_BODY = "return zeros shaped like its answer"
SHAPE_ONLY = """

@check(points=1, targets="row_sums", visibility="hidden")
def test_rejects_vectors(sub):
    \"\"\"row_sums gives one number per row\"\"\"
    import numpy as np
    from grader import fail
    answer = sub.call("row_sums", np.ones((2, 3)))
    if not isinstance(answer, np.ndarray) or answer.shape != (2,):
        fail("row_sums(x) must give one number per row of x")
"""


@pytest.mark.parametrize("check_text, vacuous, literal", [
    # (zeros shaped like the answer: the solution's raise passes through)
    (REJECTS_1D, ["raise ValueError", ZEROS_BODY], True), (REJECTS_1D_ONLY, [], True),
    (SHAPE_ONLY, [ZEROS_BODY], True),
    # Targets that are not literals are known only once graded: every function is hollowed.
    (REJECTS_1D, ["raise ValueError", ZEROS_BODY], False)])
def test_a_check_that_passes_for_a_hollow_implementation_makes_verify_exit_1(
        tmp_path, check_text, vacuous, literal):
    course = write_course(tmp_path / "course")
    (course / "checks/test_row_sums_hidden.py").write_text(HIDDEN + check_text, encoding="utf-8")
    if not literal:
        for name in ("test_row_sums.py", "test_row_sums_hidden.py"):
            path = course / "checks" / name
            path.write_text(path.read_text().replace('targets="row_sums"',
                                                      'targets=str("row_sums")'))
    # The declared mutant `zeros` fails the new check too (it never raises): only the hollow
    # implementations can make verify fail here.
    (course / "mutants/row_sums/zeros.py").write_text(
        ZEROS.replace("symmetric, offset", "offset, rejects_vectors, symmetric"), encoding="utf-8")
    code, report, output = run_verify(tmp_path, course, "--max-mutants", "0")
    hollow = report["exercises"]["row_sums"]["hollow"]
    assert hollow["total"] == 4, output  # raise, return None, return x, return zeros
    if not vacuous:
        assert code == 0 and hollow["vacuous"] == [], output
        return
    assert code == 1 and report["ok"] is False, output
    assert hollow["vacuous"] == [{"check": "row_sums.rejects_vectors", "functions": ["row_sums"],
                                  "body": body} for body in vacuous]
    assert all(("vacuous check row_sums.rejects_vectors: passes when row_sums does nothing but "
                f"{body}: make it ask for the behaviour too") in output for body in vacuous)
    assert "hollow implementations 4 (1 vacuous check)" in output and "exit 1" in output
    assert "row_sums.rejects_vectors" in (tmp_path / "verify.html").read_text()


@pytest.mark.parametrize("args, words", [
    (["verify", "--course", "{course}", "nope"], "nope: not an exercise of the course 'tiny'"),
    (["verify", "--course", "{empty}"], "has no course.toml"),
    (["verify", "--course", "{course}", "--budget", "0"], "--budget: must be a positive"),
    (["verify", "--course", "{course}", "--max-mutants", "-1"], "must be 0 or more"),
    (["verify", "--course", "{nosolution}"], "its solution"),
])
def test_verify_usage_errors_exit_2_with_one_line(tmp_path, args, words):
    course = write_course(tmp_path / "course")
    nosolution = write_course(tmp_path / "nosolution")
    (nosolution / "solutions/row_sums.py").unlink()
    (tmp_path / "empty").mkdir()
    args = [a.format(course=course, empty=tmp_path / "empty", nosolution=nosolution)
            for a in args]
    proc = subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_a_check_the_solution_fails_is_named_with_what_it_said(tmp_path):
    """"the solution fails row_sums.offset" alone sent authors to grade the solution again to
    learn why."""
    course = write_course(tmp_path / "course")
    hidden = course / "checks/test_row_sums_hidden.py"
    hidden.write_text(HIDDEN.replace("SYMMETRIC.sum(axis=1) + 3.0", "SYMMETRIC.sum(axis=1) + 4.0"))
    code, report, output = run_verify(tmp_path, course, "--max-mutants", "0")
    assert code == 1, output
    problems = report["exercises"]["row_sums"]["problems"]
    assert len(problems) == 1 and problems[0].startswith("the solution fails row_sums.offset: "
                                                         "failed: "), problems
    assert "row_sums(x, 3.0)" in problems[0] and problems[0] in output


@pytest.mark.fast
def test_a_check_that_fails_itself_is_logged_with_its_traceback_once_per_run(
        tmp_path, caplog, monkeypatch):
    """Issue 41: verify printed the same internal-error traceback for every mutant graded. Once
    per run: within a grading process by what it logged, across the run's processes by the
    folder they share (another process is this one with what it logged forgotten)."""
    import logging

    from grader.checking import plugin

    def fail(message):
        try:
            {}[message]
        except KeyError as exc:
            return exc

    monkeypatch.setattr(plugin, "_logged", set())
    plugin.share_logged_errors(tmp_path)
    try:
        with caplog.at_level(logging.WARNING, logger="torchgrade"):
            for _ in range(3):
                exc = fail("oops")
                plugin.log_internal_error("test_x.py::test_a", exc, exc.__traceback__)
            monkeypatch.setattr(plugin, "_logged", set())  # another grading process
            exc = fail("oops")
            plugin.log_internal_error("test_x.py::test_a", exc, exc.__traceback__)
            other = fail("another")  # another error is logged in full
            plugin.log_internal_error("test_x.py::test_a", other, other.__traceback__)
    finally:
        plugin.share_logged_errors(None)
    full = [r for r in caplog.records if r.exc_info]
    assert [str(r.exc_info[1]) for r in full] == ["'oops'", "'another'"]
    assert len(caplog.records) == 2
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="torchgrade"):  # no run: every time
        for _ in range(2):
            exc = fail("oops")
            plugin.log_internal_error("test_x.py::test_a", exc, exc.__traceback__)
    assert len([r for r in caplog.records if r.exc_info]) == 2
