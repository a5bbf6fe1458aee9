"""What a submission's bytes may cost the trusted side (the parent, a grading process, a Dask
run's client), and that an accident never sticks to an honest student.

Each attack is built here, bounded: the work the grader would do on it is counted (characters
looked at, parsed, compiled), never timed, except where a test only needs it to end at all.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import zipfile
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.intake import budget as budget_module
from grader.intake import submission as submission_module
from grader.intake.budget import (PIECE_CHARS, SUBMISSION_CHARS, AnalysisBudget, memory_budget,
                                  parse)
from grader.intake.files import MAX_NAME_CHARS, MAX_PATH_CHARS, overlong
from grader.intake.students import check_folders
from grader.intake.submission import (OUT_MARKER, load_submission, match_exercise,
                                      strip_decorations)

fast = pytest.mark.fast

EX = "strides_broadcasting"
CHECK = "from grader.jupyter import check\n"


def notebook(cells: list[str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None,
         "outputs": [], "source": source} for i, source in enumerate(cells)]})


# --------------------------------------------------------------------------- names


@pytest.mark.timeout(30)  # the regex loop took hours on a 60 KB name; this takes milliseconds
@pytest.mark.parametrize("tail", [" " * 60_000 + "_1", " 1" * 30_000, " (1)" * 15_000,
                                  "_copy" * 12_000, " " * 60_000 + "(1)"])
@fast
def test_stripping_decorations_is_linear_in_the_name(tail):
    stem = EX + tail
    bare = strip_decorations(stem)
    assert bare.startswith(EX) and len(bare) <= len(stem)


@pytest.mark.parametrize("name, exercise", [
    (f"{EX} (1).py", EX), (f"Copy of {EX}_v2 copy.py", EX), (f"{EX}-final.PY", EX),
    ("notes (1).py", None), (f"{EX}_.py", None)])
@fast
def test_decorations_are_still_set_aside(name, exercise):
    assert match_exercise(name, [EX])[0] == exercise


@fast
def test_a_name_at_the_bound_is_matched_and_one_over_it_is_not():
    at = EX + " " * (MAX_NAME_CHARS - len(EX) - len("_1.py")) + "_1.py"
    assert len(at) == MAX_NAME_CHARS and match_exercise(at, [EX])[0] == EX
    over = "x" + at
    assert match_exercise(over, [EX]) == (None, None)


@fast
def test_zip_members_with_overlong_names_are_skipped_before_any_matching(tmp_path):
    zipped = tmp_path / "ann.zip"
    at_bound = "d/" * ((MAX_PATH_CHARS - len(EX) - 3) // 2) + f"{EX}.py"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr(EX + " " * 60_000 + "_1.py", "x = 1\n")   # one part too long
        z.writestr("a/" * 600 + "parameters.py", "x = 1\n")    # the path too long
        z.writestr(f"{EX}.py", "def f():\n    return 1\n")
    assert not overlong(at_bound) and overlong("x" * (MAX_NAME_CHARS + 1))
    sub = load_submission(zipped, exercises=[EX, "parameters"])
    assert sub.modules[EX].path.endswith(f"{EX}.py") and "parameters" not in sub.modules
    assert any("2 member(s) with a name longer than" in n for n in sub.notes), sub.notes


@fast
def test_a_class_zip_with_an_overlong_member_name_is_read_without_it(tmp_path, caplog):
    from grader.intake.lms import list_download

    download = tmp_path / "class.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr("ann/" + EX + ".py", "x = 1\n")
        z.writestr("bob/" + " " * 60_000 + ".py", "x = 1\n")
    names = [e.name for e in list_download(download)]
    assert names == [f"ann/{EX}.py"]
    assert "1 member(s) with a name longer than" in caplog.text


# --------------------------------------------------------------------------- parses


@pytest.fixture
def analysed(monkeypatch):
    """Every piece of student code the grader parses or compiles itself, by size."""
    sizes: list[int] = []
    real_parse, real_compile = ast.parse, compile

    def parse_(source, *args, **kwargs):
        sizes.append(len(source))
        return real_parse(source, *args, **kwargs)

    def compile_(source, *args, **kwargs):
        if isinstance(source, str):
            sizes.append(len(source))
        return real_compile(source, *args, **kwargs)

    monkeypatch.setattr(budget_module.ast, "parse", parse_)
    monkeypatch.setattr(submission_module, "compile", compile_, raising=False)
    return sizes


@fast
def test_a_budget_takes_a_piece_at_its_bound_and_refuses_one_over_it():
    budget = AnalysisBudget()
    assert budget.allows("x" * PIECE_CHARS, "a") and not budget.allows("x" * (PIECE_CHARS + 1),
                                                                      "b")
    assert budget.refused == ["b"] and budget.left == SUBMISSION_CHARS - PIECE_CHARS
    while budget.allows("x" * PIECE_CHARS):
        pass
    assert budget.left < PIECE_CHARS and parse("x = 1\n", AnalysisBudget(left=3)) is None


def attack_huge_check_cell(folder: Path) -> None:
    after = ["x = (" + "a," * 100_000 + ")\n" for _ in range(20)]
    (folder / "parameters.ipynb").write_text(notebook([CHECK + "a," * 1_500_000 + "\n",
                                                       *after]))


def attack_candidates(folder: Path) -> None:
    for i in range(8):
        (folder / f"{EX} ({i + 1}).py").write_text("x = (" + "a," * 950_000 + ")\n")


def attack_many_cells(folder: Path) -> None:
    (folder / "parameters.ipynb").write_text(notebook(["x = (" + "a," * 120_000 + ")\n"] * 60))


def attack_many_small_candidates(folder: Path) -> None:
    for i in range(8):
        (folder / f"{EX}_v{i + 1}.py").write_text("x = (" + "a," * (PIECE_CHARS // 2 - 8) + ")\n")


@pytest.mark.parametrize("attack", [attack_huge_check_cell, attack_candidates, attack_many_cells,
                                    attack_many_small_candidates])
@fast
def test_the_grader_analyses_a_bounded_amount_of_any_submission(attack, analysed, tmp_path):
    """Each parse or compile in the trusted process is at most PIECE_CHARS, all of them at most
    SUBMISSION_CHARS (plus one piece), whatever the submission; what was not analysed is said."""
    folder = tmp_path / "eve"
    folder.mkdir()
    attack(folder)
    sub = load_submission(folder, exercises=[EX, "parameters"])
    assert max(analysed, default=0) <= PIECE_CHARS
    assert sum(analysed) <= SUBMISSION_CHARS + PIECE_CHARS
    assert any("too large for the grader to analyse" in n for n in sub.notes), sub.notes
    assert sub.modules  # still graded: the worker says what the grader did not analyse


@fast
def test_an_honest_notebooks_check_cells_are_still_told_from_the_work(tmp_path):
    folder = tmp_path / "ann"
    folder.mkdir()
    (folder / "parameters.ipynb").write_text(notebook(
        ["def f():\n    return 1\n", CHECK + "check('parameters')\n", "check('parameters')\n",
         "y = 2\n"]))
    module = load_submission(folder, exercises=["parameters"]).modules["parameters"]
    assert [c.code for c in module.chunks] == ["def f():\n    return 1\n", "y = 2\n"]


@fast
def test_memory_budget_turns_growth_into_a_memory_error_and_restores_the_limit():
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with pytest.raises(MemoryError):
        with memory_budget(64 << 20):
            bytearray(512 << 20)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    with memory_budget(64 << 20):
        bytearray(8 << 20)  # within it


@fast
def test_a_file_that_exhausts_the_memory_budget_costs_that_file_only(tmp_path, monkeypatch):
    folder = tmp_path / "eve"
    folder.mkdir()
    (folder / f"{EX}.py").write_text("x = 1\n")
    (folder / "parameters.py").write_text("y = 1\n")
    real = submission_module.decode_text

    def greedy(data, name):
        if name == "parameters.py":
            raise MemoryError
        return real(data, name)

    monkeypatch.setattr(submission_module, "decode_text", greedy)
    sub = load_submission(folder, exercises=[EX, "parameters"])
    assert sub.modules[EX].fatal is None
    assert "could not be read (MemoryError" in sub.modules["parameters"].fatal


# --------------------------------------------------------------------------- codecs


@pytest.mark.parametrize("cookie", [b"rot13", b"punycode", b"hex", b"base64", b"zlib",
                                    b"uu", b"idna", b"undefined"])
@fast
def test_a_codec_that_is_no_text_codec_costs_its_file_only(tmp_path, cookie):
    folder = tmp_path / "eve"
    folder.mkdir()
    (folder / f"{EX}.py").write_bytes(b"# -*- coding: " + cookie + b" -*-\nx = 1\n")
    (folder / "parameters.py").write_text("def f():\n    return 1\n")
    sub = load_submission(folder, exercises=[EX, "parameters"])
    assert sub.modules["parameters"].fatal is None and sub.modules["parameters"].chunks
    module = sub.modules[EX]
    assert module.fatal is None or "could not" in module.fatal
    assert not any("could not be read" in n for n in sub.notes), sub.notes


# --------------------------------------------------------------------------- OUT


@fast
def test_out_that_torchgrade_did_not_write_is_refused_naming_what_it_holds(tmp_path):
    subs = tmp_path / "class"
    (subs / "ann").mkdir(parents=True)
    mine = tmp_path / "mydocs"
    (mine / "alice").mkdir(parents=True)
    for name in ("index.html", "grades.csv", "alice/results.json"):
        (mine / name).write_text("the instructor's own")
    with pytest.raises(UsageError) as info:
        check_folders(subs, mine)
    assert "alice/" in str(info.value) and "index.html" in str(info.value)
    assert "\n" not in str(info.value)
    check_folders(subs, tmp_path / "new")           # a new folder
    (tmp_path / "empty").mkdir()
    check_folders(subs, tmp_path / "empty")         # an empty one
    (tmp_path / "dots" / ".git").mkdir(parents=True)
    check_folders(subs, tmp_path / "dots")          # only dot-names
    (tmp_path / "staged" / ".lms").mkdir(parents=True)
    with pytest.raises(UsageError, match=r"\.lms/"):  # but those a run writes into or removes
        check_folders(subs, tmp_path / "staged")
    (mine / OUT_MARKER).write_text("")
    check_folders(subs, mine)                       # one torchgrade wrote


@fast
def test_index_refuses_a_folder_without_the_marker(tmp_path):
    from grader.commands.index import index

    (tmp_path / "index.html").write_text("mine")
    (tmp_path / "grades.csv").write_text("mine")
    with pytest.raises(UsageError, match="not a folder written by"):
        index(tmp_path)
    assert (tmp_path / "index.html").read_text() == "mine"


@fast
def test_outputs_rendered_elsewhere_keep_the_grade_they_replace(tmp_path):
    """The writer of a Dask run's results: a result received over a grade keeps it as
    results.previous.json and says so, as a local run's writer does."""
    from grader.grading.finish import Finishing
    from grader.grading.writer import write_into, write_result
    from grader.models import CheckResult, SubmissionResult
    from grader.outputs.folder import PREVIOUS

    def result(points: float) -> SubmissionResult:
        return SubmissionResult(student="ann", grader_version="0.1.0", score=points, checks=[
            CheckResult(id="m.c", exercise="m", targets=["f"], visibility="hidden",
                        points=points, max_points=2, status="passed" if points else "failed")])

    old = result(2)
    write_result(old, tmp_path, Finishing())
    new = result(0)
    files = {"report.html": "<p>as rendered</p>", "gradescope.json": "{}",
             "results.json": new.model_dump_json()}
    write_into(tmp_path, new, files)
    folder = tmp_path / "ann"
    assert json.loads((folder / PREVIOUS).read_text())["score"] == 2
    assert json.loads((folder / "results.json").read_text())["replaced"]["final_score"] == 2
    assert "as rendered" not in (folder / "report.html").read_text()  # said anew: it regraded
    other = result(1).model_copy(update={"student": "bob"})
    write_into(tmp_path, other, {**files, "results.json": other.model_dump_json()})
    assert (tmp_path / "bob" / "report.html").read_text() == "<p>as rendered</p>"
    assert not (tmp_path / "bob" / PREVIOUS).exists()


