"""Intake without grading (grader/intake): a class folder's students, the folders a run may use,
fingerprints, assignment files and timestamps. Loading one submission (folders, zips,
notebooks) is tests/test_submission.py. The fast tier."""

from __future__ import annotations

import logging
import zipfile
from datetime import datetime, timedelta, timezone

import pytest

from grader.errors import UsageError
from grader.intake.assignment import (
    AssignmentError,
    load_assignment,
    parse_timestamp,
    read_roster,
    read_timestamp,
)
from grader.intake.fingerprint import fingerprint, grading_digest, submission_digest
from grader.intake.students import check_folders, find_students, is_output_folder
from grader.intake.submission import OUT_MARKER, exercises_in, load_quietly, not_submitted

pytestmark = pytest.mark.fast

EX = "strides_broadcasting"


def folder(path, files: dict[str, str | bytes]):
    for rel, content in files.items():
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    path.mkdir(parents=True, exist_ok=True)
    return path


def zipped(path, files: dict[str, str]):
    with zipfile.ZipFile(path, "w") as z:
        for rel, content in files.items():
            z.writestr(rel, content)
    return path


# --------------------------------------------------------------------------- students


def test_students_are_the_folders_and_zips_of_a_class(tmp_path, caplog):
    subs = tmp_path / "subs"
    folder(subs / "bob", {f"{EX}.py": "x = 1\n"})
    zipped(subs / "ann.zip", {f"{EX}.py": "x = 1\n"})
    folder(subs / ".hidden", {})
    folder(subs / ".torchgrade-output", {})  # a folder, not the outputs' marker file
    folder(subs / "__MACOSX", {})
    folder(subs / "__pycache__", {})
    (subs / "notes.txt").write_text("not a student")
    (subs / "link").symlink_to(subs / "bob")
    with caplog.at_level(logging.WARNING, logger="torchgrade"):
        students = find_students(subs)
    assert students == [("ann", subs / "ann.zip"), ("bob", subs / "bob")]
    assert "link is not graded: it is a symbolic link" in caplog.text
    assert "%2Ehidden is not graded" in caplog.text
    assert "%2Etorchgrade-output is not graded" in caplog.text


def test_two_submissions_of_one_name_get_distinct_ids_and_a_warning(tmp_path, caplog):
    subs = tmp_path / "subs"
    folder(subs / "alice", {})
    zipped(subs / "alice.zip", {"a.py": ""})
    zipped(subs / "bob.zip", {"a.py": ""})
    with caplog.at_level(logging.WARNING, logger="torchgrade"):
        ids = dict(find_students(subs))
    assert ids == {"alice": subs / "alice", "alice.zip": subs / "alice.zip",
                   "bob": subs / "bob.zip"}
    # (graded apart in silence, the folder could be a draft and the zip the real hand-in)
    assert "alice and alice.zip both name the student alice" in caplog.text
    assert "bob" not in caplog.text


@pytest.mark.parametrize("make, words", [
    (lambda p: p, "no such folder"),
    (lambda p: (p.write_text("x"), p)[1], "is not a folder"),
    (lambda p: (p.mkdir(), (p / "a.txt").write_text("x"), p)[2], "holds no student folders"),
])
def test_a_class_folder_that_is_not_one_is_a_usage_error(tmp_path, make, words):
    with pytest.raises(UsageError, match=words):
        find_students(make(tmp_path / "subs"))


@pytest.mark.parametrize("where, words", [
    ("subs", "is the submissions folder"),
    ("subs/out", "is inside the submissions folder"),
    (".", "holds the submissions folder"),
])
def test_out_must_lie_apart_from_the_submissions(tmp_path, where, words):
    subs = folder(tmp_path / "subs", {"ann/x.py": ""})
    with pytest.raises(UsageError, match=words):
        check_folders(subs, tmp_path / where)
    check_folders(subs, tmp_path / "out")  # beside it: fine


def test_out_through_a_symbolic_link_is_seen_through(tmp_path):
    subs = folder(tmp_path / "subs", {"ann/x.py": ""})
    (tmp_path / "link").symlink_to(subs)
    with pytest.raises(UsageError, match="is inside the submissions folder"):
        check_folders(subs, tmp_path / "link" / "out")


def test_an_output_folder_is_never_taken_for_submissions(tmp_path):
    out = folder(tmp_path / "out", {"ann/report.html": ""})
    assert not is_output_folder(out)
    (out / OUT_MARKER).write_text("")
    assert is_output_folder(out)
    with pytest.raises(UsageError, match="is a torchgrade output folder"):
        check_folders(out, tmp_path / "elsewhere")
    old = folder(tmp_path / "old", {"index.html": "", "grades.csv": ""})  # before the marker
    assert is_output_folder(old)
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        check_folders(out, tmp_path / "file")


