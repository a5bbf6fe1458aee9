"""Hostile intake (issue 15): what a submissions folder can hold besides code.

Names the grader cannot write (non-UTF-8 bytes, class outputs' names), special files (named
pipes, devices, sockets, links, hard links), submissions too big to parse in the parent, and an
output folder mixed up with the submissions. Every attack is bounded: anything that could block
runs in a subprocess with a timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import struct
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from conftest import REPO, SOLUTIONS
from grader.outputs.writing import read_json

EXERCISE = "strides_broadcasting"
SOLUTION = (SOLUTIONS / f"{EXERCISE}.py").read_text()
NON_UTF8 = os.fsdecode(b"caf\xe9_windows")  # what unzip leaves of a cp1252 name


def torchgrade(*args, timeout=600, **kwargs):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter: a read that blocks fails by timeout, not a hung test."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


def honest(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{EXERCISE}.py").write_text(SOLUTION)
    return folder


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def big_notebook(cells: int) -> str:
    """A notebook of `cells` tiny code cells (480,000 of them: 41 MB, as in the issue)."""
    cell = '{"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], ' \
           '"execution_count": null}'
    return ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ['
            + ", ".join([cell] * cells) + "]}")


def many_entries_zip(path: Path, entries: int, declared: int | None = None) -> Path:
    """A valid zip of `entries` entries: the exercise, then empty files (written by hand:
    zipfile takes a minute for 300,000 entries)."""
    local, central = bytearray(), bytearray()
    members = [(f"{EXERCISE}.py".encode(), SOLUTION.encode())]
    members += [(f"d/{i}".encode(), b"") for i in range(entries - 1)]
    for name, data in members:
        crc = zlib.crc32(data)
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, crc, len(data),
                             len(data), len(name), 0) + name + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, crc,
                               len(data), len(data), len(name), 0, 0, 0, 0, 0, offset) + name
    # A classic end record (zipfile reads the listing by its size, whatever the count says).
    count = min(entries, 0xFFFF) if declared is None else declared
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), len(local), 0)
    path.write_bytes(bytes(local + central + end))
    return path


# ------------------------------------------------------------------- one class, every attack


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """One run of `torchgrade grade` over honest students mixed with every intake attack."""
    root = tmp_path_factory.mktemp("intake")
    subs, out = root / "submissions", root / "out"
    for name in ("ann", "zoe"):
        honest(subs / name)
    honest(subs / NON_UTF8)                                  # a name that is not UTF-8
    honest(subs / "index.html")                              # class outputs' names
    with zipfile.ZipFile(subs / "grades.csv.zip", "w") as z:
        z.writestr(f"{EXERCISE}.py", SOLUTION)
    honest(subs / ".torchgrade.lock")                        # a dot-name: not a student
    fifo(subs / "pipe_as_exercise" / f"{EXERCISE}.py")       # named pipes, as the exercise ...
    fifo(honest(subs / "pipe_beside") / "data.txt")          # ... beside it ...
    fifo(honest(subs / "pipe_deep") / "hw1" / "notes.ipynb")
    fifo(honest(subs / "pipe_timestamp") / "timestamp.txt")  # ... as the timestamp ...
    fifo(subs / "pipe_zip.zip")                              # ... and as a student's zip
    hardlinked = subs / "copycat" / f"{EXERCISE}.py"         # a hard link to a file elsewhere
    hardlinked.parent.mkdir(parents=True)
    original = root / "elsewhere.py"
    original.write_text(SOLUTION)
    os.link(original, hardlinked)
    past = time.time() - 3600  # zoe handed in an hour before a classmate linked her file
    os.utime(subs / "zoe", (past, past))
    (subs / "linker").mkdir()
    os.link(subs / "zoe" / f"{EXERCISE}.py", subs / "linker" / f"{EXERCISE}.py")
    nb = subs / "huge_notebook" / f"{EXERCISE}.ipynb"
    nb.parent.mkdir(parents=True)
    nb.write_text(big_notebook(480_000))
    # What the trusted side reads of a submission is bounded (tests/test_hostile_trusted.py):
    # a member name of 60 KB of spaces (the name matching was quadratic in it) ...
    (subs / "long_name").mkdir()
    with zipfile.ZipFile(subs / "long_name" / "work.zip", "w") as z:
        z.writestr(f"{EXERCISE}.py", SOLUTION)
        z.writestr(EXERCISE + " " * 60_000 + "_1 (2).py", SOLUTION)
    # ... a "check your work" cell of 3 MB and cells of 200 KB after it (each was parsed) ...
    check_cell = json.dumps({"cell_type": "code", "metadata": {}, "outputs": [],
                             "execution_count": None,
                             "source": "from grader.jupyter import check\n" + "a," * 1_500_000})
    after = json.dumps({"cell_type": "code", "metadata": {}, "outputs": [],
                        "execution_count": None, "source": "x = (" + "a," * 100_000 + ")\n"})
    solution_cell = json.dumps({"cell_type": "code", "metadata": {}, "outputs": [],
                                "execution_count": None, "source": SOLUTION})
    (subs / "huge_check_cell").mkdir()
    (subs / "huge_check_cell" / f"{EXERCISE}.ipynb").write_text(
        '{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": ['
        + ", ".join([solution_cell, check_cell] + [after] * 10) + "]}")
    # ... seven candidate files of 1.9 MB beside the one exactly named (each was parsed) ...
    honest(subs / "candidates")
    for i in range(7):
        (subs / "candidates" / f"{EXERCISE} ({i + 1}).py").write_text(
            "x = (" + "a," * 950_000 + ")\n")
    # ... and a coding cookie of a codec that is no text codec.
    (subs / "rot13").mkdir()
    (subs / "rot13" / f"{EXERCISE}.py").write_text("# -*- coding: rot13 -*-\n" + SOLUTION)
    started = time.monotonic()
    run = torchgrade("grade", subs, "--out", out, "--exercises", EXERCISE, "-j", "2",
                     timeout=900)
    return subs, out, run, time.monotonic() - started


def results(out: Path) -> dict[str, object]:
    return {p.parent.name: read_json(p) for p in out.glob("*/results.json")}


def test_the_run_finishes_with_every_class_output(hostile_class):
    _, out, run, _ = hostile_class
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert (out / "index.html").is_file() and (out / "grades.csv").is_file()
    assert "Traceback" not in run.stderr and "could not start" not in run.stderr


def test_every_student_is_graded_under_a_printable_unique_id(hostile_class):
    _, out, _, _ = hostile_class
    graded = results(out)
    expected = {"ann", "zoe", "caf%E9_windows", "index%2Ehtml", "grades%2Ecsv",
                "pipe_as_exercise", "pipe_beside", "pipe_deep", "pipe_timestamp", "pipe_zip",
                "copycat", "linker", "huge_notebook", "long_name", "huge_check_cell",
                "candidates", "rot13"}
    assert set(graded) == expected
    for sid, result in graded.items():
        assert result.student == sid and sid.isprintable()
        assert result.checks and result.fingerprint  # graded, not a grader failure
    rows = (out / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + len(expected)


@pytest.mark.parametrize("student", ["ann", "zoe", "caf%E9_windows", "index%2Ehtml",
                                     "grades%2Ecsv", "pipe_beside", "pipe_deep",
                                     "pipe_timestamp", "long_name", "huge_check_cell",
                                     "candidates", "rot13"])
def test_honest_work_gets_full_marks_whatever_lies_beside_it(hostile_class, student):
    _, out, _, _ = hostile_class
    result = results(out)[student]
    assert result.score == result.max_score > 0, [c.message for c in result.checks][:3]


@pytest.mark.parametrize("student, words", [
    ("long_name", "1 member(s) with a name longer than 255 characters"),
    ("huge_check_cell", "too large for the grader to analyse"),
    ("rot13", "declares the encoding 'rot13'"),
])
def test_what_the_grader_did_not_read_is_said(hostile_class, student, words):
    _, out, _, _ = hostile_class
    assert words in json.dumps(results(out)[student].model_dump(mode="json"))


def test_the_original_name_is_kept_in_the_results(hostile_class):
    _, out, _, _ = hostile_class
    notes = " ".join(results(out)["caf%E9_windows"].notes)
    assert r"caf\xe9_windows" in notes


@pytest.mark.parametrize("student, words", [
    ("pipe_as_exercise", "is a named pipe, not a regular file"),
    ("pipe_zip", "is a named pipe, not a regular file"),
    ("copycat", "is a hard link"),
    ("linker", "is a hard link"),
    ("huge_notebook", "the notebook has 480000 cells; the limit is 2000"),
])
def test_special_and_oversized_files_cost_only_their_own_checks(hostile_class, student, words):
    _, out, _, _ = hostile_class
    result = results(out)[student]
    text = json.dumps(result.model_dump(mode="json"))
    assert words in text and result.score == 0
    assert "status 70" not in text and "crashed" not in {c.status for c in result.checks}


def test_a_class_output_folder_is_never_graded_as_submissions(hostile_class, tmp_path):
    _, out, _, _ = hostile_class
    run = torchgrade("grade", out, "--out", tmp_path / "other", "--exercises", EXERCISE,
                     timeout=120)
    assert run.returncode == 2 and "output folder" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "other").exists()
    run = torchgrade("grade", out, "--out", out, "--exercises", EXERCISE, timeout=120)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert results(out)["ann"].score > 0  # nothing overwritten


# --------------------------------------------------------------------------- the output folder


@pytest.mark.parametrize("layout", ["same", "inside", "holding", "symlink_same",
                                    "symlink_inside"])
def test_out_mixed_with_submissions_is_refused(tmp_path, layout):
    subs = tmp_path / "class" / "subs"
    honest(subs / "ann")
    out = {"same": subs, "inside": subs / "graded", "holding": tmp_path / "class",
           "symlink_same": tmp_path / "link", "symlink_inside": tmp_path / "link" / "graded"
           }[layout]
    if layout.startswith("symlink"):
        (tmp_path / "link").symlink_to(subs)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    run = torchgrade("grade", subs, "--out", out, "--exercises", EXERCISE, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "torchgrade: error:" in run.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


# --------------------------------------------------------------------------- ids, unit level


@pytest.mark.fast
def test_student_ids_are_printable_reversible_and_never_class_outputs(tmp_path):
    from grader.intake.students import find_students

    subs = tmp_path / "subs"
    names = [NON_UTF8, "%E9", "index.html", "INDEX.HTML", "grades.csv", "canvas_grades.csv",
             "Moodle_Grades.csv", "tab\there", "x" * 250, "alice", "plain name"]
    for name in names:
        (subs / name).mkdir(parents=True)
    for zipped in ("alice.zip", "grades.csv.zip"):
        with zipfile.ZipFile(subs / zipped, "w") as z:
            z.writestr("a.py", "")
    ids = dict(find_students(subs))
    assert len(ids) == len(names) + 2  # unique
    assert {"alice", "plain name", "caf%E9_windows", "%25E9", "index%2Ehtml", "INDEX%2EHTML",
            "grades%2Ecsv", "canvas_grades%2Ecsv", "Moodle_Grades%2Ecsv", "tab%09here"} <= set(ids)
    for sid in ids:
        assert sid.isprintable() and not sid.startswith(".") and len(sid) <= 120
        # every file a run writes at the top of OUT (a folder there crashed the run)
        assert sid.lower() not in ("index.html", "grades.csv", "canvas_grades.csv",
                                   "moodle_grades.csv")
        sid.encode("utf-8")  # valid text
    assert ids["alice"].name == "alice" and ids["alice.zip"].name == "alice.zip"
    assert ids["grades%2Ecsv"].name == "grades.csv" and ids["grades.csv.zip"].is_file()


# --------------------------------------------------------------------------- special files


@pytest.mark.parametrize("kind", ["fifo_exercise", "fifo_other", "device", "socket",
                                  "symlink", "fifo_in_zip_folder"])
def test_the_loader_and_fingerprint_never_block_on_special_files(tmp_path, kind):
    folder = tmp_path / "student"
    folder.mkdir()
    exercise = folder / f"{EXERCISE}.py"
    if kind == "fifo_exercise":
        os.mkfifo(exercise)
    elif kind == "fifo_other":
        exercise.write_text(SOLUTION)
        os.mkfifo(folder / "hw1.py")
    elif kind == "device":
        os.mknod(exercise, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(exercise))
        s.close()
    elif kind == "symlink":
        exercise.symlink_to(SOLUTIONS / f"{EXERCISE}.py")
    else:
        os.mkfifo(folder / "work.zip")
    run = python(f"""
        from pathlib import Path
        from grader.intake.fingerprint import submission_digest
        from grader.intake.submission import load_submission
        from grader.intake.assignment import read_timestamp
        path = Path({str(folder)!r})
        submission_digest(path)
        try:  # the parent's scan, by names
            from grader.intake.submission import exercises_in
            exercises_in(path, [{EXERCISE!r}])
        except ImportError:  # (main, before issue 15)
            pass
        read_timestamp(path)
        sub = load_submission(path, exercises=[{EXERCISE!r}])
        module = sub.modules.get({EXERCISE!r})
        print(repr(sub.notes), module and module.fatal, module and len(module.chunks))
    """, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    if kind == "fifo_other":
        assert "None 1" in run.stdout  # the real file graded
    elif kind == "fifo_in_zip_folder":
        assert "work.zip is a named pipe" in run.stdout
    else:
        word = {"fifo_exercise": "named pipe", "device": "device", "socket": "socket",
                "symlink": "symbolic link"}[kind]
        assert word in run.stdout and " 1" not in run.stdout.split("]")[-1]


@pytest.mark.fast
def test_a_hard_link_is_not_graded_as_the_students_own_file(tmp_path):
    from grader.intake.submission import load_submission

    original = tmp_path / "classmate.py"
    original.write_text(SOLUTION)
    folder = tmp_path / "copycat"
    folder.mkdir()
    os.link(original, folder / f"{EXERCISE}.py")
    module = load_submission(folder, exercises=[EXERCISE]).modules.get(EXERCISE)
    assert module is None or (module.fatal and "hard link" in module.fatal)
    if module is None:
        notes = load_submission(folder, exercises=[EXERCISE]).notes
        assert any("hard link" in n for n in notes)


@pytest.mark.fast
def test_a_hard_link_to_a_classmate_is_graded_as_the_classmate_s_only(tmp_path):
    """The class decides: the file belongs to the student who had it first (a link is made
    to a file that already exists), the copy made with `ln` is refused; a file with a name
    outside the class is nobody's; every name inside one folder is that student's own."""
    from grader.intake.files import class_hard_links, own_links
    from grader.intake.submission import load_submission

    honest = tmp_path / "honest"
    honest.mkdir()
    (honest / f"{EXERCISE}.py").write_text(SOLUTION)
    past = time.time() - 3600
    os.utime(honest, (past, past))  # the honest folder was there an hour before the copy
    copycat = tmp_path / "copycat"
    copycat.mkdir()
    os.link(honest / f"{EXERCISE}.py", copycat / f"{EXERCISE}.py")
    twice = tmp_path / "twice"
    twice.mkdir()
    (twice / f"{EXERCISE}.py").write_text(SOLUTION)
    os.link(twice / f"{EXERCISE}.py", twice / "backup.py")
    students = [("honest", honest), ("copycat", copycat), ("twice", twice)]
    owned = class_hard_links(students)
    assert set(owned) == {"honest", "twice"}

    def module(student, folder):
        with own_links(owned.get(student, ())):
            return load_submission(folder, exercises=[EXERCISE]).modules.get(EXERCISE)

    assert module("honest", honest) is not None and not module("honest", honest).fatal
    assert module("twice", twice) is not None and not module("twice", twice).fatal
    copied = module("copycat", copycat)
    assert copied is None or (copied.fatal and "hard link" in copied.fatal)
    # a third name outside the class: nobody owns the file any more
    os.link(honest / f"{EXERCISE}.py", tmp_path / "outside.py")
    assert "honest" not in class_hard_links(students)


@pytest.mark.fast
def test_the_run_says_when_hard_links_cost_students_their_files(tmp_path, monkeypatch, caplog):
    """A backup or snapshot made with hard links (`cp -al`, `rsync --link-dest`) has every file
    linked outside the class: the run says so, not "the wrong course?"; a file linked within
    the class is its first holder's, and no class-wide warning is given; after grading, the
    students whose files were refused as hard links are named."""
    import grader.running.pool
    from grader.commands.grade import grade
    from grader.grading.notices import warn_of_notes
    from grader.intake.files import HARD_LINK_REFUSED
    from grader.models import SubmissionResult

    monkeypatch.setattr(grader.running.pool, "grade_in_pool", lambda *a, **k: None)
    subs, elsewhere = honest(tmp_path / "class" / "zoe").parent, tmp_path / "backup"
    elsewhere.mkdir()
    os.link(subs / "zoe" / f"{EXERCISE}.py", elsewhere / "zoe.py")
    grade(subs, out=tmp_path / "out1", exercises=[EXERCISE])
    assert "hard link" in caplog.text and "wrong course" not in caplog.text, caplog.text
    caplog.clear()
    (elsewhere / "zoe.py").unlink()
    (subs / "bob").mkdir()
    os.link(subs / "zoe" / f"{EXERCISE}.py", subs / "bob" / f"{EXERCISE}.py")
    grade(subs, out=tmp_path / "out2", exercises=[EXERCISE])
    assert "every student will score 0" not in caplog.text, caplog.text
    caplog.clear()
    refused = SubmissionResult(student="bob", grader_version="0",
                               notes=[f"{EXERCISE}.py {HARD_LINK_REFUSED}: skipped"])
    warn_of_notes([refused, SubmissionResult(student="zoe", grader_version="0")])
    assert "1 submission(s) hold files" in caplog.text and ": bob." in caplog.text
    from grader.outputs.exports import remarks
    assert HARD_LINK_REFUSED in remarks(refused)  # where the 0 is read, too


# --------------------------------------------------------------------------- cost in the parent


def test_a_notebook_of_480000_cells_is_refused_quickly(tmp_path):
    from grader.intake.submission import load_submission

    folder = tmp_path / "s"
    folder.mkdir()
    (folder / f"{EXERCISE}.ipynb").write_text(big_notebook(480_000))
    started = time.monotonic()
    module = load_submission(folder, exercises=[EXERCISE]).modules[EXERCISE]
    assert time.monotonic() - started < 5
    assert module.fatal == (f"{EXERCISE}.ipynb: the notebook has 480000 cells; the limit is "
                            "2000")


@pytest.mark.fast
@pytest.mark.parametrize("text, words", [
    # no "cell_type" to count, and the cells are counted after parsing
    ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ['
     + ", ".join(['{"cell\\u005ftype": "code", "source": ""}'] * 3000) + "]}",
     "the notebook has 3000 cells; the limit is 2000"),
    # millions of tiny containers
    ('{"cells": [' + ", ".join(["[]"] * 600_000) + "]}", "too many parts"),
    ('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
])
def test_notebooks_are_bounded_before_they_are_parsed(tmp_path, text, words):
    from grader.intake.submission import load_submission

    folder = tmp_path / "s"
    folder.mkdir()
    (folder / f"{EXERCISE}.ipynb").write_text(text)
    started = time.monotonic()
    module = load_submission(folder, exercises=[EXERCISE]).modules[EXERCISE]
    assert time.monotonic() - started < 5
    assert words in (module.fatal or ""), module.fatal


@pytest.mark.parametrize("declared", [None, 1])  # 1: the end record lies about the count
def test_a_zip_of_300000_entries_is_refused_before_its_listing_is_parsed(tmp_path, declared):
    from grader.intake.fingerprint import submission_digest
    from grader.intake.submission import exercises_in, load_submission

    path = many_entries_zip(tmp_path / "bob.zip", 300_000, declared)
    started = time.monotonic()
    assert exercises_in(path, [EXERCISE]) == set()
    submission_digest(path)
    sub = load_submission(path, exercises=[EXERCISE])
    assert time.monotonic() - started < 5
    assert sub.modules == {} and any("entries or more (by its end record); the limit is 20000" in n
                                     for n in sub.notes), sub.notes


def test_zip_bombs_are_refused_by_declared_size_and_ratio(tmp_path):
    from grader.intake.submission import load_submission

    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{EXERCISE}.py", b"#" * (64 << 20))  # 64 MB of one byte: ~1000x
    sub = load_submission(path, exercises=[EXERCISE])
    assert sub.modules == {} and any("zip bomb" in n for n in sub.notes), sub.notes


@pytest.mark.fast
def test_the_parent_reads_no_submission(tmp_path, monkeypatch):
    """`grade` lists and fingerprints; loading is the grading processes' (in parallel)."""
    import grader.running.pool
    import grader.intake.submission
    from grader.commands.grade import grade

    subs = tmp_path / "subs"
    honest(subs / "ann")
    honest(subs / "bob")
    loaded, tasks = [], []
    monkeypatch.setattr(grader.intake.submission, "read_module",
                        lambda *a, **k: loaded.append(a) or pytest.fail("parsed in the parent"))

    def fake_pool(pending, *, settings, steps, jobs, on_result, on_isolation):
        tasks.extend(pending)
        return []

    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool)
    grade(subs, out=tmp_path / "out")  # exercises found by file names only
    assert not loaded and [t.student for t in tasks] == ["ann", "bob"]
    assert all(t.submission is None and t.path is not None for t in tasks)


