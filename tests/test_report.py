"""Reports without a browser: pictures from evidence, diagnoses from the catalogue, what to fix
first, escaping. Fast (no grading); tests/test_browser.py looks at real reports in Chromium."""

from __future__ import annotations

import math
import os
import re

import pytest

from grader.checking.compare import grad_histogram_evidence
from grader.outputs import plots
from grader.course.faults import catalogue
from grader.models import CheckResult, ExerciseResult, SubmissionResult
from grader.outputs.report import (PICTURES_PER_CHECK, diagnosis_views, render_index,
                                   render_report, to_fix_first)

# Evidence as the checks record it (see grader/outputs/plots.py for the keys).
EVIDENCE = {
    "loss_curve": [2.0, 1.5, 1.2, 1.4, 1.9], "reference_loss_curve": [2.0, 1.5, 1.1, 0.9, 0.8],
    "val_loss_curve": [0.9, 0.7, 0.8], "reference_val_loss_curve": [0.8, 0.6, 0.65],
    "lr_per_step": [0.1] * 3 + [0.05] * 3, "reference_lr_per_step": [0.1] * 3 + [0.05] * 3,
    "grad_ratio": [1.0, 2.0, 3.0],
    "grad_errors": [{"name": "W1", "error": 0.5, "allowed": 1e-10, "ratio": 2.0},
                    {"name": "b1", "error": 0.0, "allowed": 1e-10}],
    "loss_surface": {"xx": 4.2, "x": 1.7, "xy": 17.0, "y": 7.0, "yy": 58.0},
    "reference_descent_path": [[0.5 * k, 0.2 * k] for k in range(1, 11)],
    "descent_path": [[0.25 * k, 0.1 * k] for k in range(1, 11)],
    "shapes": [[8, 1, 6, 1], [7, 1, 5]], "expected_shape": [8, 7, 6, 5], "got_shape": [8, 7, 6, 1],
    # gradients per layer: 1e-2 at step 1, then yours 1e-9 (vanished), the reference's 1e-3
    "grad_histograms": {"steps": 4, "reference_steps": 4, "layers": grad_histogram_evidence(
        ["0.weight", "0.bias", "2.weight"], [12, 4, 8],
        {"yours_first": [1e-2] * 24, "yours_last": [1e-9] * 24,
         "reference_first": [1e-2] * 24, "reference_last": [1e-3] * 24})},
    # fit_linear_gd at three rates on loss moments whose valley is steep (Hessian 15.5, 0.46)
    "lr_sweep": {"surface": {"xx": 7.45, "x": 2.4, "xy": 29.0, "y": 9.2, "yy": 113.0},
                 "steps": 3, "runs": [
                     {"lr": 0.01, "reference": [[0.58, 0.18], [1.1, 0.34], [1.5, 0.47]],
                      "yours": [[0.58, 0.18], [1.1, 0.34], [1.5, 0.47]]},
                     {"lr": 0.1, "reference": [[5.8, 1.84], [2.07, 0.53], [4.53, 1.27]],
                      "yours": [[5.8, 1.84], None, None], "problem": ""},
                     {"lr": 0.5, "reference": [[29.0, 9.2], [-150.0, -48.0], [900.0, 290.0]],
                      "yours": None, "problem": "the calls at lr 0.5 timed out after 1 s"}]},
}
KINDS = {"loss", "val-loss", "lr", "grad-ratio", "grad-errors", "descent", "broadcast",
         "grad-hist", "lr-sweep"}


def failed(check_id="ex.check", evidence=None, **fields) -> CheckResult:
    values = dict(id=check_id, exercise="ex", title=f"title of {check_id}", targets=["f"],
                  visibility="visible", points=0, max_points=2, status="failed",
                  message="f(x) returned 1; expected 2.", call="f(x)", expected="2", got="1",
                  evidence=evidence or {})
    values.update(fields)
    return CheckResult(**values)


def result(*checks: CheckResult, student="s") -> SubmissionResult:
    exercises = sorted({c.exercise for c in checks})
    return SubmissionResult(student=student, grader_version="test", checks=list(checks),
                            exercises=[ExerciseResult(exercise=e, score=0, max_score=2)
                                       for e in exercises])