# --------------------------------------------------------------------------- by names only


def test_exercises_in_looks_at_names_only(tmp_path):
    sub = folder(tmp_path / "ann", {f"hw/{EX}.py": "syntax error (", "other.py": ""})
    assert exercises_in(sub, [EX, "manual_backward"]) == {EX}
    assert exercises_in(zipped(tmp_path / "bob.zip", {"manual_backward.ipynb": "{}"}),
                        [EX, "manual_backward"]) == {"manual_backward"}
    assert exercises_in(tmp_path / "nobody", [EX]) == set()


def test_an_unreadable_submission_is_a_note_not_a_crash(tmp_path, monkeypatch):
    import grader.intake.submission as submission

    monkeypatch.setattr(submission, "scan", lambda *a: 1 / 0)
    sub = load_quietly(tmp_path, "ann", [EX])
    assert sub.student == "ann" and sub.modules == {}
    assert sub.notes == ["the submission could not be read: ZeroDivisionError: division by zero"]


def test_not_submitted_names_what_was_looked_for():
    assert not_submitted(EX) == f"file not submitted: expected {EX}.py or {EX}.ipynb"
    assert "bughunt/regression.py" in not_submitted("bughunt_regression")


# --------------------------------------------------------------------------- fingerprints


def test_submission_digest_follows_paths_and_bytes(tmp_path):
    sub = folder(tmp_path / "ann", {f"{EX}.py": "x = 1\n", "data/notes.md": "hi"})
    first = submission_digest(sub)
    assert submission_digest(sub) == first and len(first) == 64
    folder(sub, {"__pycache__/x.pyc": b"\0", ".ipynb_checkpoints/a.ipynb": "{}"})
    assert submission_digest(sub) == first  # what the loader never reads changes nothing
    (sub / f"{EX}.py").write_text("x = 2\n")
    changed = submission_digest(sub)
    assert changed != first
    (sub / "data" / "notes.md").rename(sub / "data" / "notes2.md")
    assert submission_digest(sub) != changed  # a name is part of it


def test_submission_digest_of_a_zip_and_of_a_single_file(tmp_path):
    a = zipped(tmp_path / "a.zip", {f"{EX}.py": "x = 1\n"})
    b = zipped(tmp_path / "b.zip", {f"{EX}.py": "x = 2\n"})
    assert submission_digest(a) != submission_digest(b)
    single = tmp_path / f"{EX}.py"
    single.write_text("x = 1\n")
    assert submission_digest(single) == submission_digest(single)
    assert submission_digest(tmp_path / "missing") != submission_digest(single)


def test_the_fingerprint_covers_the_submission_and_the_grading():
    grading = grading_digest(exercises=[EX], scoring="{}", limits="default")
    assert grading == grading_digest(exercises=[EX], scoring="{}", limits="default")
    others = {grading_digest(exercises=[EX, "manual_backward"], scoring="{}", limits="default"),
              grading_digest(exercises=[EX], scoring='{"due": 1}', limits="default"),
              grading_digest(exercises=[EX], scoring="{}", limits="tight")}
    assert grading not in others and len(others) == 3
    print_ = fingerprint("abc", grading)
    assert print_.startswith("sha256:") and print_ != fingerprint("abd", grading)
    assert fingerprint("abc", grading) == print_


# --------------------------------------------------------------------------- assignments


def test_an_assignment_file_is_read_and_completed(tmp_path):
    (tmp_path / "students.csv").write_text("student_id,last_name,first_name,email\n"
                                           "ann,Lee,Ann,ann@example.org\n")
    path = tmp_path / "hw1.toml"
    path.write_text(f'due = 2026-03-01\nroster = "students.csv"\n'
                    f'exercises = ["{EX}", {{ name = "manual_backward", points = 20 }}]\n'
                    "[late_policy]\npenalty_per_day = 0.1\n")
    a = load_assignment(path)
    assert a.name == "hw1" and a.exercise_names == [EX, "manual_backward"]
    assert a.points_of("manual_backward") == 20 and a.points_of(EX) is None
    assert (a.due.hour, a.due.minute) == (23, 59)  # a date means the end of that day
    assert a.roster == (tmp_path / "students.csv").resolve()
    assert read_roster(a.roster)["ann"].email == "ann@example.org"
    assert a.late_policy.max_penalty == 1.0