# --------------------------------------------------------------------------- survival


class Patched:
    """A grading process (grader.running.pool.serve) with one of its steps broken for some
    students."""

    def __init__(self, how: str, victims: set[str]):
        self.how, self.victims = how, victims

    def __call__(self, conn, settings, steps):
        import grader.grading.steps
        import grader.grading.writer
        import grader.running.pool

        score = grader.grading.steps.result_of
        write = grader.grading.writer.write_submission_outputs
        victims, how = self.victims, self.how

        def bad_score(run, **kwargs):
            result = score(run, **kwargs)
            if result.student in victims:  # text no UTF-8 encoder takes
                result.checks[0].message += " \udcff"
                result.notes.append("\ud800")
            return result

        def bad_write(result, out, **kwargs):
            if result.student in victims:
                raise OSError(28, "No space left on device")
            return write(result, out, **kwargs)

        # Patched in this grading process only (it is a fork): the steps look them up here.
        if how == "surrogates":
            grader.grading.steps.result_of = bad_score
        elif how == "disk_full":
            grader.grading.writer.write_submission_outputs = bad_write
        elif how == "dies":  # no sandbox needed to prove the pool's side: a fake grader
            return dying_grader(conn, victims)
        grader.running.pool.serve(conn, settings, steps)


def dying_grader(conn, victims: set[str]) -> None:
    """A grading process whose sandbox starts, that dies (SIGKILL) on each task of `victims`
    and gives every other submission full marks."""
    from grader.models import CheckResult, SubmissionResult

    from grader.running.pool import Graded, SandboxStarted

    conn.send(SandboxStarted("full", ""))
    while (task := conn.recv()) is not None:
        student = task.submission.student
        if student in victims:
            os.kill(os.getpid(), 9)
        check = CheckResult(id="c", exercise=EXERCISE, targets=["f"], visibility="visible",
                            points=1, max_points=1, status="passed")
        result = SubmissionResult(student=student, grader_version="fake", checks=[check],
                                  fingerprint=task.fingerprint)
        conn.send(Graded(result))
    os._exit(0)