@pytest.mark.fast
def test_every_picture_is_small_deterministic_and_described():
    check = failed(evidence=EVIDENCE)
    pictures = plots.pictures_for(check, limit=len(KINDS))
    assert {p.kind for p in pictures} == KINDS
    again = plots.pictures_for(check, limit=len(KINDS))
    assert [p.svg for p in pictures] == [p.svg for p in again]  # byte for byte
    for p in pictures:
        assert 1_000 < len(p.svg) < 40_000, (p.kind, len(p.svg))
        assert p.svg.startswith("<svg class=\"plot\" role=\"img\"")
        assert "<title" in p.svg and "<desc" in p.svg and len(p.alt) > 40
        assert "http" not in p.svg and "<script" not in p.svg and "<?xml" not in p.svg
        assert re.search(r'style="max-width: \d+px"', p.svg)


def test_two_figures_on_one_page_share_no_id():
    ids = []
    for check_id in ("ex.one", "ex.two"):
        for p in plots.pictures_for(failed(check_id, evidence=EVIDENCE)):
            ids += re.findall(r'\sid="([^"]+)"', p.svg)
            # every reference points at an id of the same figure
            own = set(re.findall(r'\sid="([^"]+)"', p.svg))
            assert set(re.findall(r'(?:href="#|url\(#)([^")]+)', p.svg)) <= own
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("junk", [None, "text", 3, [], [None, "a", float("nan")],
                                  [float("inf")] * 400, {"a": 1}, [[1, 2, 3]], [[None, None]]])
def test_malformed_evidence_never_breaks_a_report(junk):
    evidence = {key: junk for key in EVIDENCE}
    pictures = plots.pictures_for(failed(evidence=evidence))
    assert all(p.svg.startswith("<svg") for p in pictures)
    render_report(result(failed(evidence=evidence)))


@pytest.mark.fast
def test_diverging_and_nan_series_are_drawn_and_said():
    evidence = {"loss_curve": [1.0, 10.0, 1e4, 1e9, float("nan"), float("nan")],
                "reference_loss_curve": [1.0, 0.5, 0.3, 0.2, 0.15, 0.1],
                "loss_surface": EVIDENCE["loss_surface"],
                "reference_descent_path": EVIDENCE["reference_descent_path"],
                "descent_path": [[-3.0 ** k, 2.0 ** k] for k in range(1, 11)] + [None]}
    by_kind = {p.kind: p for p in plots.pictures_for(failed(evidence=evidence))}
    assert "not finite" in by_kind["loss"].alt and "first differ at step 2" in by_kind["loss"].alt
    assert "leaves the picture" in by_kind["descent"].alt


@pytest.mark.fast
def test_new_pictures_say_what_they_show_on_a_page():
    """The gradient histograms and the learning-rate panels of EVIDENCE, in words."""
    by_kind = {p.kind: p for p in plots.pictures_for(failed(evidence=EVIDENCE), limit=20)}
    hist = by_kind["grad-hist"].alt
    assert ("layer 0.weight: median |grad| 1e-2 at step 1, 1e-9 at the last step (reference "
            "1e-2 / 1e-3) \u2014 your gradients vanish") in hist
    assert "In short: your gradients vanish." in hist
    sweep = by_kind["lr-sweep"].alt
    assert "At lr 0.01:" in sweep and "yours follows the reference" in sweep
    assert "yours has no usable point from step 2 on" in sweep
    assert "At lr 0.5: reference leaves the picture at step 1" in sweep
    assert "yours: the calls at lr 0.5 timed out after 1 s" in sweep
    html = render_report(result(failed(evidence={k: EVIDENCE[k] for k in
                                                 ("grad_histograms", "lr_sweep")})))
    assert html.count('<svg class="plot"') == 2 and "your gradients vanish" in html


@pytest.mark.fast
def test_pictures_only_for_wrong_answers():
    html_failed = render_report(result(failed(evidence=EVIDENCE)))
    assert html_failed.count('<svg class="plot"') == PICTURES_PER_CHECK  # at most 4 per check
    for status in ("passed", "error", "timeout", "crashed"):
        check = failed(evidence=EVIDENCE, status=status)
        assert '<svg class="plot"' not in render_report(result(check)), status


