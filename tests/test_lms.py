"""From the LMS and back (issue 17): Canvas, Moodle and Blackboard downloads (folders and zips,
re-uploads, late markers, decorated names, a roster) graded with `torchgrade grade DOWNLOAD
--out OUT`, every roster student in every output, extensions and overrides, and the Canvas and
Moodle gradebook CSVs checked against their importers' documented rules.

The fake downloads are made the way each LMS names files (see `grader/intake/lms.py`). The
end-to-end tests grade only `strides_broadcasting`, a few students each, to stay fast.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import EXERCISES, SOLUTIONS
from grader.intake.assignment import Assignment, load_assignment, read_overrides, read_roster
from grader.intake.lms import (CANVAS, Entry, detect, detect_names, list_download, parse,
                               stage)
from grader.intake.submission import NOTHING_HANDED_IN, OUT_MARKER, load_submission, match_exercise
from grader.models import CheckResult, ExerciseResult, SubmissionResult
from grader.outputs.exports import canvas_csv, moodle_csv
from grader.outputs.summary import exercise_state
from grader.outputs.writing import read_json
from grader.scoring.assignment import apply_assignment

EXERCISE = "strides_broadcasting"
SOLUTION = (SOLUTIONS / f"{EXERCISE}.py").read_text()
STUB = (EXERCISES / f"{EXERCISE}.py").read_text()
WANTED = ["strides_broadcasting", "manual_backward", "parameters", "training_loops",
          "bughunt_regression"]


def torchgrade(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def zipped(folder: Path, zip_path: Path, root: str = "") -> Path:
    """`folder` as an LMS zips it (optionally under one root folder)."""
    with zipfile.ZipFile(zip_path, "w") as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, f"{root}{path.relative_to(folder).as_posix()}")
    return zip_path


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every name under `folder` with its size and mtime: a download must stay untouched."""
    return {p.relative_to(folder).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def entries(names: dict[str, str]) -> list[Entry]:
    return [Entry(n, len(t), lambda limit, t=t: t.encode()[:limit + 1]) for n, t in names.items()]


# --------------------------------------------------------------------------- the LMSs' names

CANVAS_FILES = {
    "lovelaceada_12345_67890_strides_broadcasting.py": SOLUTION,
    # handed in late, then uploaded again: Canvas appends -1 to the later file's name
    "turingalan_LATE_23456_78901_strides_broadcasting.py": STUB,
    "turingalan_LATE_23456_78999_strides_broadcasting-1.py": SOLUTION,
    # a browser's duplicate-download name, and a file that is no exercise
    "hoppergrace_34567_11111_strides_broadcasting (1).py": SOLUTION,
    "hoppergrace_34567_11112_notes.pdf": "%PDF",
}


def test_canvas_names_ids_late_markers_and_the_latest_re_upload():
    students = {s.lms_id: s for s in parse(entries(CANVAS_FILES), "canvas")}
    assert sorted(students) == ["12345", "23456", "34567"]
    assert students["23456"].late_marker and not students["12345"].late_marker
    # only the highest -N is kept, under the name the student gave it
    assert list(students["23456"].files) == ["strides_broadcasting.py"]
    kept = students["23456"].files["strides_broadcasting.py"]
    assert kept.read(1 << 20).decode() == SOLUTION
    assert any("latest upload" in n for n in students["23456"].notes)
    assert list(students["34567"].files) == ["strides_broadcasting (1).py"]
    assert students["34567"].others == ["notes.pdf"]
    assert students["12345"].name == "lovelaceada"


def test_canvas_anonymous_and_lower_case_late():
    found = parse(entries({"anon_Xy12Z_late_4444_strides_broadcasting.py": SOLUTION,
                           "anon_Q9_5555_strides_broadcasting.py": SOLUTION}), "canvas")
    assert [(s.lms_id, s.late_marker) for s in found] == [("anon_Q9", False),
                                                          ("anon_Xy12Z", True)]
    assert CANVAS.match("smithjo_LATE_1_2_a_b_c.py")["file"] == "a_b_c.py"


def test_moodle_folders_flat_files_online_text_and_groups():
    found = {s.lms_id: s for s in parse(entries({
        "Ada Lovelace_101_assignsubmission_file_/strides_broadcasting.py": SOLUTION,
        "Ada Lovelace_101_assignsubmission_onlinetext_/onlinetext.html": "<p>hi</p>",
        "Alan Turing_102_assignsubmission_file_strides_broadcasting.py": STUB,
        "Team A-Grace Hopper_103_assignsubmission_file_/hw/strides_broadcasting (2).py": SOLUTION,
        "Participant_104_assignsubmission_file/strides_broadcasting.py": SOLUTION,
    }), "moodle")}
    assert sorted(found) == ["101", "102", "103", "104"]  # the online text is no student
    assert list(found["101"].files) == ["strides_broadcasting.py"]
    assert "onlinetext" in found["101"].others[0]
    assert list(found["102"].files) == ["strides_broadcasting.py"]  # the flat form
    assert list(found["103"].files) == ["hw/strides_broadcasting (2).py"]
    assert any("group Team A" in n for n in found["103"].notes)
    assert found["101"].name == "Ada Lovelace"


@pytest.mark.parametrize("forged", [
    "Eve_111_assignsubmission_file__222_assignsubmission_file_/strides_broadcasting.py",
    "Eve 111_assignsubmission_file_x_222_assignsubmission_file_/strides_broadcasting.py",
])
def test_a_moodle_name_made_to_hold_a_classmates_id_takes_nothing_of_theirs(forged, caplog):
    """Moodle writes names with every "_" made a space: a folder whose name holds
    "_111_assignsubmission_file_" before its own id is no Moodle folder. Read lazily, it filed
    Eve's stub under Ada's id 111, over Ada's solution, without a word; now it is not graded,
    and said so. The name Moodle really writes for Eve is graded as hers."""
    real = "Eve 111 assignsubmission file _222_assignsubmission_file_strides_broadcasting.py"
    found = {s.lms_id: s for s in parse(entries({
        "Ada Lovelace_111_assignsubmission_file_/strides_broadcasting.py": SOLUTION,
        forged: STUB, real: STUB}), "moodle")}
    assert sorted(found) == ["111", "222"] and found["111"].name == "Ada Lovelace"
    [file] = found["111"].files.values()
    assert file.read(1 << 20).decode() == SOLUTION
    assert list(found["222"].files) == ["strides_broadcasting.py"]
    assert "not graded" in caplog.text and forged in caplog.text


def test_blackboard_latest_attempt_wins_with_its_time():
    receipt = "Name: Jo Smith (j_smith)\nAssignment: HW 1\nDate Submitted: ...\n"
    found = {s.lms_id: s for s in parse(entries({
        "HW 1_j_smith_attempt_2026-03-01-10-00-00_strides_broadcasting.py": STUB,
        "HW 1_j_smith_attempt_2026-03-01-10-00-00.txt": receipt,
        "HW 1_j_smith_attempt_2026-03-02-09-30-00_strides_broadcasting.py": SOLUTION,
        "HW 1_j_smith_attempt_2026-03-02-09-30-00.txt": receipt,
        "HW 1_adoe_attempt_2026-02-28-08-00-00_strides_broadcasting.py": SOLUTION,
        "HW 1_adoe_attempt_2026-02-28-08-00-00.txt": "Name: A Doe (adoe)\n",
    }), "blackboard")}
    # "HW 1_" is the assignment shared by every name; a username may hold "_"
    assert sorted(found) == ["adoe", "j_smith"]
    smith = found["j_smith"]
    assert smith.files["strides_broadcasting.py"].read(1 << 20).decode() == SOLUTION
    assert smith.submitted_at == datetime(2026, 3, 2, 9, 30).astimezone()
    assert any("2 attempts" in n for n in smith.notes)


@pytest.mark.parametrize("layout, names", [
    ("canvas", list(CANVAS_FILES)),
    ("moodle", ["Ada Lovelace_101_assignsubmission_file_/x.py", "B C_7_assignsubmission_file_"]),
    ("blackboard", ["HW_ann_attempt_2026-03-01-10-00-00_x.py"]),
    ("folders", ["ann/strides_broadcasting.py", "bob/x.py", "cat.zip"]),
])
def test_layouts_are_detected_from_names(layout, names):
    assert detect_names(names) == layout


def test_detection_of_folders_zips_and_a_download_one_level_down(tmp_path):
    canvas = write(tmp_path / "dl" / "submissions", CANVAS_FILES)
    assert detect(canvas) == "canvas"
    assert detect(tmp_path / "dl") == "canvas"  # the same folder one level down
    z = zipped(canvas, tmp_path / "submissions.zip", root="submissions/")
    assert detect(z) == "canvas"
    assert {e.name for e in list_download(z)} == set(CANVAS_FILES)  # its root folder stripped
    plain = write(tmp_path / "plain", {"ann/strides_broadcasting.py": SOLUTION,
                                       "bob/strides_broadcasting.py": STUB})
    assert detect(plain) == "folders"


def test_staging_never_writes_into_the_download_and_bounds_every_file(tmp_path):
    download = write(tmp_path / "dl", CANVAS_FILES)
    huge = download / "bigbig_999_1_strides_broadcasting.py"
    huge.write_bytes(b"#" * (3 << 20))  # over the 2 MB a source may have
    os.mkfifo(download / "pipepipe_998_2_strides_broadcasting.py")  # must not block staging
    before = tree(download)
    staged = dict(stage(parse(list_download(download), "canvas"), tmp_path / "out" / ".lms"))
    assert tree(download) == before
    assert (staged["999"] / "strides_broadcasting.py").stat().st_size == (2 << 20) + 1
    sidecar = json.loads((staged["998"] / ".torchgrade-lms.json").read_text())
    assert any("could not be read" in n and "regular file" in n for n in sidecar["notes"])
    assert not (staged["998"] / "strides_broadcasting.py").exists()
    # the loader turns the truncated copy into its usual message
    sub = load_submission(staged["999"], exercises=[EXERCISE], student="999")
    assert "larger than 2 MB" in sub.modules[EXERCISE].fatal


# --------------------------------------------------------------------------- decorated names

@pytest.mark.parametrize("name, exercise", [
    ("strides_broadcasting (1).py", "strides_broadcasting"),
    ("Strides_Broadcasting-2.py", "strides_broadcasting"),
    ("lovelaceada_12345_67890_strides_broadcasting.py", "strides_broadcasting"),
    ("strides broadcasting.ipynb", "strides_broadcasting"),
    ("Copy of manual_backward_v2.py", "manual_backward"),
    ("hw1/bughunt/regression (3).py", "bughunt_regression"),
    ("notparameters.py", None),
    ("helpers.py", None),
])
def test_decorated_names_are_their_exercise_with_a_note(name, exercise):
    found, note = match_exercise(name, WANTED)
    assert found == exercise
    assert (note is not None) == (exercise is not None) and (not note or name in note)


def test_an_exact_name_wins_and_a_missing_file_lists_what_was_found(tmp_path):
    folder = write(tmp_path / "ann", {"strides_broadcasting (1).py": STUB,
                                      "strides_broadcasting.py": SOLUTION, "notes.txt": ""})
    sub = load_submission(folder, exercises=[EXERCISE, "parameters"], student="ann")
    assert sub.modules[EXERCISE].path == "strides_broadcasting.py"
    listing = [n for n in sub.notes if n.startswith("no file for parameters")]
    assert listing and "parameters.py" in listing[0] and "notes.txt" in listing[0]
    assert "strides_broadcasting (1).py" in listing[0]


# --------------------------------------------------------------------------- roster, overrides

def test_roster_maps_lms_ids_and_overrides_are_read(tmp_path):
    (tmp_path / "roster.csv").write_text("student_id,last_name,first_name,email,lms_id\n"
                                         "s1,Lovelace,Ada,ada@x.org,12345\ns2,Plain,Pat,,\n")
    roster = read_roster(tmp_path / "roster.csv")
    assert sorted(roster) == ["12345", "s2"] and roster["12345"].student_id == "s1"
    (tmp_path / "o.csv").write_text("student,target,points,reason\n"
                                    "s1,strides_broadcasting,+1.5,regraded by hand\n"
                                    "12345,test_x,0,copied\n")
    rows = read_overrides(tmp_path / "o.csv")
    assert [(r.student, r.target, r.points, r.relative) for r in rows] == [
        ("s1", "strides_broadcasting", 1.5, True), ("12345", "test_x", 0, False)]


@pytest.mark.fast
def test_class_folders_named_by_a_roster_rows_other_id_are_that_students(tmp_path, monkeypatch,
                                                                           caplog):
    """A roster with an lms_id keys the outputs by it; a class folder named by the row's
    student_id (or email, in any case) is still that student's submission: graded under the
    row's id, with the extension given by student_id, and no empty "nothing handed in" row
    beside it. A row's own id is that row's, never another's alias; a second folder of a
    student who has one under their own id is graded apart, and said; the results of a folder
    graded before the roster named it are set aside, not listed beside the new ones."""
    import grader.running.pool
    from grader.commands.grade import grade
    from grader.grading.out import RENAMED
    from grader.grading.steps import load_task

    subs = tmp_path / "class"

    def hand_in(folder: str, text: str = (SOLUTIONS / f"{EXERCISE}.py").read_text()) -> None:
        (subs / folder).mkdir(parents=True)
        (subs / folder / f"{EXERCISE}.py").write_text(text)

    for folder in ("s1", "ada@x.org", "zed", "S4@X.org", "1005", "s5", "9001"):
        hand_in(folder)  # (ada is s1 too: the first folder keeps it)
    hand_in("s2", "x = 1\n")
    (tmp_path / "roster.csv").write_text(
        "student_id,last_name,first_name,email,lms_id\n"
        "s1,Lovelace,Ada,ada@x.org,1001\ns2,Turing,Alan,,1002\ns3,Hopper,Grace,,1003\n"
        "s4,Noether,Emmy,s4@x.org,1004\n"
        "s5,Gauss,Carl,,1005\n"           # has a folder of its own id, and one named s5
        "1005,Euler,Leo,,1006\n")         # its student_id is another row's own id
    (tmp_path / "hw.toml").write_text('exercises = ["strides_broadcasting"]\n'
                                      'roster = "roster.csv"\n'
                                      'due = 2026-03-01T23:59:00+00:00\n'
                                      '[extensions]\ns2 = 2026-03-09\n')
    out = tmp_path / "out"
    (out / "s1").mkdir(parents=True)  # graded before the roster had the lms_id
    (out / OUT_MARKER).write_text("")  # (a folder torchgrade wrote)
    (out / "s1" / "results.json").write_text(_result([5], student="s1").model_dump_json())
    tasks = []

    def fake_pool(pending, *, settings, steps, jobs, on_result, on_isolation):
        tasks.extend(pending)
        assert set(settings.assignment.extensions) == {"1002"}
        loaded = load_task(next(t for t in pending if t.student == "1001"), settings)
        assert not any("the name it was found under" in n for n in loaded.notes), loaded.notes

    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool)
    grade(subs, out=out, assignment=tmp_path / "hw.toml")
    by_id = {t.student: t for t in tasks}
    assert sorted(by_id) == ["1001", "1002", "1003", "1004", "1005", "1006", "9001",
                             "ada@x.org", "s5", "zed"]
    assert by_id["1001"].path == subs / "s1" and by_id["1002"].path == subs / "s2"
    assert by_id["1004"].path == subs / "S4@X.org" and by_id["1005"].path == subs / "1005"
    assert any("handed in as s1" in n for n in by_id["1001"].notes)
    assert [t.student for t in tasks if any("nothing handed in" in n for n in t.notes)] == \
        ["1003", "1006"]
    assert all(any("not in the roster" in n for n in by_id[s].notes)
               for s in ("zed", "ada@x.org", "s5", "9001"))
    assert "s5 (the row of 1005)" in caplog.text
    assert not (out / "s1").exists() and (out / RENAMED / "s1" / "results.json").is_file()
    assert "s1 -> 1001" in caplog.text and "earlier result(s)" not in caplog.text


