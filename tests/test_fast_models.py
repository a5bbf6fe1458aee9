"""The types passed between stages (grader/models.py): what they accept, what they refuse, and
the bounds they put on text from student code. The fast tier."""

from __future__ import annotations

import io
import json

import pytest
from pydantic import ValidationError

from grader import models
from grader.models import (
    CheckInfo,
    CheckResult,
    CheckRun,
    ExerciseResult,
    ModuleRun,
    ModuleSource,
    Submission,
    SubmissionResult,
    bounded_evidence,
    clip_text,
    fit_budget,
    is_grader_failure,
    state_of,
    text_cost,
)

pytestmark = pytest.mark.fast


def check(**fields) -> CheckResult:
    base = dict(id="ex.test_x", exercise="ex", targets=["f"], visibility="visible", points=0.0,
                max_points=1.0, status="failed")
    return CheckResult(**{**base, **fields})


def result(*checks: CheckResult, **fields) -> SubmissionResult:
    return SubmissionResult(student="s", grader_version="t", checks=list(checks), **fields)


# --------------------------------------------------------------------------- text


def test_clip_text_keeps_the_start_and_says_how_much_went():
    assert clip_text("short", 10) == "short"
    clipped = clip_text("a" * 50, 10)
    assert clipped.startswith("a" * 10) and "40 characters omitted" in clipped
    assert "\ud800" not in clip_text("x\ud800y", 10)  # lone surrogates become U+FFFD
    clip_text("x\ud800y", 10).encode("utf-8")


def test_text_cost_counts_utf8_bytes_and_worst_escaping():
    assert text_cost("") == 0 and text_cost("abc") == 3
    assert text_cost("é") == 2
    assert text_cost('<"\\') == 3 + 3 * 5
    assert text_cost("\x00") == 6


def test_check_fields_are_bounded_when_built_and_when_set():
    c = check(message="m" * 100_000, call="c" * 10_000, targets=[f"t{i}" for i in range(300)])
    assert len(c.message) < 20_100 and len(c.call) < 4_100 and len(c.targets) == 100
    c.message = "\udcff" * 30_000  # checks and the plugin set fields after construction
    assert len(c.message) < 20_100 and "\udcff" not in c.message


def test_status_reason_visibility_and_reveal_are_closed_sets():
    for field, bad in (("status", "skipped"), ("reason", "not_submitted_yet"),
                       ("visibility", "secret"), ("reveal", "all")):
        with pytest.raises(ValidationError):
            check(**{field: bad})
    with pytest.raises(ValidationError):
        check().status = "ok"  # validated on assignment too


def test_state_of_shows_not_implemented_as_todo():
    assert state_of(check(status="error", reason="not_implemented")) == "todo"
    assert state_of(check(status="error")) == "error"
    assert state_of(check(status="passed")) == "passed"


# --------------------------------------------------------------------------- evidence


def test_evidence_is_small_plain_data():
    deep: list = []
    node = deep
    for _ in range(20):
        node.append([])
        node = node[0]
    evidence = bounded_evidence({"curve": list(range(5000)), "s": "x" * 10_000, "deep": deep,
                                 "many": ["y" * 1000] * 100, "pair": (1, 2)})
    assert len(evidence["curve"]) == models.EVIDENCE_ITEMS
    assert len(evidence["s"]) < models.EVIDENCE_CHARS + 100
    assert sum(len(s) for s in evidence["many"] if isinstance(s, str)) \
        <= models.EVIDENCE_TEXT + 2 * models.EVIDENCE_CHARS
    assert list(evidence) == ["curve", "s", "deep", "many", "pair"]
    assert evidence["pair"] == (1, 2)
    text = json.dumps(evidence["deep"])
    assert "omitted" in text and text.count("[") <= models.EVIDENCE_DEPTH + 1


def test_a_spent_text_budget_keeps_every_key():
    """Text from student code (errors, names) can spend a check's text budget; the keys after
    it are the names diagnoses look up, and still hold their numbers."""
    c = check(evidence={"error": ["e" * 3000] * 15, "accumulated_steps": [2, 3],
                        "k" * 5000: 1, "lr_per_step": [0.1, 0.05]})
    assert c.evidence["accumulated_steps"] == [2, 3] and c.evidence["lr_per_step"] == [0.1, 0.05]
    assert len(c.evidence) == 4 and all(len(k) < 200 for k in c.evidence)