@pytest.mark.fast
def test_report_escapes_everything_a_submission_controls():
    evil = "<script>alert(1)</script>"
    check = failed(message=f"f() raised ValueError: {evil}", output=evil, got=evil, call=evil,
                   evidence={"grad_errors": [{"name": evil, "error": 1, "allowed": 1e-9}],
                             "note": evil})
    html = render_report(result(check, student=evil))
    assert evil not in html and "&lt;script&gt;" in html


@pytest.mark.fast
def test_report_replaces_control_characters_and_marks_code():
    check = failed(message="f() printed", output="a\x00b\x04c", title="uses `patience` <3")
    html = render_report(result(check))
    assert "\x00" not in html and "\x04" not in html and "a\ufffdb\ufffdc" in html
    assert "<code>patience</code> &lt;3" in html


@pytest.mark.fast
def test_fix_first_groups_checks_failing_for_one_reason():
    missing = [failed(f"b.c{i}", exercise="b", status="error", targets=[f"g{i}"],
                      reason="not_submitted", message="file not submitted: expected b.py",
                      call=None)
               for i in range(3)]
    wrong = [failed("a.values", exercise="a", max_points=3),
             failed("a.hidden", exercise="a", visibility="hidden", max_points=9,
                    message="f(y) returned 3; expected 4."),
             failed("a.again", exercise="a", message="f(x) returned 1; expected 2.")]
    groups = to_fix_first(wrong + missing, n=10)
    # the mistakes in the file handed in by the points they cost (the hidden check is worth
    # more than the two visible ones failing with one reason), then the missing file
    assert [[c.id for c in g] for g in groups] == [
        ["a.hidden"], ["a.values", "a.again"], ["b.c0", "b.c1", "b.c2"]]
    html = render_report(result(*wrong, *missing))
    assert "3 checks failing the same way" in html


@pytest.mark.fast
def test_fix_first_puts_a_file_handed_in_ahead_of_files_missing():
    """Issue 41: a syntax error worth 35 points came after two files not handed in, and with
    three items shown the student saw nothing about the file they did hand in."""
    broken = [failed(f"a.c{i}", exercise="a", status="error", reason=None, max_points=7,
                     targets=[f"f{i}"], call=None,
                     message="a.py does not compile: SyntaxError: invalid syntax (line 3)")
              for i in range(5)]
    missing = [failed(f"{e}.c", exercise=e, status="error", reason="not_submitted",
                      max_points=40, call=None, message=f"file not submitted: expected {e}.py")
               for e in ("b", "c")]
    groups = to_fix_first(missing + broken)
    assert [g[0].id for g in groups] == ["a.c0", "b.c", "c.c"]
    html = render_report(result(*missing, *broken))
    fix_first = html[html.index("What to fix first"):html.index("</ol>")]
    assert fix_first.index("SyntaxError") < fix_first.index("file not submitted")


class RevealingCheck(CheckResult):
    """A check result with the per-check `reveal` setting the bug-hunt work adds."""

    reveal: str = "fix"


@pytest.mark.fast
@pytest.mark.parametrize("reveal,shown", [("symptom", 1), ("cause", 2), ("fix", 3)])
def test_diagnoses_show_as_much_as_the_check_reveals(reveal, shown):
    fault = next(iter(catalogue().values()))
    check = RevealingCheck(**{**failed(diagnoses=[fault.id]).model_dump(), "reveal": reveal})
    (view,) = diagnosis_views(check)
    parts = [view.symptom, view.cause, view.fix]
    assert parts == [fault.symptom, fault.cause, fault.fix][:shown] + [None] * (3 - shown)
    html = render_report(result(check))
    assert (fault.fix in html) == (shown == 3) and fault.symptom in html


@pytest.mark.fast
def test_unknown_diagnosis_ids_are_shown_plainly():
    html = render_report(result(failed(diagnoses=["no-such-fault"])))
    assert "no-such-fault" in html and "not described" in html


@pytest.mark.fast
def test_index_links_diagnoses_to_example_students():
    fault = next(iter(catalogue().values()))
    results = [result(failed(diagnoses=[fault.id]), student=f"st{i}") for i in range(7)]
    results.append(result(failed(), student="other"))
    html = render_index(results, ["ex"])
    assert fault.title in html and 'href="st0/report.html"' in html
    assert "and 2 more" in html  # five examples named, the rest counted
    assert math.isclose(float(re.search(r"Mean ([\d.]+)%", html).group(1)), 0.0)