@pytest.mark.parametrize("text, words", [
    ("exercises = [", "not valid TOML"),
    ("name = 'x'", "exercises: required field is missing"),
    (f'exercises = ["{EX}", "{EX}"]', "is listed twice"),
    (f'exercises = ["{EX}"]\ncolour = "red"', "colour: unknown field"),
    (f'exercises = ["{EX}"]\n[late_policy]\npenalty_per_day = 2', "late_policy.penalty_per_day"),
])
def test_a_bad_assignment_file_is_one_line_saying_what(tmp_path, text, words):
    path = tmp_path / "hw.toml"
    path.write_text(text)
    with pytest.raises(AssignmentError, match=words) as info:
        load_assignment(path)
    assert "\n" not in str(info.value)
    with pytest.raises(AssignmentError, match="no such file"):
        load_assignment(tmp_path / "missing.toml")


def test_a_roster_needs_its_header(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("ann,Lee\nbob,Kim\n")
    with pytest.raises(AssignmentError, match="needs a header"):
        read_roster(path)
    path.write_text("id,email\nbob,b@x\n,\n")
    assert list(read_roster(path)) == ["bob"]


@pytest.mark.parametrize("text, expected", [
    ("2026-03-01 12:00:00 UTC", datetime(2026, 3, 1, 12, tzinfo=timezone.utc)),
    ("2026-03-01T12:00:00Z", datetime(2026, 3, 1, 12, tzinfo=timezone.utc)),
    ("2026-03-01T12:00:00", datetime(2026, 3, 1, 12, tzinfo=timezone.utc)),
    ("2026-03-01T13:00:00+01:00", datetime(2026, 3, 1, 12, tzinfo=timezone.utc)),
    ("yesterday", None),
])
def test_timestamps_are_read_as_nbgrader_writes_them(text, expected):
    moment = parse_timestamp(text)
    assert moment == expected
    if moment is not None:
        assert moment.utcoffset() is not None


def test_the_submission_time_is_found_in_nbgraders_layout_and_an_unreadable_one_is_said(
        tmp_path):
    """nbgrader's exchange keeps `<student>/<assignment>/timestamp.txt`: a late submission
    there was graded on time in silence, as was a top-level file that reads as no time."""
    from grader.intake.assignment import submission_time

    nested = folder(tmp_path / "ann", {"hw1/timestamp.txt": "2026-03-05 00:00:00 UTC\n",
                                       "hw1/strides_broadcasting.py": "x = 1\n"})
    assert submission_time(nested) == (datetime(2026, 3, 5, tzinfo=timezone.utc), None)
    top = folder(tmp_path / "bob", {"timestamp.txt": "2026-03-04T00:00:00Z",
                                    "hw1/timestamp.txt": "2026-03-09T00:00:00Z"})
    assert submission_time(top)[0] == datetime(2026, 3, 4, tzinfo=timezone.utc)  # its own
    garbage = folder(tmp_path / "cy", {"timestamp.txt": "garbage"})
    moment, note = submission_time(garbage)
    assert moment is None and note is not None and "timestamp.txt does not read as a time" in note
    assert "not counted late" in note
    assert submission_time(folder(tmp_path / "dee", {"x.py": ""})) == (None, None)


def test_a_timestamp_file_is_read_if_it_is_one(tmp_path):
    sub = folder(tmp_path / "ann", {"timestamp.txt": "2026-03-01 12:00:00 UTC\n"})
    assert read_timestamp(sub) == datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    assert read_timestamp(tmp_path / "nobody") is None
    (sub / "timestamp.txt").write_bytes(b"\xff\xfe")
    assert read_timestamp(sub) is None
    late = parse_timestamp("2026-03-02T12:00:00Z") - read_timestamp(folder(tmp_path / "bob", {
        "timestamp.txt": "2026-03-01T12:00:00Z"}))
    assert late == timedelta(days=1)


def test_the_demo_class_is_the_same_files_at_every_run(tmp_path, monkeypatch):
    """Issue 41: the zipped student's zip (dated when it was made) and the notebook student's
    notebooks (random cell ids) differed at every run, so every `demo` graded them again."""
    import time

    from grader.commands.demo import build_demo_class

    build_demo_class(tmp_path / "one")
    later = time.time() + 86400
    monkeypatch.setattr(time, "time", lambda: later)  # the next run, a day later
    build_demo_class(tmp_path / "two")
    students = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert {"gus_zipped", "eve_notebook"} <= set(students)
    for student in students:
        assert (submission_digest(tmp_path / "one" / student)
                == submission_digest(tmp_path / "two" / student)), student