@pytest.mark.fast
def test_a_roster_student_missing_from_a_later_download_keeps_their_grade(tmp_path, monkeypatch,
                                                                          caplog):
    """An export of new submissions only: a roster student whose submission an earlier run
    graded keeps that grade (and the run says so), where they were regraded as "nothing handed
    in" (0, and the real grade pushed out of OUT by the next regrade). One who had handed in
    nothing before is graded as such again."""
    import grader.running.pool
    from grader.commands.grade import grade
    from grader.intake.submission import NOTHING_HANDED_IN

    subs = tmp_path / "later"
    (subs / "1002").mkdir(parents=True)
    (subs / "1002" / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py").read_text())
    (tmp_path / "roster.csv").write_text("student_id,last_name,first_name,email,lms_id\n"
                                         "u1,Lovelace,Ada,,1001\nu2,Baker,Bo,,1002\n"
                                         "u3,Hopper,Grace,,1003\n")
    (tmp_path / "hw.toml").write_text('exercises = ["strides_broadcasting"]\n'
                                      'roster = "roster.csv"\n')
    out = tmp_path / "out"
    for sid, notes in (("1001", []), ("1003", [NOTHING_HANDED_IN])):
        (out / sid).mkdir(parents=True)
        (out / OUT_MARKER).write_text("")  # (a folder torchgrade wrote)
        earlier = _result([5], student=sid).model_copy(update={"notes": notes})
        (out / sid / "results.json").write_text(earlier.model_dump_json())
    tasks = []

    def fake_pool(pending, *, settings, steps, jobs, on_result, on_isolation):
        tasks.extend(pending)

    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool)
    summary = grade(subs, out=out, assignment=tmp_path / "hw.toml")
    assert sorted(t.student for t in tasks) == ["1002", "1003"]
    assert "have no submission in this run: 1001" in caplog.text
    assert "1001" in {r.student for r in summary.earlier}  # in the class files, as before