def test_a_report_draws_at_most_its_budget_of_pictures_fix_first_first():
    from grader.outputs.report import PICTURES_PER_REPORT

    checks = [failed(f"ex.c{i:02d}", evidence={"grad_ratio": [1.0, 2.0]},
                     visibility="hidden" if i < 15 else "visible") for i in range(20)]
    html = render_report(result(*checks))
    assert html.count('<svg class="plot"') == PICTURES_PER_REPORT
    # the visible checks (and the ones to fix first among them) are drawn before hidden ones
    for i in range(15, 20):
        assert f'aria-labelledby="ex-c{i:02d}-grad-ratio-t' in html


@pytest.mark.fast
def test_a_file_not_submitted_is_not_an_error():
    """No code of the student's ran: the report said "4 raised an error" for an empty
    folder."""
    from grader.outputs.terminal import summary

    missing = failed("ex.gone", status="error", reason="not_submitted",
                     message="file not submitted: expected ex.py")
    broken = failed("ex.broken", status="error", message="f(x) raised ValueError: no")
    html = render_report(result(missing, broken), draw=False)
    assert '<span class="status missing">' in html and 'class="check missing"' in html
    assert "1 raised an error, 1 not submitted" in html
    assert "[ MISSING ] title of ex.gone" in summary(result(missing, broken))


@pytest.mark.fast
def test_not_implemented_is_its_own_state_not_an_error():
    """A stub's NotImplementedError (status `error`, reason `not_implemented`) reads "not
    implemented yet" in the report and the terminal, and is counted apart from errors; a real
    error keeps its ERROR; results without the field (older versions) still load."""
    from grader.outputs.summary import student_row
    from grader.outputs.terminal import summary

    todo = failed("ex.todo", status="error", reason="not_implemented",
                  message="f(x) is not implemented yet (it raises NotImplementedError).")
    broken = failed("ex.broken", status="error", message="f(x) raised ValueError: no")
    r = result(todo, broken)
    html = render_report(r, draw=False)
    assert '<span class="status todo">' in html and "not implemented yet" in html
    assert 'class="check todo"' in html and '<span class="status error">' in html
    assert "1 raised an error, 1 not implemented yet" in html
    text = summary(r)
    assert "[  TODO   ] title of ex.todo" in text and "[  ERROR  ] title of ex.broken" in text
    assert student_row(r, ["ex"]).broken == 1
    missing = failed("ex.missing", status="error", reason="not_defined",
                     message="m.py defines no f: check its spelling.")
    assert student_row(result(todo, broken, missing), ["ex"]).broken == 1  # not started: no crash
    old = r.model_dump(mode="json")
    for c in old["checks"]:
        c.pop("reason")
    again = SubmissionResult.model_validate(old)
    assert [c.reason for c in again.checks] == [None, None]
    from grader.outputs.gradescope import to_gradescope

    assert [t.status for t in to_gradescope(r).tests] == ["failed", "failed"]


@pytest.mark.fast
def test_a_symptom_only_check_names_no_fault_the_catalogue_lacks():
    """A bug hunt's check reveals symptoms only: a diagnosis whose fault a (student release's)
    catalogue does not describe is left out, not shown by its id; other checks still show it."""
    hidden = failed("ex.a", diagnoses=["no-such-fault"], reveal="symptom")
    shown = failed("ex.b", diagnoses=["no-such-fault"], reveal="fix")
    assert diagnosis_views(hidden) == []
    assert [d.id for d in diagnosis_views(shown)] == ["no-such-fault"]
    html = render_report(result(hidden), draw=False)
    assert "no-such-fault" not in html


# A correct fit_linear_gd that misbehaves only at the learning-rate picture's rates (never at
# lr 0.1 with 25 steps, the graded call, nor at 0.15, the descent picture's): raising, returning
# garbage, or hanging (bounded: 20 s, against the picture's 1 s per rate).
SWEEP_HOSTILE = {
    "raises_and_garbage": '''
_fit = fit_linear_gd


def fit_linear_gd(X, y, lr, steps):
    if lr == 0.5:
        raise ValueError("not at this rate")
    if lr == 0.1 and steps <= 20 and X.shape == (20, 1):
        return "junk", None, []
    return _fit(X, y, lr, steps)
''',
    "hangs": '''
_fit = fit_linear_gd


def fit_linear_gd(X, y, lr, steps):
    if lr == 0.01:
        import time
        time.sleep(20)
    return _fit(X, y, lr, steps)
''',
}