@pytest.mark.parametrize("how", ["surrogates", "disk_full", "dies"])
def test_three_bad_submissions_first_cost_only_themselves(tmp_path, how):
    from grader.intake.assignment import from_exercises
    from grader.grading.steps import STEPS
    from grader.running.pool import GradeTask, PoolSettings, grade_in_pool
    from grader.intake.submission import load_submission

    subs = tmp_path / "subs"
    names = ["a1", "a2", "a3", "zed"]
    for name in names:
        honest(subs / name)
    # Loaded here (as tests/test_bulk.py does), so that the same test runs against main.
    tasks = [GradeTask(submission=load_submission(subs / s, exercises=[EXERCISE], student=s),
                       fingerprint=f"fp-{s}") for s in names]
    settings = PoolSettings(out=tmp_path / "out", exercises=[EXERCISE],
                            assignment=from_exercises([EXERCISE]))
    results = {r.student: r for r in grade_in_pool(
        tasks, settings=settings, steps=STEPS, jobs=1, serve=Patched(how, {"a1", "a2", "a3"}))}
    assert set(results) == set(names)
    zed = results["zed"]
    assert zed.score == zed.max_score > 0 and zed.fingerprint == "fp-zed"
    for name in ("a1", "a2", "a3"):
        result = results[name]
        if how == "surrogates":  # written, escaped, with its verdicts and fingerprint
            on_disk = read_json(tmp_path / "out" / name / "results.json")
            assert on_disk.score == on_disk.max_score > 0 and on_disk.fingerprint == f"fp-{name}"
            # The result model makes its text valid (U+FFFD) when it is built; had it not, the
            # writer's escaped retry would have (a visible \\udcff and a note saying so).
            message = on_disk.checks[0].message
            assert "\udcff" not in message
            assert "\ufffd" in message or ("\\udcff" in message
                                           and "escaped" in on_disk.notes[-1])
        else:  # not graded, no fingerprint: the next run retries; the summary counts it
            assert not result.checks and result.fingerprint is None
            assert "not the student's fault" in result.notes[0]