@pytest.mark.fast
def test_index_after_a_whole_run_keeps_its_roster(tmp_path, monkeypatch):
    """`torchgrade index OUT` (after a Ctrl-C, say) rebuilds the gradebooks with the assignment
    the last whole run graded with: the roster's names and ids, not the bare results'."""
    import grader.running.pool
    from grader.commands.grade import grade
    from grader.commands.index import index

    (tmp_path / "class" / "s1").mkdir(parents=True)
    (tmp_path / "class" / "s1" / f"{EXERCISE}.py").write_text("x = 1\n")
    (tmp_path / "roster.csv").write_text("student_id,last_name,first_name,email,lms_id\n"
                                         "s1,Lovelace,Ada,ada@x.org,1001\n")
    (tmp_path / "hw.toml").write_text('exercises = ["strides_broadcasting"]\n'
                                      'roster = "roster.csv"\n')

    def fake_pool(pending, *, settings, steps, jobs, on_result, on_isolation):
        for task in pending:
            result = _result([5], student=task.student)
            (settings.out / task.student).mkdir()
            (settings.out / task.student / "results.json").write_text(result.model_dump_json())
            on_result(result)

    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool)
    out = tmp_path / "out"
    grade(tmp_path / "class", out=out, assignment=tmp_path / "hw.toml")
    graded = (out / "canvas_grades.csv").read_text()
    (out / "canvas_grades.csv").unlink()
    index(out)
    assert (out / "canvas_grades.csv").read_text() == graded and "Lovelace, Ada" in graded


def _result(points: list[float], student="12345") -> SubmissionResult:
    checks = [CheckResult(id=f"c{i}", exercise="ex", targets=["f"], visibility="visible",
                          points=p, max_points=5, status="passed" if p == 5 else "failed")
              for i, p in enumerate(points)]
    return SubmissionResult(student=student, grader_version="t", checks=checks, exercises=[
        ExerciseResult(exercise="ex", path="ex.py", score=sum(points), max_score=5 * len(points))])