@pytest.mark.parametrize("kind", sorted(SWEEP_HOSTILE))
def test_the_learning_rate_picture_never_changes_a_verdict(grade_files, kind):
    """The extra runs of the learning-rate picture are evidence only: a fit_linear_gd that
    raises, returns garbage or hangs at one of its rates keeps every verdict of the correct
    code it wraps, costs boundedly more time, and gets a panel saying what happened."""
    from conftest import SOLUTIONS

    source = (SOLUTIONS / "manual_backward.py").read_text() + SWEEP_HOSTILE[kind]
    result = grade_files({"manual_backward.py": source}, exercises=["manual_backward"])
    assert {c.id: c.status for c in result.checks if c.status != "passed"} == {}
    trajectory = next(c for c in result.checks if c.id.endswith("fit_linear_gd_trajectory"))
    runs = {r["lr"]: r for r in trajectory.evidence["lr_sweep"]["runs"]}
    if kind == "hangs":
        assert runs[0.01]["problem"] == "the calls at lr 0.01 timed out after 1 s"
        assert runs[0.1]["problem"].startswith("not run") and runs[0.1]["yours"] is None
        assert trajectory.duration_s < 8, trajectory.duration_s   # 1 s deadline, then stop
    else:
        assert runs[0.01]["problem"] == "" and len(runs[0.01]["yours"]) == 20
        assert runs[0.1]["problem"] == runs[0.5]["problem"] == \
            "no step returned a finite (w[0], b)"
    # drawn as a failed check would draw it: one panel per rate, saying so
    failed_view = trajectory.model_copy(update={"status": "failed"})
    alt = next(p.alt for p in plots.pictures_for(failed_view) if p.kind == "lr-sweep")
    first_bad = 0.01 if kind == "hangs" else 0.1
    assert f"At lr {first_bad:g}: reference ends at" in alt and "yours: " in alt


@pytest.mark.fast
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_results_follow_the_umask_as_a_plain_open_would(tmp_path, umask, mode):
    from grader.outputs.writing import current_umask, write_atomic

    before = os.umask(umask)
    try:
        assert current_umask() == umask
        write_atomic(tmp_path / "report.html", "<p>x</p>")
    finally:
        os.umask(before)
    assert (tmp_path / "report.html").stat().st_mode & 0o777 == mode
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


@pytest.mark.fast
def test_class_statistics_come_from_exact_percents_not_rounded_rows():
    """5/7 and 7/7: the median is 85.714...%, shown 85.71; averaging the rows' rounded 71.43
    and 100.0 gave 85.715, shown 85.72. The rows still show two decimals."""
    from grader.outputs.summary import summarize

    def scored(student: str, score: float) -> SubmissionResult:
        return SubmissionResult(student=student, grader_version="test",
                                checks=[failed(points=score, max_points=7, status="passed")],
                                exercises=[ExerciseResult(exercise="ex", score=score,
                                                          max_score=7)])

    summary = summarize([scored("a", 5), scored("b", 7)], ["ex"])
    assert summary.median_percent == 85.71 and summary.mean_percent == 85.71
    assert [row.percent for row in summary.rows] == [71.43, 100.0]


@pytest.mark.fast
def test_the_terminal_summary_shows_an_error_many_checks_share_once():
    """A file that does not import fails every check with the same traceback: shown in full
    once (or as the exercise's note), then "the same error as above"; a one-line message, and
    a different one, still in full."""
    from grader.outputs import terminal

    def erred(n: int, message: str) -> CheckResult:
        return CheckResult(id=f"e.c{n}", exercise="e", title=f"check {n}", targets=["f"],
                           visibility="visible", points=0, max_points=1, status="error",
                           message=message)

    trace = "importing e.py failed: ImportError: no x\n  File \"e.py\", line 3\n    import x"
    checks = [erred(1, trace), erred(2, trace), erred(3, "f() raised ValueError"),
              erred(4, "f() raised ValueError"), erred(5, trace + " as y")]
    result = SubmissionResult(student="s", grader_version="0", checks=checks,
                              exercises=[ExerciseResult(exercise="e", path="e.py", score=0,
                                                        max_score=5)])
    text = terminal.summary(result)
    assert text.count("ImportError: no x") == 2  # check 1, and check 5's other message
    assert text.count("the same error as above") == 1
    assert text.count("f() raised ValueError") == 2
    noted = result.model_copy(update={"exercises": [result.exercises[0].model_copy(
        update={"notes": [trace]})]})
    assert terminal.summary(noted).count("ImportError: no x") == 2  # the note, check 5
    assert terminal.summary(noted).count("the same error as above") == 2