def test_grading_processes_hold_their_memory_to_a_budget_and_rank_after_workers():
    import multiprocessing

    from grader.running.pool import GRADING_PROCESS_MEMORY, GRADING_PROCESS_OOM_SCORE

    def child(conn):
        from grader.running.pool import hold_to_budget

        hold_to_budget()
        with open("/proc/self/oom_score_adj") as f:
            score = int(f.read())
        try:
            bytearray(GRADING_PROCESS_MEMORY + (256 << 20))
            grew = True
        except MemoryError:
            grew = False
        conn.send((resource.getrlimit(resource.RLIMIT_DATA)[0], score, grew))

    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=child, args=(theirs,))
    process.start()
    limit, score, grew = ours.recv()
    process.join()
    assert limit == GRADING_PROCESS_MEMORY and not grew
    assert score == GRADING_PROCESS_OOM_SCORE or os.geteuid() != 0 and score >= 0


# --------------------------------------------------------------------------- accidents

def _memory_cgroups():
    from grader.worker import cgroups, sandbox

    return cgroups.available() if sandbox.is_root() else set()


@pytest.mark.slow
@pytest.mark.skipif("memory" not in _memory_cgroups(), reason="needs a writable memory cgroup")
def test_a_worker_killed_for_memory_the_machine_lacked_is_lost_not_final_and_graded_again(
        tmp_path):
    """The run is put in a cgroup of its own (a "machine" of 1150 MiB: an honest run's whole
    tree peaks at ~0.55 GiB) and a student's module takes 1 GiB when imported, within its
    worker's own limit of 1.5 GiB: the kernel kills the worker for the machine's memory. Its
    checks are lost (not the student's doing, said so), the result has no fingerprint, the run
    exits 1 naming the student, and the next run grades it again without --force; on a machine
    with the memory, the same submission gets full marks."""
    import subprocess
    import sys

    from grader.worker import cgroups

    solution = (Path(__file__).parent.parent / "solutions" / f"{EX}.py")
    cls = tmp_path / "class"
    (cls / "hog").mkdir(parents=True)
    (cls / "hog" / f"{EX}.py").write_text(
        solution.read_text() + '\n_held = [bytearray(b"x" * (1 << 24)) for _ in range(64)]\n')
    root = cgroups.ZygoteGroup.create()
    assert root is not None
    machine = cgroups.WorkerGroup.create([h for h in root.hierarchies
                                          if "memory" in h.controllers],
                                         "machine", memory=1150 << 20, processes=4096)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(cls), "--out", str(out),
               "--exercises", EX, "-j", "1"]
    try:
        for _ in range(2):
            run = subprocess.run(command, capture_output=True, text=True, timeout=600,
                                 preexec_fn=machine.join)
            assert run.returncode == 1, run.stdout + run.stderr
            assert "LOST to the machine" in run.stdout and ": hog;" in run.stdout, run.stdout
            assert "already graded" not in run.stdout
            result = json.loads((out / "hog" / "results.json").read_text())
            assert result["fingerprint"] is None
            assert {c["reason"] for c in result["checks"]} == {"lost"}
            assert "not your code's doing" in result["checks"][0]["message"]
            assert "its memory limit" not in result["checks"][0]["message"]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        result = json.loads((out / "hog" / "results.json").read_text())
        assert result["fingerprint"] and result["score"] == result["max_score"] > 0
    finally:
        machine.remove()
        root.remove()