def test_evidence_counts_leaves_across_the_whole_check():
    evidence = bounded_evidence({f"k{i}": list(range(900)) for i in range(30)})
    leaves = sum(len(v) for v in evidence.values())
    assert leaves <= models.EVIDENCE_LEAVES


def test_honest_evidence_is_kept_as_it_is():
    evidence = {"loss_curve": [0.5, 0.25], "shapes": [[2, 1], [3]], "nested": {"a": [1, 2]},
                "flag": True, "none": None}
    assert check(evidence=evidence).evidence == evidence


# --------------------------------------------------------------------------- the whole budget


def test_a_result_over_budget_clips_its_longest_texts_first():
    small = check(id="ex.small", message="keep me")
    big = check(id="ex.big", output="o" * 290_000)
    r = result(small, *[big.model_copy() for _ in range(20)])  # ~5.8 MB of output
    cost = sum(text_cost(c.output) + text_cost(c.message) for c in r.checks)
    assert cost <= models.TEXT_BUDGET
    assert r.checks[0].message == "keep me"
    assert all("characters omitted" in c.output for c in r.checks[1:])


def test_fit_budget_drops_big_evidence_whole():
    c = check(evidence={"curve": [0.123456789] * 1000})
    r = result(c)
    fit_budget(r, 1000)
    assert list(r.checks[0].evidence) == ["omitted"]


def test_fit_budget_leaves_a_result_within_budget_alone():
    c = check(message="m" * 100, evidence={"curve": [1.0, 2.0]})
    r = result(c)
    before = r.model_dump_json()
    fit_budget(r, models.TEXT_BUDGET)
    assert r.model_dump_json() == before


# --------------------------------------------------------------------------- results and runs


def test_score_is_the_sum_of_the_checks():
    r = result(check(points=1.0, max_points=2.0), check(points=0.5, max_points=0.5))
    assert (r.score, r.max_score) == (1.5, 2.5)
    assert json.loads(r.model_dump_json())["score"] == 1.5  # computed fields are written
    assert not r.all_passed
    assert result(check(status="passed", points=1.0)).all_passed
    assert not result().all_passed and is_grader_failure(result())


def test_full_marks_are_counted_on_the_grade_after_a_late_penalty():
    from grader.outputs.progress import Progress
    from grader.outputs.summary import summarize

    on_time = result(check(status="passed", points=1.0))
    late = result(check(status="passed", points=1.0), late_penalty=0.4)
    assert summarize([on_time, late], ["ex"]).full_marks == 1
    progress = Progress(io.StringIO(), interactive=False)
    progress.result(on_time)
    progress.result(late)
    assert progress.full == 1


def test_result_fields_keep_their_ranges():
    with pytest.raises(ValidationError):
        result(late_penalty=-1)
    with pytest.raises(ValidationError):
        result(grading_s=-0.1)
    with pytest.raises(ValidationError):
        result(isolation="partial")


def test_a_result_round_trips_through_json():
    r = result(check(evidence={"loss_curve": [1.0, 0.5]}, diagnoses=["grad-not-zeroed"]),
               exercises=[ExerciseResult(exercise="ex", score=0, max_score=1)],
               fingerprint="sha256:00", grading_s=1.25)
    again = SubmissionResult.model_validate_json(r.model_dump_json())
    assert again.model_dump() == r.model_dump()


def test_check_info_validates_what_a_check_declares():
    assert CheckInfo(points=2, targets=["f"]).visibility == "hidden"
    for bad in (dict(points=-1, targets=["f"]), dict(points=1, targets=[]),
                dict(points=1, targets=["f"], timeout=0)):
        with pytest.raises(ValidationError):
            CheckInfo(**bad)


def test_check_run_carries_a_submission_and_its_checks_to_scoring():
    module = ModuleSource(exercise="ex", path="ex.py", kind="py")
    sub = Submission(student="ann", root="/subs/ann", modules={"ex": module})
    run = CheckRun(submission=sub, exercises=["ex"], checks=[check()],
                   modules={"ex": ModuleRun(import_output="hi\n")}, isolation="full",
                   grading_s=2.0)
    again = CheckRun.model_validate_json(run.model_dump_json())
    assert again == run and again.submission.modules["ex"].kind == "py"
    assert again.modules["ex"].unavailable is None
    with pytest.raises(ValidationError):
        CheckRun(submission=sub, exercises=["ex"], checks=[], grading_s=-1)
    with pytest.raises(ValidationError):
        ModuleSource(exercise="ex", path="ex.txt", kind="txt")
