"""The fault catalogue (grader/course/faults.toml), the diagnoses and the bug hunts' scoring.

Static: the catalogue holds every pitfall CURRICULUM.md lists (generated from its `pitfalls`),
names checks that exist, has one diagnosis rule per fault; the exercise files are the fixed
scripts with their seeded faults injected. Graded: every catalogued fault, injected into a
reference (a bug hunt's fixed script through the catalogue's injection, or a module solution
through a mutant that declares it), fails a hidden check that names the fault in its
diagnoses: a fault added to the catalogue without such a proof fails here. Faults injected a
second, differently written way, feature deletions and alternative fixes are mutants
(tests/mutants/bughunt_*.py), graded by test_checks_catch_mutants.py. Variants: a student's
copy is scored on its own faults only.
"""

from __future__ import annotations

import ast
import re

import pytest

from conftest import EXERCISES, SOLUTIONS, end_to_end_checks
from grader.course.folder import default_course
from grader.course import bughunt
from grader.course.knowledge import knowledge

from grader.course.faults import bughunts, catalogue, load
from grader.models import CheckResult
from grader.course.registry import check_files, exercise_of, known_exercises, visibility_of_file
from conftest import run_and_score
from grader.intake.submission import load_submission
from mutants import mutants_of

RULES = dict(knowledge().rules)  # the shipped curriculum's (checks/diagnoses.py)

FAULTS = catalogue()
CHECKS = default_course().checks_dir
HUNTS = sorted(bughunts())


def declared_checks() -> dict[str, str]:
    """Every check id the check files declare -> its visibility."""
    out = {}
    for path in check_files():
        for fn in ast.parse(path.read_text()).body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
                out[f"{exercise_of(path)}.{fn.name.removeprefix('test_')}"] = \
                    visibility_of_file(path)
    return out


def module_mutants(fault_id: str):
    """Mutants of the modules' solutions that declare `fault_id`."""
    return [m for e in known_exercises() if not bughunt.is_bughunt(e)
            for m in mutants_of(e) if fault_id in m.diagnoses]


def bughunt_mutants(fault_id: str):
    """Mutants of the bug hunts' fixed scripts, other than the catalogue's own injections,
    that declare `fault_id` (graded by test_checks_catch_mutants.py, which requires the
    diagnosis)."""
    return [m for e in HUNTS for m in mutants_of(e)
            if fault_id in m.diagnoses and not m.name.startswith("catalogue_")]


# --------------------------------------------------------------------------- static


@pytest.mark.fast
def test_catalogue_holds_every_curriculum_pitfall():
    """CURRICULUM.md, "Pitfalls the fault catalogue holds": generated from `pitfalls` in
    faults.toml, each of which must be a fault of the catalogue."""
    pitfalls = load().pitfalls
    # 25 when the list moved into the repository: dropping one is a change of the contract.
    assert len(pitfalls) >= 25 and len(set(pitfalls)) == len(pitfalls)
    assert set(pitfalls) - set(FAULTS) == set()


@pytest.mark.fast
def test_catalogue_entries_are_complete_and_name_existing_checks():
    checks = declared_checks()
    exercises = set(known_exercises())
    for fault in FAULTS.values():
        assert all(text.strip() for text in (fault.title, fault.symptom, fault.cause, fault.fix))
        assert set(fault.exercises) <= exercises, fault.id
        assert set(fault.detected_by) - set(checks) == set(), fault.id
        assert {c.split(".")[0] for c in fault.detected_by} <= set(fault.exercises), fault.id


def faults_named_by_checks() -> set[str]:
    """The fault ids the check files (and their helpers) name themselves, `fail(...,
    fault="<id>")`: the course-defined diagnoses, which need no rule."""
    return {m for path in CHECKS.glob("*.py")
            for m in re.findall(r"""\bfault=["']([a-z0-9-]+)["']""", path.read_text())}


@pytest.mark.fast
def test_every_fault_has_a_diagnosis_rule_and_every_rule_a_fault():
    """A fault is diagnosed by a rule reading evidence (grader/scoring/diagnose.py) or named
    by the check that finds it; every rule diagnoses a catalogued fault."""
    named = faults_named_by_checks()
    assert set(RULES) <= set(FAULTS)
    assert set(FAULTS) - set(RULES) - named == set(), "faults nothing can diagnose"
    assert named <= set(FAULTS), "checks name faults the catalogue lacks"