def test_a_process_that_dies_before_its_sandbox_starts_is_the_machines_problem(tmp_path):
    from grader.intake.assignment import from_exercises
    from grader.grading.steps import STEPS
    from grader.running.pool import GradeTask, PoolBroken, PoolSettings, grade_in_pool
    from grader.intake.submission import load_submission

    honest(tmp_path / "subs" / "ann")
    tasks = [GradeTask(submission=load_submission(tmp_path / "subs" / "ann",
                                                  exercises=[EXERCISE]))]
    settings = PoolSettings(out=tmp_path / "out", exercises=[EXERCISE],
                            assignment=from_exercises([EXERCISE]))
    with pytest.raises(PoolBroken, match="before grading anything"):
        grade_in_pool(tasks, settings=settings, steps=STEPS, jobs=1, serve=dies_at_start)
    assert not (tmp_path / "out" / "ann").exists()


def dies_at_start(conn, settings, steps):
    os._exit(3)


def test_a_symbolic_link_among_the_students_is_not_graded(tmp_path, caplog):
    """A link would bring a folder from outside the class (the solutions) in as a student, and
    with it a second name for a hard-linked solution inside the class."""
    from grader.intake.students import find_students

    subs = tmp_path / "subs"
    honest(subs / "ann")
    honest(tmp_path / "outside")
    (subs / "linked").symlink_to(tmp_path / "outside")
    (subs / ".hidden").mkdir()
    with caplog.at_level("WARNING", logger="torchgrade"):
        assert [sid for sid, _ in find_students(subs)] == ["ann"]
    assert "symbolic link" in caplog.text and "hidden name" in caplog.text


def test_out_that_is_a_file_is_refused(tmp_path):
    subs = tmp_path / "subs"
    honest(subs / "ann")
    (tmp_path / "out").write_text("not a folder")
    run = torchgrade("grade", subs, "--out", tmp_path / "out", "--exercises", EXERCISE,
                     timeout=120)
    assert run.returncode == 2 and "is a file" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("single_file", [True, False])
def test_the_note_of_an_escaped_student_id_quotes_the_name_it_was_made_from(tmp_path,
                                                                          single_file):
    """A single file is named by its folder: the note quotes that folder's bytes (it quoted the
    file's name, which says nothing about where the id came from)."""
    from grader.intake.submission import original_name_note, student_id_for

    folder = Path(os.fsdecode(bytes(tmp_path) + b"/ann\xff\x1b[2J"))
    folder.mkdir()
    (folder / "strides_broadcasting.py").write_text("x = 1\n")
    path = folder / "strides_broadcasting.py" if single_file else folder
    student = student_id_for(path)
    assert student == "ann%FF%1B[2J"
    note = original_name_note(path, student)
    assert note is not None and "ann\\xff\\x1b[2J" in note and "strides" not in note