@fast
def test_a_class_zip_is_refused_by_its_end_record_before_its_listing_is_parsed(tmp_path,
                                                                               monkeypatch):
    """At the bound of entries (and listing bytes per entry) a class zip is read; one over it
    is refused (exit 2, one line) before zipfile parses the listing."""
    from grader.intake import lms

    monkeypatch.setattr(lms, "MAX_ENTRIES", 10)
    at, over, wordy = tmp_path / "at.zip", tmp_path / "over.zip", tmp_path / "wordy.zip"
    for path, count, name in ((at, 10, "s{}/x.py"), (over, 11, "s{}/x.py"),
                              (wordy, 7, "s{}/" + "n" * 250 + "/" + "m" * 250 + ".py")):
        with zipfile.ZipFile(path, "w") as z:
            for i in range(count):
                z.writestr(name.format(i), "")
    assert len(lms.list_download(at)) == 10
    for refused in (over, wordy):  # wordy: 7 entries, a listing 12 entries' worth
        with pytest.raises(UsageError, match="entries or more"):
            lms.list_download(refused)


@fast
@pytest.mark.parametrize("cookie", ["punycode", "idna"])
def test_a_codec_written_in_python_is_never_run_on_a_students_bytes(cookie):
    """punycode's decoder (pure Python) is quadratic: the 2 MB a .py may hold took 430 s of a
    grading process's CPU. A file declaring it is read as UTF-8, with a note: the text that
    comes back is the bytes as UTF-8, which punycode would have decoded to something else."""
    from grader.intake.submission import decode_text, linear_codec

    data = f"# coding: {cookie}\n-".encode() + b"a" * (2 << 20)
    text, note = decode_text(data, "x.py")
    assert text == data.decode("utf-8") and note is not None and cookie in note
    assert not linear_codec(cookie)


@fast
def test_the_codecs_students_use_are_still_decoded():
    from grader.intake.submission import decode_text, linear_codec

    for codec in ("utf-8", "utf-8-sig", "latin-1", "cp1252", "iso8859-15", "koi8-r", "gbk",
                  "shift_jis", "euc_kr", "big5", "mac-roman", "utf-16", "ascii"):
        assert linear_codec(codec), codec
    text, note = decode_text("# coding: cp1252\nx = 'caf\u00e9'\n".encode("cp1252"), "x.py")
    assert "caf\u00e9" in text and note is None


@fast
@pytest.mark.timeout(60)  # one level a pass, each re-splitting every name, took minutes
def test_a_class_zip_nested_hundreds_of_folders_deep_is_read_in_one_pass(tmp_path):
    from grader.intake.lms import list_download

    root = "a/" * 495 + "stud/"
    download = tmp_path / "class.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr(root + f"{EX}.py", "x = 1\n")
        for i in range(5000):
            z.writestr(root + f"notes{i}.txt", "")
    names = [e.name for e in list_download(download)]
    assert f"stud/{EX}.py" in names and len(names) == 5001