def test_overrides_and_extensions_are_applied_and_recorded():
    plan = Assignment.model_validate({
        "name": "hw", "exercises": ["ex"], "due": datetime(2026, 3, 1, tzinfo=timezone.utc),
        "late_policy": {"penalty_per_day": 0.1},
        "extensions": {"s1": datetime(2026, 3, 5, tzinfo=timezone.utc)},
        "override_rows": [{"student": "s1", "target": "c1", "points": 4, "reason": "by hand"},
                          {"student": "s1", "target": "ex", "points": -1, "relative": True,
                           "reason": "late slides"},
                          {"student": "s1", "target": "nope", "points": 1}]})
    plan = plan.with_aliases({"s1": "12345"})  # the roster's id -> the LMS id of OUT/
    result = _result([5, 0]).model_copy(update={
        "submitted_at": datetime(2026, 3, 3, tzinfo=timezone.utc)})
    done = apply_assignment(result, plan)
    assert [(a.target, a.before, a.after) for a in done.adjustments] == [("c1", 0, 4),
                                                                         ("ex", 9, 8)]
    assert done.score == 8 and done.exercises[0].score == 8
    assert any("nope" in n for n in done.notes)
    assert done.extended and done.days_late == 0 and done.late_penalty == 0  # extension
    other = apply_assignment(_result([5, 5], student="777").model_copy(update={
        "submitted_at": datetime(2026, 3, 3, tzinfo=timezone.utc)}), plan)
    assert other.days_late == 2 and other.late_penalty == 2 and not other.adjustments
    marked = apply_assignment(_result([5, 5], student="777"), plan, late_marker=True)
    assert marked.days_late == 1 and marked.late_penalty == 1  # LATE, no time: one day
    # a changed override changes the student's part of the fingerprint, no one else's
    changed = plan.model_copy(deep=True)
    changed.override_rows[0].points = 3
    assert changed.student_key("12345") != plan.student_key("12345")
    assert changed.student_key("777") == plan.student_key("777")
    assert changed.scoring_key() == plan.scoring_key()


def test_exercise_states_for_the_class_index():
    def part(path="ex.py", notes=()):
        return ExerciseResult(exercise="ex", path=path, score=0, max_score=5, notes=list(notes))

    def res(status, message="", reason=None):
        c = CheckResult(id="c", exercise="ex", targets=["f"], visibility="visible", points=0,
                        max_points=5, status=status, message=message, reason=reason)
        return SubmissionResult(student="s", grader_version="t", checks=[c])

    assert exercise_state(res("error", "file not submitted"), part(path=None)) == "not handed in"
    assert exercise_state(res("error"), part(notes=["SyntaxError in ex.py, line 3: x"])) \
        == "syntax error"
    assert exercise_state(res("error", reason="not_implemented"), part()) == "not started"
    assert exercise_state(res("timeout"), part()) == "timed out"  # not a crash: too slow
    assert exercise_state(res("crashed"), part()) == "crashed"
    assert exercise_state(res("error", "importing ex.py failed (ex.py, line 1): ImportError: "
                              "No module named 'sklearn'"), part()) == "does not import"
    assert exercise_state(res("error", "ex.py: ValueError: bad"), part()) == "crashed"
    assert exercise_state(res("failed"), part()) == "graded"


# --------------------------------------------------------------------------- LMS CSVs

def _graded(student, score, late=0.0, notes=()):
    r = _result([score], student=student)
    return r.model_copy(update={"late_penalty": late, "notes": list(notes)})


def test_canvas_csv_follows_the_gradebook_importer_rules():
    """Canvas's importer: the first row's first five columns are exactly `Student, ID, SIS User
    ID, SIS Login ID, Section` (its export's), then one column per assignment; a row whose
    Student is "Points Possible" may follow the header; a student is matched by ID (Canvas user
    id), else SIS User ID, else SIS Login ID; grades are plain numbers; CSV, UTF-8."""
    roster = {"12345": type("P", (), {"student_id": "s1", "email": "a@x.org",
                                      "last_name": "Lovelace", "first_name": "Ada"})()}
    text = canvas_csv([_graded("23456", 5, late=1), _graded("12345", 2)], assignment="hw1",
                      roster=roster)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "hw1"]
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == 5
    body = {r[1]: r for r in rows[2:]}
    assert body["12345"][:4] == ["Lovelace, Ada", "12345", "s1", "a@x.org"]
    assert float(body["23456"][5]) == 4  # after the late penalty
    assert all(r[1] and float(r[5]) >= 0 for r in rows[2:])
    text.encode("utf-8")


@pytest.mark.fast
def test_gradebook_cells_are_one_line_of_printable_text():
    """A student's file name reaches the remarks (a misnamed file): its terminal escapes and
    line breaks must not act in `cat grades.csv`, nor forge a row for line-based tools."""
    from grader.intake.submission import NOT_GRADED
    from grader.outputs.exports import grades_csv

    result = _result([5], student="zoe")
    result.notes.append(f"{NOT_GRADED}a\x1b[2K\rzed,0,x.py\nzed,35")
    text = grades_csv([result], ["ex"])
    assert "\x1b" not in text and "\r" not in text and text.count("\n") == 2, repr(text)
    assert "\\x1b[2K\\x0dzed" in text