def test_every_fault_has_a_detection_to_prove():
    """Each fault is injected into some bug hunt or held by a module mutant; and each check
    `detected_by` names is one a proof below (or a mutant) shows failing with the diagnosis."""
    for fault in FAULTS.values():
        proven = {f"{inj.exercise}.{inj.check}" for inj in fault.inject}
        proven |= {c for m in module_mutants(fault.id) + bughunt_mutants(fault.id)
                   for c in m.fails}
        assert proven, f"{fault.id}: no injection and no mutant holds it"
        assert set(fault.detected_by) <= proven, (fault.id, set(fault.detected_by) - proven)


@pytest.mark.parametrize("exercise", HUNTS)
def test_exercise_file_is_the_fixed_script_with_its_seeded_faults(exercise):
    path = bughunt.student_path(exercise)
    text = (EXERCISES / path).read_text()
    assert text == bughunt.render(exercise), "run `python -m grader.course.bughunt` to regenerate"
    assert (SOLUTIONS / path).read_text() == bughunt.fixed_source(exercise)
    n = len(bughunts()[exercise].seeded)
    assert 3 <= n <= 5 and f"This copy holds {n} faults" in text
    assert bughunt.render(exercise, []).count(bughunt.HOLDS_FIXED) == 0
    # Reads like a student's script: no comment pointing at a fault.
    assert not re.search(r"#.*\b(bug|fault|fixme|wrong)\b", text, re.IGNORECASE)


@pytest.mark.parametrize("exercise", HUNTS)
def test_variants_are_deterministic_and_differ_between_students(exercise):
    draws = {s: bughunt.draw_variant(exercise, s, seed=7) for s in (f"s{i:02d}" for i in range(30))}
    assert draws == {s: bughunt.draw_variant(exercise, s, seed=7) for s in draws}
    assert len({tuple(d) for d in draws.values()}) > 10
    n = len(bughunts()[exercise].seeded)
    for faults in draws.values():
        assert len(faults) == n and set(faults) <= set(bughunt.applicable(exercise))
        assert len(bughunt.scored_checks(exercise, faults)) == n
        bughunt.render(exercise, faults)  # every draw can be injected
    assert bughunt.draw_variant(exercise, "s00", seed=8) != draws["s00"] or \
        bughunt.draw_variant(exercise, "s01", seed=8) != draws["s01"]


# --------------------------------------------------------------------------- graded


@pytest.fixture
def grade_copy(tmp_path, zygote):
    """Grade one bug-hunt file (its text) as the copy holding `faults` (None: the exercise
    file's seeded faults)."""

    def grade(exercise: str, source: str, faults: list[str] | None = None):
        root = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
        path = root / bughunt.student_path(exercise)
        path.parent.mkdir(parents=True)
        path.write_text(source, encoding="utf-8")
        submission = load_submission(root, exercises=[exercise], student="student")
        submission.modules[exercise].faults = faults
        return run_and_score(submission, exercises=[exercise], zygote=zygote)

    return grade


def diagnosed(checks: list[CheckResult]) -> set[str]:
    return {d for c in checks if c.status != "passed" for d in c.diagnoses}


@pytest.mark.parametrize("fault_id", sorted(FAULTS))
def test_fault_is_caught_and_diagnosed(grade_copy, grade_files, fault_id):
    """Every injection of the fault fails the hidden check that scores it, which names the
    fault (and no failing check names another); every module mutant holding it fails a check
    of `detected_by` that names it; one of those is hidden."""
    fault = FAULTS[fault_id]
    checks = declared_checks()
    hidden = []
    for inj in fault.inject:
        result = grade_copy(inj.exercise, bughunt.render(inj.exercise, [fault_id]), [fault_id])
        # (the script's visible checks, 0 points, fail only where the fault makes it raise or
        # lose finite losses: tests/test_checks_catch_mutants.py)
        failing = {c.id: c for c in result.checks
                   if c.status != "passed" and c.visibility == "hidden"}
        scored = f"{inj.exercise}.{inj.check}"
        # Beside the check that scores it, a fault may fail only end-to-end checks of the run
        # whose subject it breaks (the run learns less; a layer does not learn), naming no
        # other fault.
        e2e = end_to_end_checks(inj.exercise)
        assert scored in failing and set(failing) - {scored} <= e2e, \
            (inj.exercise, {k: c.message for k, c in failing.items()})
        assert failing[scored].diagnoses == [fault_id]
        assert all(set(c.diagnoses) <= {fault_id} for c in failing.values())
        assert result.score == 0 and result.max_score == sum(c.max_points
                                                              for c in failing.values())
        hidden += [scored] if checks[scored] == "hidden" else []
    for mutant in module_mutants(fault_id):
        result = grade_files({f"{mutant.exercise}.py": mutant.source()},
                             exercises=[mutant.exercise])
        named = [c.id for c in result.checks if c.status != "passed"
                 and c.id in fault.detected_by and fault_id in c.diagnoses]
        assert named, (mutant.name, {c.id: c.diagnoses for c in result.checks})
        hidden += [c for c in named if checks[c] == "hidden"]
    # Faults only the end-to-end checks see (a leak between splits, labels apart from their
    # samples) are proven by bug-hunt mutants, which verify grades requiring the diagnosis
    # (tests/test_checks_catch_mutants.py).
    hidden += [c for m in bughunt_mutants(fault_id) for c in m.fails
               if checks.get(c) == "hidden"]
    assert hidden, f"{fault_id}: no hidden check caught it"


