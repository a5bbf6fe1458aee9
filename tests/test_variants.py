"""Per-student bug-hunt variants: `torchgrade variants` writes each student their own copies
and the instructor's manifest; grading with the manifest scores each student on the faults of
their own copy."""

from __future__ import annotations

import json

import pytest

from grader.commands.variants import read_variants, variants
from grader.course.bughunt import apply_variants
from grader.errors import UsageError
from grader.course import bughunt
from grader.cli import main
from conftest import end_to_end_checks, run_and_score
from grader.intake.submission import load_submission

ROSTER = "student_id,last_name,first_name,email\nada,L,Ada,a@x\nalan,T,Alan,t@x\n" \
         "grace,H,Grace,g@x\n"


@pytest.fixture
def roster(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(ROSTER)
    return path


def files_of(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_roster_and_seed_write_the_same_files(tmp_path, roster):
    a = variants(roster=roster, seed=4, out=tmp_path / "a")
    b = variants(roster=roster, seed=4, out=tmp_path / "b")
    assert files_of(a.parent) == files_of(b.parent)
    manifest = json.loads(a.read_text())
    assert sorted(manifest["students"]) == ["ada", "alan", "grace"]
    for student, draws in manifest["students"].items():
        for exercise, faults in draws.items():
            text = (a.parent / student / bughunt.student_path(exercise)).read_text()
            assert text == bughunt.render(exercise, faults)
            assert bughunt.holds_line(len(faults)) in text
    # Neighbours differ, and another seed gives other copies.
    copies = {s: tuple(map(tuple, d.values())) for s, d in manifest["students"].items()}
    assert len(set(copies.values())) == 3
    other = json.loads(variants(roster=roster, seed=5, out=tmp_path / "c").read_text())
    assert other["students"] != manifest["students"]


def test_cli_variants_and_bad_input(tmp_path, roster, capsys):
    assert main(["variants", "--roster", str(roster), "--seed", "1", "--out",
                 str(tmp_path / "v")]) == 0
    said = capsys.readouterr().out  # where the copies and the key are (issue 41)
    assert f"Bug-hunt copies for 3 students in {tmp_path / 'v'}/<student>/" in said
    assert f"keep the key (do not hand it out): {tmp_path / 'v' / 'manifest.json'}" in said
    assert (tmp_path / "v" / "manifest.json").is_file()
    assert (tmp_path / "v" / "ada" / "bughunt" / "regression.py").is_file()
    empty = tmp_path / "empty.csv"
    empty.write_text("student_id\n")
    assert main(["variants", "--roster", str(empty), "--seed", "1", "--out",
                 str(tmp_path / "w")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"seed": 1}')
    with pytest.raises(UsageError):
        read_variants(bad)
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    manifest["students"]["ada"]["bughunt_regression"] = ["no-such-fault"]
    bad.write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match="no-such-fault"):
        read_variants(bad)


def test_grading_scores_each_student_on_their_own_faults(tmp_path, roster, zygote):
    """ada hands in her copy untouched, alan the fixed scripts, zoe (not on the roster) the
    exercise files: 0 on ada's own faults, full marks on alan's, zoe against the seeded ones."""
    manifest = read_variants(variants(roster=roster, seed=2, out=tmp_path / "v"))
    exercise = "bughunt_regression"
    copies = {"ada": bughunt.render(exercise, manifest.students["ada"][exercise]),
              "alan": bughunt.fixed_source(exercise), "zoe": bughunt.render(exercise)}
    results = {}
    for student, text in copies.items():
        path = tmp_path / "subs" / student / "bughunt" / "regression.py"
        path.parent.mkdir(parents=True)
        path.write_text(text)
        submission = apply_variants(
            load_submission(path.parent.parent, exercises=[exercise], student=student), manifest)
        results[student] = run_and_score(submission, exercises=[exercise], zygote=zygote)
    ada, alan, zoe = results["ada"], results["alan"], results["zoe"]
    mine = manifest.students["ada"][exercise]
    hidden = lambda r: {c.id for c in r.checks if c.visibility == "hidden"}  # noqa: E731
    # beside the checks of the copy's faults, only end-to-end checks the faults break count
    e2e = end_to_end_checks(exercise)
    assert bughunt.scored_checks(exercise, mine) <= hidden(ada)
    assert hidden(ada) - bughunt.scored_checks(exercise, mine) <= e2e
    assert ada.score == 0 and ada.max_score == 2 * len(mine)
    assert {d for c in ada.checks for d in c.diagnoses} == set(mine)
    assert alan.score == alan.max_score == 2 * len(manifest.students["alan"][exercise])
    seeded = bughunt.hunt(exercise).seeded
    assert zoe.score == 0 and bughunt.scored_checks(exercise, seeded) <= hidden(zoe)
    assert hidden(zoe) - bughunt.scored_checks(exercise, seeded) <= e2e
    assert any("not in the bug-hunt variants manifest" in n for n in zoe.notes)