@pytest.mark.fast
def test_the_remarks_say_which_of_several_files_was_graded(tmp_path):
    from grader.outputs.exports import remarks

    for folder, text in (("v1", "x = 1\n"), ("v2", "x = 2\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{EXERCISE}.py").write_text(text)
    module = load_submission(tmp_path, exercises=[EXERCISE]).modules[EXERCISE]
    result = SubmissionResult(student="rae", grader_version="0", exercises=[ExerciseResult(
        exercise=EXERCISE, score=0, max_score=1, notes=module.notes)])
    assert remarks(result) == (f"graded v1/{EXERCISE}.py; also found v2/{EXERCISE}.py "
                               "(ignored)")


@pytest.mark.fast
def test_a_timestamp_that_does_not_read_is_told_to_the_instructor(tmp_path, caplog):
    """Not counted late, in silence, it was: the remarks and the run's warnings say it."""
    from grader.grading.notices import warn_of_notes
    from grader.intake.assignment import submission_time
    from grader.outputs.exports import remarks

    (tmp_path / "timestamp.txt").write_text("yesterday")
    moment, note = submission_time(tmp_path)
    assert moment is None and note is not None
    result = SubmissionResult(student="sam", grader_version="0", notes=[note])
    assert remarks(result) == note
    warn_of_notes([result])
    assert "1 submission(s) have a timestamp.txt that does not read" in caplog.text
    assert caplog.text.rstrip().endswith(": sam.")


def test_moodle_csv_follows_the_grading_worksheet_rules():
    """Moodle's assignment grading worksheet import: an `Identifier` column of "Participant
    <id>" (the download's participant ids) and a numeric `Grade` column are required; `Feedback
    comments` is the feedback; the grade must lie within the maximum."""
    text = moodle_csv([_graded("101", 5), _graded("102", 0, notes=["nothing handed in"])])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {"Identifier", "Grade", "Feedback comments"} <= set(rows[0])
    assert [r["Identifier"] for r in rows] == ["Participant 101", "Participant 102"]
    assert all(0 <= float(r["Grade"]) <= float(r["Maximum Grade"]) for r in rows)
    assert "nothing handed in" in rows[1]["Feedback comments"]


# --------------------------------------------------------------------------- end to end

ASSIGNMENT = """
name = "hw1"
due = 2026-03-01T23:59:00+00:00
roster = "roster.csv"
overrides = "overrides.csv"
exercises = [{ name = "strides_broadcasting", points = 10 }]

[late_policy]
penalty_per_day = 0.1
max_penalty = 0.3

[extensions]
s2 = 2026-03-09
"""


@pytest.fixture(scope="module")
def canvas_zip_graded(tmp_path_factory):
    """A Canvas download as the zip Canvas gives, graded with a roster (one roster student
    handed nothing in; one submitter is not in it), an extension and an override."""
    root = tmp_path_factory.mktemp("canvas")
    download = write(root / "dl", CANVAS_FILES)
    z = zipped(download, root / "submissions.zip")
    (root / "roster.csv").write_text(
        "student_id,last_name,first_name,email,lms_id\n"
        "s1,Lovelace,Ada,ada@x.org,12345\ns2,Turing,Alan,alan@x.org,23456\n"
        "s4,Nobody,Ned,ned@x.org,99999\n")
    (root / "overrides.csv").write_text("student,target,points,reason\n"
                                        "s1,strides_broadcasting,-2,copied a docstring\n"
                                        "s9,strides_broadcasting,5,a typo in the student\n"
                                        "s1,strides_broadcastin,1,a typo in the target\n")
    (root / "hw1.toml").write_text(ASSIGNMENT + 's8 = 2026-03-10\n')
    out = root / "out"
    run = torchgrade("grade", z, "--out", out, "--assignment", root / "hw1.toml", "-j", "2")
    return root, z, out, run


def test_canvas_zip_every_student_under_their_lms_id(canvas_zip_graded):
    root, z, out, run = canvas_zip_graded
    assert run.returncode == 0, run.stderr[-3000:]
    results = {p.parent.name: read_json(p) for p in out.glob("*/results.json")}
    assert sorted(results) == ["12345", "23456", "34567", "99999"]
    assert results["12345"].score == 8  # 10, then the instructor's -2
    assert results["12345"].adjustments[0].reason == "copied a docstring"
    assert results["23456"].score == 10  # the re-upload (-1) graded, not the stub
    assert results["23456"].late_marker and results["23456"].extended
    assert results["23456"].late_penalty == 0  # LATE, but within the extension
    assert results["34567"].score == 10  # "strides_broadcasting (1).py"
    assert any("was graded as strides_broadcasting" in n
               for n in results["34567"].exercises[0].notes)
    assert any(n.startswith("not in the roster") for n in results["34567"].notes)
    assert "not in the roster" in run.stderr
    assert results["99999"].score == 0 and results["99999"].notes.count("nothing handed in") == 1
    assert "; 1 handed in nothing (0 points)." in run.stdout
    assert not (root / "dl" / ".lms").exists() and not list(root.glob("*.lms*"))


def test_overrides_and_extensions_naming_nobody_are_warned_once(canvas_zip_graded):
    _, _, out, run = canvas_zip_graded
    warnings = [line for line in run.stderr.splitlines() if "warning" in line]
    assert sum("line 3" in w and "'s9'" in w for w in warnings) == 1, run.stderr[-3000:]
    assert sum("line 4" in w and "'strides_broadcastin'" in w for w in warnings) == 1
    assert sum("extension" in w and "'s8'" in w for w in warnings) == 1
    assert any("strides_broadcastin" in n for n in read_json(out / "12345" / "results.json")
               .notes)  # and the student's report still says it


def test_canvas_zip_gradebooks_hold_every_roster_student(canvas_zip_graded):
    _, _, out, _ = canvas_zip_graded
    grades = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv")
                                                                  .read_text()))}
    assert sorted(grades) == ["12345", "23456", "34567", "99999"]
    assert grades["99999"]["score"] == "0" and "nothing handed in" in grades["99999"]["remarks"]
    assert "copied a docstring" in grades["12345"]["remarks"]
    assert "extension" in grades["23456"]["remarks"] and grades["12345"]["student_id"] == "s1"
    canvas = list(csv.reader(io.StringIO((out / "canvas_grades.csv").read_text())))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert {r[1]: r[5] for r in canvas[2:]} == {"12345": "8", "23456": "10", "34567": "10",
                                                 "99999": "0"}
    moodle = list(csv.DictReader(io.StringIO((out / "moodle_grades.csv").read_text())))
    assert len(moodle) == 4
    index = (out / "index.html").read_text()
    assert "nothing handed in" in index and "not handed in" in index
    # the roster's names beside the ids, where the filter finds them
    assert '12345</a> <span class="name" title="Ada Lovelace">Ada Lovelace</span>' in index
    report = (out / "23456" / "report.html").read_text()
    assert "your extension" in report and "Lateness" in report
    assert "copied a docstring" in (out / "12345" / "report.html").read_text()


def test_canvas_regrade_keeps_adjustments_and_a_changed_override_regrades(canvas_zip_graded):
    root, z, out, _ = canvas_zip_graded
    again = torchgrade("grade", z, "--out", out, "--assignment", root / "hw1.toml", "-j", "2")
    assert again.returncode == 0 and "0 graded now, 4 up to date" in again.stdout
    (root / "overrides.csv").write_text("student,target,points,reason\n"
                                        "s1,strides_broadcasting,-3,copied two docstrings\n")
    third = torchgrade("grade", z, "--out", out, "--assignment", root / "hw1.toml", "-j", "2")
    assert "1 graded now, 3 up to date" in third.stdout, third.stdout
    assert read_json(out / "12345" / "results.json").score == 7