def test_a_file_that_does_not_import_says_so_without_the_graders_install_paths(grade_files):
    """Python's own ImportError names the file it looked in, under the grader's site-packages:
    the student reads it from the package on. The class index says "does not import", not
    "crashed"."""
    import sysconfig

    from grader.outputs.summary import student_row

    result = grade_files({"strides_broadcasting.py": "from torch import no_such_name\n"})
    messages = {c.message for c in result.checks}
    assert len(messages) == 1, messages
    [message] = messages
    assert message.startswith("importing strides_broadcasting.py failed"), message
    assert "cannot import name 'no_such_name' from 'torch' (torch/__init__.py)" in message
    assert sysconfig.get_paths()["purelib"] not in message
    [cell] = student_row(result, ["strides_broadcasting"]).exercises
    assert cell.state == "does not import"


@pytest.mark.fast
def test_the_terminal_summary_shows_control_characters_from_student_code_escaped():
    """An exception's message (and a file name) comes from the student: escape sequences in it
    must not clear, retitle or overwrite the student's terminal, colour or not."""
    from grader.outputs import terminal

    # (\u202e: a right-to-left override, which shows what follows it reversed)
    nasty = "\x1b[2J\x1b]0;pwned\x07\rfake [ PASSED ]\x9b\u202eDELIAF"
    check = CheckResult(id="e.c", exercise="e", targets=["f"], visibility="visible",
                        points=0, max_points=1, status="error", message=f"f() raised {nasty}")
    result = SubmissionResult(student="s", grader_version="0", checks=[check],
                              exercises=[ExerciseResult(exercise="e", path=f"e{nasty}.py",
                                                        score=0, max_score=1,
                                                        notes=[nasty])],
                              notes=[nasty])
    for text in (terminal.summary(result, color=False), terminal.checks_text(result)):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", text)
        assert "\\x1b[2J" in text and "\\x0dfake" in text and "\\u202eDELIAF" in text
    coloured = terminal.summary(result, color=True)
    assert "\x1b[2J" not in coloured and "\x07" not in coloured and "\r" not in coloured


@pytest.mark.fast
def test_records_made_in_the_sandbox_are_said_once_for_passed_checks_and_in_a_failed_one():
    passed = [failed(f"ex.p{i}", status="passed", points=2, message="", call=None,
                     worker_records=["m:probe"]) for i in range(3)]
    bad = failed("ex.bad", worker_records=["m:other"])
    html = render_report(result(*passed, bad), draw=False)
    assert html.count("rest partly on records made inside the sandbox") == 1
    assert "4 of these verdicts rest partly" in html
    assert html.count("Part of this verdict rests on a record") == 1 and "m:other" in html


@pytest.mark.fast
def test_the_terminal_counts_printed_lines_and_says_what_was_left_out():
    from grader.outputs import terminal

    output = "a\nb\n[... 21552354 bytes of output omitted ...]\nc\n"
    check = failed(output=output)
    text = terminal.summary(result(check), color=False)
    assert "your code printed 3 line(s) and 21,552,354 more bytes left out" in text
    assert "your code printed 2 line(s); see the report" in terminal.summary(
        result(failed(output="x\ny\n")), color=False)


@pytest.mark.fast
def test_where_a_timed_out_call_was_stopped_is_shown_everywhere_its_message_is():
    from grader.outputs import terminal
    from grader.outputs.gradescope import gradescope_json

    check = failed(status="timeout", message="f(x) timed out after 5 s (an endless loop, or far "
                   "too slow).", expected=None, got=None,
                   stopped_at="m.py, line 3, in helper: `n = n + 1`")
    where = "m.py, line 3, in helper: `n = n + 1`"
    assert f"It was stopped in {where}." in terminal.summary(result(check), color=False)
    assert f"It was stopped in {where}." in terminal.checks_text(result(check))
    assert "Where it was stopped:" in render_report(result(check), draw=False)
    assert "it was stopped in m.py, line 3" in gradescope_json(result(check))


