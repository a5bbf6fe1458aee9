"""Job arrays (issue 20): `torchgrade grade --shard K/N` grades a stable shard of the class, many
shards write into one OUT at once, and `torchgrade index OUT` then gives the same class as one
unsharded run.

The end-to-end test grades `strides_broadcasting` only, five students (the solution twice, the
stub, two mutants), with `-j 1` per shard, to stay within a couple of minutes on two cores.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXERCISES, SOLUTIONS
from grader.cli import main as cli_main
from mutants import mutants_of
from grader.grading.out import out_locks
from grader.errors import UsageError
from grader.intake.lms import list_download, parse
from grader.intake.shards import Shard, parse_shard, shard_of
from grader.intake.students import class_students
from grader.outputs.writing import OutLock, read_json, remove_stale_temp_files

EXERCISE = "strides_broadcasting"
MUTANTS = {m.name: m.source() for m in mutants_of(EXERCISE)}
CLASS = {  # student -> the text of the file they hand in
    "ann": (SOLUTIONS / f"{EXERCISE}.py").read_text(),
    "bob": (EXERCISES / f"{EXERCISE}.py").read_text(),
    "cat": MUTANTS["c_strides_fortran_order"],
    "dan": (SOLUTIONS / f"{EXERCISE}.py").read_text(),
    "eve": MUTANTS["broadcast_strides_never_raises"],
}


def torchgrade(*args, timeout=900, **kwargs):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **kwargs)


# --------------------------------------------------------------------------- the shards


@pytest.mark.fast
def test_a_students_shard_depends_only_on_their_id_and_n():
    ids = [f"s{i:03d}" for i in range(300)]
    for n in (1, 2, 3, 7):
        shards = [Shard(k, n) for k in range(1, n + 1)]
        # disjoint and covering: every student in exactly one shard, none empty here
        assert all(sum(s.holds(i) for s in shards) == 1 for i in ids)
        assert all(any(s.holds(i) for i in ids) for s in shards)
    # stable across processes, machines and Python runs (sha256, not the salted hash())
    assert [shard_of(i, 7) for i in ids[:12]] == [6, 6, 7, 7, 3, 3, 5, 6, 5, 4, 5, 7]
    assert {s: shard_of(s, 2) for s in CLASS} == {"ann": 1, "bob": 1, "cat": 2, "dan": 2,
                                                   "eve": 2}


@pytest.mark.fast
@pytest.mark.parametrize("text", ["0/2", "3/2", "x/y", "1/0", "-1/2", "1/2/3", "", "2"])
def test_a_bad_shard_exits_2_with_one_line(text, tmp_path, capsys):
    with pytest.raises(UsageError):
        parse_shard(text)
    with pytest.raises(SystemExit) as exc:
        cli_main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), f"--shard={text}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shard" in err and ("K/N" in err or "1..N" in err)
    assert not (tmp_path / "out").exists()


@pytest.mark.fast
def test_good_shards_parse_one_based():
    assert parse_shard("1/1") == Shard(1, 1) and parse_shard(" 4 / 8 ") == Shard(4, 8)
    assert str(parse_shard("2/3")) == "2/3" and parse_shard("2/3").name == "2-of-3"


# --------------------------------------------------------------------------- sharing OUT


@pytest.mark.fast
def test_shards_share_out_but_not_a_shard_and_never_with_a_whole_run(tmp_path):
    first = out_locks(tmp_path, Shard(1, 2))
    second = out_locks(tmp_path, Shard(2, 2))  # another shard: at the same time
    with pytest.raises(UsageError, match="shard 1/2"):
        out_locks(tmp_path, Shard(1, 2))       # the same shard twice: refused
    with pytest.raises(UsageError, match="another `torchgrade grade` run"):
        out_locks(tmp_path, None)              # a whole run (or `index`) waits for all shards
    for lock in [*first, *second]:
        lock.__exit__(None, None, None)
    whole = out_locks(tmp_path, None)          # now it may
    with pytest.raises(UsageError):
        out_locks(tmp_path, Shard(2, 2))
    whole[0].__exit__(None, None, None)
    assert not (tmp_path / OutLock.NAME).exists()


@pytest.mark.fast
def test_a_shard_removes_only_its_own_students_temporary_files(tmp_path):
    for student in ("ann", "cat"):
        (tmp_path / student).mkdir()
        (tmp_path / student / ".results.json.abc.tmp").write_text("{")
    (tmp_path / ".index.html.abc.tmp").write_text("<")
    assert remove_stale_temp_files(tmp_path, ["ann"]) == 1
    # cat's result and the class file may be being written by another shard right now
    assert (tmp_path / "cat" / ".results.json.abc.tmp").exists()
    assert (tmp_path / ".index.html.abc.tmp").exists()


@pytest.mark.fast
def test_a_shard_stages_only_its_students_and_keeps_the_other_shards_staging(tmp_path):
    download = tmp_path / "dl"
    download.mkdir()
    solution = (SOLUTIONS / f"{EXERCISE}.py").read_text()
    for i, lms_id in enumerate(("12345", "23456", "34567", "45678")):
        (download / f"student{i}_{lms_id}_{900 + i}_{EXERCISE}.py").write_text(solution)
    found = parse(list_download(download), "canvas")
    staging = tmp_path / "out" / ".lms"
    staged = {}
    for k in (1, 2):  # shard 2 stages while shard 1's students are being graded
        mine = class_students(found, staging, ["99999"], Shard(k, 2).holds)
        assert {sid for sid, _ in mine} == {s for s in ("12345", "23456", "34567", "45678",
                                                        "99999") if shard_of(s, 2) == k}
        staged.update(mine)
    assert len(staged) == 5
    for sid, home in staged.items():  # every shard's staged folder is still there
        assert home.parent == staging and home.is_dir()
        assert (home / f"{EXERCISE}.py").is_file() or sid == "99999"


# --------------------------------------------------------------------------- end to end


def index_rows(out: Path) -> str:
    """index.html without the moment it was generated."""
    return re.sub(r"generated[^<]*", "", (out / "index.html").read_text())


@pytest.mark.slow
def test_two_shards_at_once_then_index_give_the_class_of_one_run(tmp_path):
    subs = tmp_path / "subs"
    for student, source in CLASS.items():
        (subs / student).mkdir(parents=True)
        (subs / student / f"{EXERCISE}.py").write_text(source)
    common = ["--exercises", EXERCISE, "-j", "1"]
    sharded = tmp_path / "sharded"
    runs = [subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                              str(sharded), "--shard", f"{k}/2", *common],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for k in (1, 2)]
    outputs = [run.communicate(timeout=900) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs):
        assert run.returncode == 0, stdout + stderr
        assert "torchgrade index" in stdout
    # the shards wrote their students and their own summaries, no class file
    assert not any((sharded / name).exists() for name in ("index.html", "grades.csv",
                                                         "canvas_grades.csv",
                                                         "moodle_grades.csv"))
    summaries = {p.name: json.loads(p.read_text()) for p in (sharded / ".shards").iterdir()}
    assert {k: v["students"] for k, v in summaries.items()} == {
        "1-of-2.json": ["ann", "bob"], "2-of-2.json": ["cat", "dan", "eve"]}
    assert not list(sharded.glob("**/.*.tmp"))

    indexed = torchgrade("index", sharded, timeout=300)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    assert "Indexed 5 results" in indexed.stdout

    whole = tmp_path / "whole"
    one = torchgrade("grade", subs, "--out", whole, *common)
    assert one.returncode == 0, one.stdout + one.stderr
    for name in ("grades.csv", "canvas_grades.csv", "moodle_grades.csv"):
        assert (sharded / name).read_text() == (whole / name).read_text(), name
    assert index_rows(sharded) == index_rows(whole)
    for student in CLASS:  # the very same verdicts, and the same fingerprints
        a, b = read_json(sharded / student / "results.json"), read_json(whole / student /
                                                                        "results.json")
        assert [(c.id, c.status, c.points) for c in a.checks] == \
            [(c.id, c.status, c.points) for c in b.checks]
        assert a.fingerprint == b.fingerprint
    # a whole run into the sharded OUT finds everything up to date, and takes over its files
    again = torchgrade("grade", subs, "--out", sharded, *common)
    assert again.returncode == 0 and "5 up to date" in again.stdout, again.stdout + again.stderr
    assert not (sharded / ".shards").exists() and not (sharded / OutLock.NAME).exists()


@pytest.mark.fast
def test_index_refuses_what_it_cannot_index(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli_main(["index", str(empty)]) == 2
    assert "not a folder written by `torchgrade grade`" in capsys.readouterr().err
    (empty / ".torchgrade-output").write_text("x")
    assert cli_main(["index", str(empty)]) == 2
    assert "no results.json" in capsys.readouterr().err


@pytest.mark.fast
def test_index_takes_the_assignment_the_shards_recorded(tmp_path, capsys):
    from datetime import datetime, timezone

    from grader.grading.summary import SHARDS, ShardSummary
    from grader.models import CheckResult, ExerciseResult, SubmissionResult
    from grader.outputs.writing import write_json

    (tmp_path / "students.csv").write_text("student_id,last_name,first_name,email\n"
                                           "ann,Lovelace,Ada,ada@example.edu\n")
    (tmp_path / "hw1.toml").write_text(f'name = "hw1"\nexercises = ["{EXERCISE}"]\n'
                                       'roster = "students.csv"\n')
    out = tmp_path / "out"
    (out / SHARDS).mkdir(parents=True)
    (out / ".torchgrade-output").write_text("x")
    for student, points in (("ann", 2.0), ("bob", 0.0)):
        check = CheckResult(id=f"{EXERCISE}.c", exercise=EXERCISE, targets=["c_strides"],
                            visibility="visible", points=points, max_points=2.0,
                            status="passed" if points else "failed")
        write_json(SubmissionResult(student=student, grader_version="0.1.0", score=points,
                                    max_score=2.0, assignment="hw1", checks=[check],
                                    exercises=[ExerciseResult(exercise=EXERCISE, score=points,
                                                              max_score=2.0)]),
                   out / student / "results.json")
    (out / "carl").mkdir()
    (out / "carl" / "results.json").write_text("{ half written")  # skipped, with a warning
    (out / SHARDS / "1-of-2.json").write_text(ShardSummary(
        shard="1/2", students=["ann"], graded=1, up_to_date=0, failures=0, seconds=1.0,
        exercises=[EXERCISE], assignment_name="hw1",
        assignment_file=str(tmp_path / "hw1.toml"),
        finished_at=datetime.now(timezone.utc)).model_dump_json())
    assert cli_main(["index", str(out)]) == 0
    assert "Indexed 2 results: 1 with full marks" in capsys.readouterr().out
    grades = (out / "grades.csv").read_text().splitlines()
    assert grades[0].startswith(f"student,{EXERCISE},assignment,")
    assert grades[1].startswith("ann,2,hw1,") and "Lovelace,Ada,ada@example.edu" in grades[1]
    assert grades[2].startswith("bob,0,hw1,") and len(grades) == 3
    assert "torchgrade results: hw1" in (out / "index.html").read_text()
    assert not (out / OutLock.NAME).exists()