def test_moodle_and_blackboard_folders_end_to_end(tmp_path):
    moodle = write(tmp_path / "moodle", {
        "Ada Lovelace_101_assignsubmission_file_/strides_broadcasting (1).py": SOLUTION,
        "Ada Lovelace_101_assignsubmission_onlinetext_/onlinetext.html": "<p>done</p>",
        "Alan Turing_102_assignsubmission_file_strides_broadcasting.py": STUB,
    })
    before = tree(moodle)
    run = torchgrade("grade", moodle, "--out", tmp_path / "mout", "--exercises", EXERCISE,
                     "-j", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert tree(moodle) == before
    scores = {p.parent.name: read_json(p).score for p in (tmp_path / "mout").glob("*/results.json")}
    assert scores["101"] == scores["101"] > 0 and scores["102"] == 0 and len(scores) == 2
    worksheet = {r["Identifier"]: r for r in csv.DictReader(io.StringIO(
        (tmp_path / "mout" / "moodle_grades.csv").read_text()))}
    # Without a roster, the download's names (Moodle's worksheet wants them back), also in the
    # class index
    assert worksheet["Participant 101"]["Full name"] == "Ada Lovelace"
    assert "Alan Turing" in (tmp_path / "mout" / "index.html").read_text()

    bb = write(tmp_path / "bb", {
        "HW 1_ann_attempt_2026-03-01-10-00-00_strides_broadcasting.py": SOLUTION,
        "HW 1_ann_attempt_2026-03-02-09-30-00_strides_broadcasting.py": STUB,
        "HW 1_ann_attempt_2026-03-02-09-30-00.txt": "Name: Ann A (ann)\n",
    })
    run = torchgrade("grade", bb, "--out", tmp_path / "bout", "--exercises", EXERCISE,
                     "--lms", "blackboard")
    assert run.returncode == 0, run.stderr[-3000:]
    ann = read_json(tmp_path / "bout" / "ann" / "results.json")
    assert ann.score == 0  # the latest attempt (the stub) is graded
    assert ann.submitted_at == datetime(2026, 3, 2, 9, 30).astimezone()


def test_a_plain_class_zip_and_a_bad_lms_flag(tmp_path):
    plain = write(tmp_path / "class", {"ann/strides_broadcasting.py": SOLUTION})
    run = torchgrade("grade", zipped(plain, tmp_path / "class.zip", root="class/"),
                     "--out", tmp_path / "out", "--exercises", EXERCISE)
    assert run.returncode == 0, run.stderr[-3000:]
    assert read_json(tmp_path / "out" / "ann" / "results.json").score > 0
    bad = torchgrade("grade", plain, "--out", tmp_path / "o2", "--lms", "sakai")
    assert bad.returncode == 2 and "--lms" in bad.stderr


def test_load_assignment_reads_extensions_and_overrides(tmp_path):
    (tmp_path / "o.csv").write_text("student,target,points,reason\nann,x,1,r\n")
    (tmp_path / "a.toml").write_text('exercises = ["strides_broadcasting"]\n'
                                     'overrides = "o.csv"\n[extensions]\nann = 2026-03-02\n')
    plan = load_assignment(tmp_path / "a.toml")
    assert plan.extensions["ann"] == datetime(2026, 3, 2, 23, 59, 59)
    assert plan.override_rows[0].target == "x"


def test_names_that_climb_out_stay_inside_the_staging_folder(tmp_path):
    """A crafted zip's member names ("..", absolute) never write outside OUT/.lms/<id>/."""
    z = tmp_path / "evil.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("Eve E_7_assignsubmission_file_/../../../../escaped.py", SOLUTION)
        f.writestr("Eve E_7_assignsubmission_file_//abs/strides_broadcasting.py", SOLUTION)
        f.writestr("/Eve E_8_assignsubmission_file_/strides_broadcasting.py", SOLUTION)
    staging = tmp_path / "out" / ".lms"
    staged = dict(stage(parse(list_download(z), "moodle"), staging))
    written = [p for p in tmp_path.rglob("*.py")]
    assert written and all(p.is_relative_to(staging / "7") for p in written)
    assert sorted(staged) == ["7"]


def test_roster_ids_are_safe_folder_names(tmp_path):
    """A roster line is a folder name under OUT: "../x" or "index.html" must not be one."""
    from grader.intake.students import class_students

    (tmp_path / "r.csv").write_text("student_id,lms_id\n../../evil,\nindex.html,\nok,\n")
    roster = read_roster(tmp_path / "r.csv")
    assert sorted(roster) == ["%2E.%2F..%2Fevil", "index%2Ehtml", "ok"]
    staging = tmp_path / "out" / ".lms"
    made = class_students([], staging, roster)
    assert all(path.parent == staging for _, path in made) and len(made) == 3
    assert not (tmp_path / "evil").exists()


# --------------------------------------------------------------------------- testers' attacks

def test_a_blackboard_attachment_named_like_an_attempt_is_its_uploaders_file():
    """Blackboard prefixes a student's own file name: an `_attempt_<time>` inside it, and a
    receipt-shaped `.txt`, are mallory's files, never alice's submission or receipt."""
    forged = "HW1_mallory_attempt_2026-03-05-10-00-00_x_alice_attempt_2099-01-01-00-00-00"
    found = {s.lms_id: s for s in parse(entries({
        "HW1_alice_attempt_2026-03-01-10-00-00_strides_broadcasting.py": SOLUTION,
        "HW1_alice_attempt_2026-03-01-10-00-00.txt": "Name: Alice A (alice)\n",
        "HW1_mallory_attempt_2026-03-05-10-00-00_strides_broadcasting.py": STUB,
        "HW1_mallory_attempt_2026-03-05-10-00-00.txt": "Name: Mal M (mallory)\n",
        forged + ".txt": "Name: Alice A (alice)\n",
        forged + "_strides_broadcasting.py": STUB,
    }), "blackboard")}
    assert sorted(found) == ["alice", "mallory"]
    alice = found["alice"]
    assert alice.submitted_at == datetime(2026, 3, 1, 10, 0).astimezone()
    assert alice.files["strides_broadcasting.py"].read(1 << 20).decode() == SOLUTION
    assert list(alice.files) == ["strides_broadcasting.py"]
    assert found["mallory"].submitted_at == datetime(2026, 3, 5, 10, 0).astimezone()
    assert "x_alice_attempt_2099-01-01-00-00-00.txt" in found["mallory"].others


def test_a_blackboard_receipt_never_names_another_user_nor_merges_two():
    found = {s.lms_id: s for s in parse(entries({
        "HW1_bob_attempt_2026-03-01-10-00-00_strides_broadcasting.py": STUB,
        "HW1_bob_attempt_2026-03-01-10-00-00.txt": "Name: Alice A (alice)\n",  # lies
        "HW1_alice_attempt_2026-03-02-10-00-00_strides_broadcasting.py": SOLUTION,
        "HW1_alice_attempt_2026-03-02-10-00-00.txt": "Name: Alice A (alice)\n",
        "HW1_x_carl_attempt_2026-03-02-10-00-00_strides_broadcasting.py": SOLUTION,
        "HW1_x_carl_attempt_2026-03-02-10-00-00.txt": "Name: C (carl)\n",  # shortens
        "HW1_carl_attempt_2026-03-02-10-00-00_strides_broadcasting.py": STUB,
    }), "blackboard")}
    assert sorted(found) == ["alice", "bob", "carl", "x_carl"]
    assert any("receipt" in n and "'alice'" in n for n in found["bob"].notes)
    assert found["alice"].files["strides_broadcasting.py"].read(1 << 20).decode() == SOLUTION
    assert found["x_carl"].files["strides_broadcasting.py"].read(1 << 20).decode() == SOLUTION


@pytest.mark.parametrize("time", ["2026-99-99-99-99-99", "2026-02-30-10-00-00"])
def test_an_impossible_blackboard_time_costs_only_its_student(time):
    found = {s.lms_id: s for s in parse(entries({
        f"HW1_eve_attempt_{time}_strides_broadcasting.py": SOLUTION,
        "HW1_ann_attempt_2026-03-01-10-00-00_strides_broadcasting.py": SOLUTION,
        "HW1_ann_attempt_2026-03-01-10-00-00_x_attempt_2026-99-99-99-99-99_notes.py": STUB,
    }), "blackboard")}
    assert sorted(found) == ["ann", "eve"]
    assert found["eve"].submitted_at is None and list(found["eve"].files)
    assert any("no date" in n for n in found["eve"].notes)
    assert found["ann"].submitted_at == datetime(2026, 3, 1, 10, 0).astimezone()


def test_canvas_ids_are_ascii_digits_and_a_case_changed_re_upload_wins():
    assert not CANVAS.match("smithjo_\uff11\uff12_34_strides_broadcasting.py")
    assert detect_names(["smithjo_\uff11\uff12_\uff13\uff14_x.py"]) == "folders"
    found = {s.lms_id: s for s in parse(entries({
        "smithjo_7_100_strides_broadcasting.py": STUB,
        "smithjo_7_101_Strides_Broadcasting-1.py": SOLUTION,
        "leejo_8_1" + "0" * 5000 + "_strides_broadcasting.py": SOLUTION,  # int() refuses it
        "leejo_8_9_strides_broadcasting.py": STUB,
    }), "canvas")}
    files = found["7"].files
    assert len(files) == 1 and next(iter(files.values())).read(1 << 20).decode() == SOLUTION
    files = found["8"].files
    assert len(files) == 1 and next(iter(files.values())).read(1 << 20).decode() == SOLUTION


def test_a_file_and_a_folder_of_the_same_name_cost_only_their_student(tmp_path):
    with zipfile.ZipFile(tmp_path / "class.zip", "w") as z:
        z.writestr("A/helpers.py", "x = 1\n")
        z.writestr("A/helpers.py/x.py", "y = 2\n")
        z.writestr("A/strides_broadcasting.py", SOLUTION)
        z.writestr("carol/timestamp.txt", "2026-03-01T10:00:00+00:00\n")
        z.writestr("carol/timestamp.txt/strides_broadcasting.py", SOLUTION)
        z.writestr("dave/strides_broadcasting.py", SOLUTION)
    for _ in range(2):  # a rerun over what the first one left works too
        staged = dict(stage(parse(list_download(tmp_path / "class.zip"), "folders"),
                            tmp_path / "out" / ".lms"))
        assert sorted(staged) == ["A", "carol", "dave"]
        assert (staged["A"] / "strides_broadcasting.py").read_text() == SOLUTION
        notes = json.loads((staged["A"] / ".torchgrade-lms.json").read_text())["notes"]
        assert any("could not be copied" in n for n in notes)
        assert (staged["carol"] / "timestamp.txt").is_file()  # the hand-in time is kept
        kept = staged["carol"] / "timestamp.txt (folder)" / "strides_broadcasting.py"
        assert kept.read_text() == SOLUTION  # and so is her work
        notes = json.loads((staged["carol"] / ".torchgrade-lms.json").read_text())["notes"]
        assert any("timestamp.txt" in n for n in notes)
        assert (staged["dave"] / "strides_broadcasting.py").read_text() == SOLUTION


def test_a_canvas_hard_link_counts_for_whoever_had_it_first(tmp_path):
    download = write(tmp_path / "dl", {"lovelaceada_1_10_strides_broadcasting.py": SOLUTION})
    os.link(download / "lovelaceada_1_10_strides_broadcasting.py",
            download / "copiercat_2_20_strides_broadcasting.py")
    staged = dict(stage(parse(list_download(download), "canvas"), tmp_path / "out" / ".lms"))
    copied = [sid for sid in ("1", "2") if (staged[sid] / "strides_broadcasting.py").exists()]
    assert len(copied) == 1  # one owner, the other's name for it is refused
    other = ({"1", "2"} - set(copied)).pop()
    notes = json.loads((staged[other] / ".torchgrade-lms.json").read_text())["notes"]
    assert any("hard link" in n for n in notes)


def test_the_headline_and_the_console_line_show_the_final_score():
    plan = Assignment.model_validate({
        "name": "hw", "exercises": ["ex"], "due": datetime(2026, 3, 1, tzinfo=timezone.utc),
        "late_policy": {"penalty_per_day": 0.1},
        "override_rows": [{"student": "s1", "target": "ex", "points": -1, "relative": True,
                           "reason": "by hand"}]})
    late = apply_assignment(_result([5, 5], student="s1").model_copy(update={
        "submitted_at": datetime(2026, 3, 3, tzinfo=timezone.utc)}), plan)
    assert (late.score, late.late_penalty, late.final_score) == (9, 2, 7)
    from grader.outputs.progress import Progress
    from grader.outputs.report import render_report

    head = render_report(late, draw=False).split('<p class="score">', 1)[1].split("</p>")[0]
    assert "<strong>7 / 10</strong>" in head and "−2" in head and "9 before" in head
    stream = io.StringIO()
    Progress(stream, interactive=False).result(late)
    assert " 7 / 10" in stream.getvalue() and "-2 from 9" in stream.getvalue()


def test_an_assignment_timezone_places_blackboard_times_and_naive_due_dates():
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    plan = Assignment.model_validate({"exercises": ["ex"], "timezone": "Europe/Berlin",
                                      "due": datetime(2026, 3, 1, 23, 59)})
    assert plan.zone == berlin
    assert plan.due_utc == datetime(2026, 3, 1, 22, 59, tzinfo=timezone.utc)
    plain = Assignment.model_validate({"exercises": ["ex"]})
    assert plain.zone is None and "timezone" not in plain.scoring_key()
    assert plan.scoring_key() != plain.scoring_key()
    with pytest.raises(ValueError, match="no known time zone"):
        Assignment.model_validate({"exercises": ["ex"], "timezone": "Mars/Olympus"})
    names = {"HW1_ann_attempt_2026-07-01-10-00-00_strides_broadcasting.py": SOLUTION}
    ann = parse(entries(names), "blackboard", plan.zone)[0]
    assert ann.submitted_at == datetime(2026, 7, 1, 8, 0, tzinfo=timezone.utc)  # CEST
    assert parse(entries(names), "blackboard")[0].submitted_at == \
        datetime(2026, 7, 1, 10, 0).astimezone()  # without it: this machine's local time


def test_a_bug_hunt_part_broken_costs_a_share_of_the_copys_points_not_a_larger_maximum():
    """A check of what worked counts when it fails (the student broke it), as a share of the
    points the copy's faults are worth: the maximum stays theirs. It was added to the maximum,
    so an LMS column gave the breaker a perfect fix's points and raised the class's Points
    Possible for everyone."""
    from grader.course.bughunt import hunt, scored_checks, slots
    from grader.models import CheckRun, ModuleSource, Submission
    from grader.scoring.results import result_of

    exercise = "bughunt_regression"
    owed = scored_checks(exercise, hunt(exercise).seeded)
    other = next(f"{exercise}.{name}" for name in slots(exercise)
                 if f"{exercise}.{name}" not in owed)

    def graded(broken: bool) -> SubmissionResult:
        checks = [CheckResult(id=i, exercise=exercise, targets=["run"], visibility="hidden",
                              points=2, max_points=2, status="passed") for i in sorted(owed)]
        checks.append(CheckResult(id=other, exercise=exercise, targets=["run"],
                                  visibility="hidden", points=0 if broken else 2, max_points=2,
                                  status="failed" if broken else "passed"))
        module = ModuleSource(exercise=exercise, path="bughunt/regression.py", kind="py")
        run = CheckRun(submission=Submission(student="s", root=".",
                                             modules={exercise: module}),
                       exercises=[exercise], checks=checks)
        return result_of(run)

    perfect, breaker = graded(False), graded(True)
    worth = 2 * len(owed)
    assert perfect.max_score == breaker.max_score == worth == perfect.score
    assert breaker.score == pytest.approx(worth * worth / (worth + 2), abs=1e-5)
    assert canvas_csv([perfect, breaker], assignment="hw").splitlines()[1].endswith(f",{worth}")


def _zip_without_utf8_flag(path: Path, names: dict[str, bytes]) -> Path:
    """A zip as Linux's `zip` writes one: each name's raw bytes and no UTF-8 flag (zipfile
    itself flags every non-ASCII name, so each is written as an ASCII stand-in of the same
    length, then swapped for its bytes)."""
    with zipfile.ZipFile(path, "w") as z:
        for stand_in in names:
            z.writestr(stand_in, "x = 1\n")
    data = path.read_bytes()
    for stand_in, raw in names.items():
        assert len(stand_in.encode()) == len(raw)
        data = data.replace(stand_in.encode(), raw)
    path.write_bytes(data)
    return path


@pytest.mark.fast
def test_zip_names_without_the_utf8_flag_read_as_a_file_system_would(tmp_path):
    """Linux's `zip` stores UTF-8 names without the flag; zipfile reads them as CP437, which
    made the student `café` `caf├⌐` (no roster matched). Bytes that are not UTF-8 end up `%XX`,
    as in a folder's name."""
    from grader.intake.students import find_students

    download = _zip_without_utf8_flag(tmp_path / "class.zip", {
        "cafXX/x.py": "café/x.py".encode(), "nonXutf8/x.py": b"non\xe9utf8/x.py",
        "Jos__ N____ez_2006_assignsubmission_file_/x.py":
            "José Núñez_2006_assignsubmission_file_/x.py".encode()})
    assert {info.flag_bits & 0x800 for info in zipfile.ZipFile(download).infolist()} == {0}
    names = {e.name.split("/")[0] for e in list_download(download)}
    assert "café" in names and "José Núñez_2006_assignsubmission_file_" in names, names
    staged = tmp_path / "staged"
    for name in names:
        (staged / name).mkdir(parents=True)
    assert {"café", "non%E9utf8"} <= {sid for sid, _ in find_students(staged)}


@pytest.mark.fast
@pytest.mark.parametrize("rows, said", [
    ("a1,A,Ann,ann@x.org,1001\nb2,B,Bo,bo@x.org,1001\n", "rows 2 and 3 have the same lms_id"),
    ("a1,A,Ann,,1001\nc3,C,Cy,,\na1,B,Bo,,1002\n", "rows 2 and 4 have the same student_id"),
    ("a1,A,Ann,ann@x.org,\nb2,B,Bo,ANN@x.org,\n", "rows 2 and 3 have the same email"),
])
def test_a_roster_naming_one_id_twice_is_refused(tmp_path, rows, said):
    """Two rows with one lms_id made one student vanish and the other's grade carry their
    name, silently; a student_id or email twice made folders named by it ambiguous."""
    from grader.intake.assignment import AssignmentError

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,last_name,first_name,email,lms_id\n" + rows)
    with pytest.raises(AssignmentError, match=said):
        read_roster(roster)
    roster.write_text("student_id,last_name,first_name,email,lms_id\n"
                      "s5,Gauss,Carl,,1005\n1005,Euler,Leo,,1006\n")  # other columns: fine
    assert set(read_roster(roster)) == {"1005", "1006"}


@pytest.mark.fast
def test_an_extension_before_the_due_date_is_refused(tmp_path):
    """It made an on-time student late, silently: surely a typo."""
    from grader.intake.assignment import AssignmentError

    path = tmp_path / "hw.toml"
    path.write_text('exercises = ["strides_broadcasting"]\ndue = 2026-03-01T23:59:00+00:00\n'
                    '[extensions]\na = 2026-02-20\nb = 2026-03-04\n')
    with pytest.raises(AssignmentError, match="extension of a .* is before the due date"):
        load_assignment(path)
    path.write_text(path.read_text().replace("a = 2026-02-20\n", ""))
    assert set(load_assignment(path).extensions) == {"b"}


@pytest.mark.fast
def test_a_kept_result_out_of_another_total_is_named(tmp_path, monkeypatch, caplog):
    """A student missing from this download keeps the grade OUT holds; when the assignment's
    points changed since, their row is out of the old total, which an LMS reads against the
    new Points Possible: the run names them."""
    import grader.running.pool
    from grader.commands.grade import grade

    subs = tmp_path / "class"
    (subs / "b").mkdir(parents=True)
    (subs / "b" / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py").read_text())
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    (out / OUT_MARKER).write_text("")  # (a folder torchgrade wrote)
    (out / "a" / "results.json").write_text(_result([5, 5], student="a").model_dump_json())

    def fake_pool(pending, *, settings, steps, jobs, on_result, on_isolation):
        for task in pending:
            on_result(_result([5, 5, 5, 5], student=task.student))

    monkeypatch.setattr(grader.running.pool, "grade_in_pool", fake_pool)
    grade(subs, out=out, exercises=[EXERCISE])
    assert "1 kept result(s) were graded out of another total than this run's 20: a (10 of 10)" \
        in caplog.text


@pytest.mark.fast
def test_the_remarks_say_a_file_that_does_not_compile():
    """Issue 41: "nothing handed in" had a remark and a file with a syntax error (0 points as
    well) none. Said by the checks' reason, whatever the message's words."""
    from grader.outputs.exports import remarks

    def checks(exercise, reason, message):
        return [CheckResult(id=f"{exercise}.c{i}", exercise=exercise, targets=["f"],
                            visibility="visible", points=0, max_points=1, status="error",
                            reason=reason, message=message) for i in range(3)]

    syntax = "SyntaxError in a.py, line 6: expected ':'\n    for i in x\n              ^"
    result = SubmissionResult(
        student="finn", grader_version="0",
        checks=[*checks("a", "not_loaded", syntax),
                *checks("b", None, "SyntaxError in b.py: the student's own words")],
        exercises=[ExerciseResult(exercise="a", path="hw/a.py", score=0, max_score=3),
                   ExerciseResult(exercise="b", path="b.py", score=0, max_score=3)])
    assert remarks(result) == "hw/a.py not loaded (SyntaxError in a.py, line 6: expected ':')"


@pytest.mark.fast
def test_an_exercise_not_handed_in_beside_work_is_a_remark():
    """A student who handed in one exercise (or only a file no exercise has the name of) gets
    a remark for each exercise with no file; one who handed in nothing gets that remark once."""
    from grader.outputs.exports import remarks

    done = _result([5])
    missing = CheckResult(id="other.c0", exercise="other", targets=["g"], visibility="visible",
                          points=0, max_points=5, status="error", reason="not_submitted")
    result = done.model_copy(update={"checks": [*done.checks, missing]})
    assert remarks(result) == "other not handed in"
    nothing = result.model_copy(update={"checks": [missing], "notes": [NOTHING_HANDED_IN]})
    assert remarks(nothing) == NOTHING_HANDED_IN
    assert remarks(done) == ""