@pytest.mark.fast
def test_a_bug_hunt_checked_locally_never_says_every_check_passed(tmp_path):
    """Issue 41: the untouched bug hunt ended "Score: 0 / 0. Every check passed." in green,
    every fault still in it. Its visible checks passing says they ran and that the faults are
    judged at grading, in the terminal and in the report, and names no fault."""
    from grader.commands.check import write_check_reports
    from grader.models import PendingCheck
    from grader.outputs import terminal

    hunt = "bughunt_regression"
    checks = [failed(f"{hunt}.v{i}", exercise=hunt, status="passed", points=0, max_points=0,
                     message="", title=f"visible {i}") for i in range(4)]
    pending = [PendingCheck(exercise=hunt, title=f"the fault in part {i}", points=2,
                            targets=["run"]) for i in range(4)]
    pending.append(PendingCheck(exercise=hunt, title="a fault not seeded", points=2,
                                targets=["run"], counted=False))
    done = SubmissionResult(student="s", grader_version="test", checks=checks,
                            exercises=[ExerciseResult(exercise=hunt, score=0, max_score=0)])
    for color in (False, True):
        text = terminal.summary(done, pending=pending, color=color)
        total = text.splitlines()[-1]
        assert "Every check passed" not in text and "\x1b[32m" not in total
        assert "The 4 visible checks that ran passed" in total
        assert "judged when you hand in (4 faults, 8 points)" in total
        assert not any(p.title in text for p in pending)
    (report,) = write_check_reports(done, tmp_path, pending)
    html = report.read_text(encoding="utf-8")
    assert "Every check passed" not in html and 'class="allgood"' not in html
    assert "judged when you hand in (4 faults, 8 points)" in html
    assert not any(p.title in html for p in pending)
    # an exercise that is no bug hunt still says it, hidden checks pending or not
    plain = failed("ex.c", status="passed", message="")
    other = result(plain)
    later = [PendingCheck(exercise="ex", title="hidden", points=3, targets=["f"])]
    assert "Every check passed." in terminal.summary(other, pending=later)
    (report,) = write_check_reports(other, tmp_path / "other", later)
    assert "Every check passed." in report.read_text(encoding="utf-8")


@pytest.mark.fast
def test_a_check_with_only_leaves_the_full_report_as_it_was(tmp_path):
    """Issue 41: `check --only NAME` overwrote the exercise's report.html with a report of its
    one check ("2 / 2 points (100%)"). It goes to <exercise>/only/, says so, and is still an
    attempt that unlocks the solution."""
    from grader.commands.check import write_check_reports
    from grader.commands.solution import tried

    everything = result(failed("ex.a"), failed("ex.b", status="passed", message=""))
    (full,) = write_check_reports(everything, tmp_path, [])
    before = full.read_bytes()
    some = result(failed("ex.b", status="passed", message=""))
    (part,) = write_check_reports(some, tmp_path, [], only=["g"])
    assert full.read_bytes() == before
    assert part == tmp_path / "ex" / "only" / "report.html"
    html = part.read_text(encoding="utf-8")
    assert "only the checks of g (--only)" in html and str(full) in html
    (full / ".." / "results.json").resolve().unlink()
    assert tried("ex", tmp_path)  # from the report of some checks


@pytest.mark.fast
def test_only_with_a_name_no_check_is_about_lists_the_names_they_are_about():
    """Issue 41: a misspelt `--only` name was refused without the names that would do."""
    from types import SimpleNamespace

    from grader.commands.check import refuse_unknown
    from grader.errors import UsageError

    select = SimpleNamespace(selected=0, matched=set(), offered={"c_strides", "broadcast_shape"})
    with pytest.raises(UsageError, match="is about c_stridez .*the checks are about: "
                                         "broadcast_shape, c_strides"):
        refuse_unknown(["c_stridez"], select, ["strides_broadcasting"])
    refuse_unknown(["c_strides"], SimpleNamespace(selected=2, matched={"c_strides"}, offered=set()),
                   ["strides_broadcasting"])