@pytest.mark.parametrize("exercise", HUNTS)
def test_reference_scores_full_marks_on_any_variant(grade_copy, exercise):
    """The fixed script scores every fault of the copy it stands for (seeded or drawn)."""
    fixed = bughunt.fixed_source(exercise)
    for faults in (None, bughunt.draw_variant(exercise, "ada", seed=3)):
        result = grade_copy(exercise, fixed, faults)
        n = len(bughunts()[exercise].seeded)
        assert [c.id for c in result.checks if c.status != "passed"] == []
        assert result.score == result.max_score == 2 * n


@pytest.mark.parametrize("exercise", HUNTS)
def test_variant_copy_scores_zero_on_its_own_faults(grade_copy, exercise):
    """A student's untouched copy fails exactly the checks of the faults it holds, whichever
    they are, diagnosed; the variant manifest decides what counts."""
    faults = bughunt.draw_variant(exercise, "grace", seed=5)
    result = grade_copy(exercise, bughunt.render(exercise, faults), faults)
    hidden = {c.id for c in result.checks if c.visibility == "hidden"}
    assert bughunt.scored_checks(exercise, faults) <= hidden
    assert hidden - bughunt.scored_checks(exercise, faults) <= end_to_end_checks(exercise)
    assert result.score == 0 and result.max_score == 2 * len(faults)
    assert diagnosed(result.checks) == set(faults)


@pytest.mark.parametrize("exercise", HUNTS)
def test_any_two_faults_of_different_checks_can_be_combined(exercise):
    """Variants draw any subset with one fault per check, none hiding another: every such pair
    injects cleanly. (Every pair was also graded once, 2026-12-02: each fails exactly its two
    checks, both diagnosed, except validation-without-eval hiding train-mode-not-restored, now
    `masked_by` in the catalogue.)"""
    slots = bughunt.slots(exercise)
    faults = [(check, f) for check, options in slots.items() for f in options]
    for i, (check_a, a) in enumerate(faults):
        for check_b, b in faults[i + 1:]:
            if check_a != check_b and not bughunt.masked_pairs([a, b]):
                bughunt.render(exercise, [a, b])


@pytest.mark.fast
@pytest.mark.parametrize("reveal", ["symptom", "cause", "fix"])
def test_report_shows_a_diagnosis_as_far_as_the_check_reveals(reveal):
    """Bug-hunt checks reveal only the symptom: the report then does not name the fault
    (its title says the cause), nor its cause or fix."""
    from grader.models import ExerciseResult, SubmissionResult
    from grader.outputs.report import render_report

    fault = FAULTS["grad-not-zeroed"]
    check = CheckResult(id="bughunt_regression.steps_use_fresh_gradients",
                        exercise="bughunt_regression", title="Every update uses fresh gradients",
                        targets=["train"], visibility="hidden", points=0, max_points=2,
                        status="failed",
                        message="train(...): at update 2 p.grad was a sum over 2 batches.",
                        diagnoses=[fault.id], reveal=reveal,
                        evidence={"accumulated_steps": [2, 3]})
    html = render_report(SubmissionResult(
        student="s", grader_version="t", checks=[check],
        exercises=[ExerciseResult(exercise="bughunt_regression", score=0, max_score=2)]))
    assert fault.symptom in html and "accumulated steps" in html
    assert (fault.title in html) == (reveal != "symptom")
    assert (fault.cause in html) == (reveal != "symptom")
    assert (fault.fix in html) == (reveal == "fix")
