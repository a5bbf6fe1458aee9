"""A course's own knowledge: its probes (`probes/`), evidence keys and diagnosis rules
(`checks/diagnoses.py`), over the default course's. Fast: no worker starts here (the worked
example of docs/AUTHORING.md, run by tests/test_readme.py, grades with a probe of its own)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.course.folder import (CourseError, default_course, import_checks_from, load_course,
                                  use_course)
from grader.authoring.verify import validate
from grader.course.knowledge import knowledge, refuse_unknown_faults
from grader.evidence import Key
from grader.models import CheckResult
from grader.scoring.diagnose import diagnose_check
from grader.worker import seal
from test_course import write_course

pytestmark = pytest.mark.fast

DIAGNOSES = '''
from grader import evidence
from grader.evidence import Key, Steps, ev, rule


class E(evidence.E):
    stale_steps = Key(Steps, "steps whose p.grad held earlier gradients", "test_scale")


@rule("grad-not-zeroed")
def _mine(check) -> bool:
    return bool(ev(check, E.stale_steps))
'''


@pytest.fixture(autouse=True)
def back_to_default():
    yield
    use_course(None)
    import_checks_from(default_course().checks_dir)


def failing(**evidence) -> CheckResult:
    return CheckResult(id="scale.c", exercise="scale", targets=["scale"], visibility="visible",
                       points=0, max_points=1, status="failed", evidence=evidence)


def test_a_courses_rules_are_its_own_and_its_keys_add_to_the_default_courses(tmp_path):
    course = load_course(write_course(tmp_path / "c"))
    (course.checks_dir / "diagnoses.py").write_text(DIAGNOSES)
    own = knowledge(course)
    shipped = knowledge(default_course())
    assert isinstance(own.keys["stale_steps"], Key) and "stale_steps" not in shipped.keys
    assert set(shipped.keys) < set(own.keys)  # the default course's and the grader's too
    # Its rules only (one for a fault it inherits): a shipped rule, written for the shipped
    # checks' evidence, never fires on this course's checks.
    assert [f for f, _ in own.rules] == ["grad-not-zeroed"]
    assert dict(own.rules)["grad-not-zeroed"] is not dict(shipped.rules)["grad-not-zeroed"]
    assert diagnose_check(failing(stale_steps=[2]), own.rules) == ["grad-not-zeroed"]
    assert diagnose_check(failing(accumulated_steps=[2]), own.rules) == []
    assert "grad-not-zeroed" in diagnose_check(failing(accumulated_steps=[2]), shipped.rules)


def test_a_course_without_diagnoses_has_no_rules_and_the_default_courses_keys(tmp_path):
    course = load_course(write_course(tmp_path / "c"))
    assert knowledge(course).rules == ()
    assert knowledge(course).keys == knowledge(default_course()).keys


def test_a_rule_for_a_fault_the_catalogue_lacks_is_refused(tmp_path):
    course = load_course(write_course(tmp_path / "c"))
    (course.checks_dir / "diagnoses.py").write_text(
        DIAGNOSES.replace('@rule("grad-not-zeroed")', '@rule("grad-not-zerod")'))
    assert [f for f, _ in knowledge(course).rules] == ["grad-not-zerod"]  # inert at grading
    with pytest.raises(CourseError, match="a rule for the fault grad-not-zerod, which the "
                                          "course's faults.toml does not list"):
        refuse_unknown_faults(course)  # what verify does first
    with pytest.raises(CourseError, match="grad-not-zerod"):
        validate(course, None)


def test_a_broken_diagnoses_module_is_one_line_naming_it(tmp_path):
    course = load_course(write_course(tmp_path / "c"))
    (course.checks_dir / "diagnoses.py").write_text("from grader.evidence import nothing\n")
    with pytest.raises(CourseError, match=r"diagnoses\.py: cannot be imported \(ImportError"):
        knowledge(course)


def test_two_rules_for_one_fault_are_refused(tmp_path):
    course = load_course(write_course(tmp_path / "c"))
    (course.checks_dir / "diagnoses.py").write_text(
        DIAGNOSES + '\n\n@rule("grad-not-zeroed")\ndef _again(check) -> bool:\n    return True\n')
    with pytest.raises(CourseError, match="two rules for the fault grad-not-zeroed"):
        knowledge(course)


@pytest.mark.parametrize("name, says", [("watch", "one of the grader's own probe modules"),
                                        ("not-a-name", "must be a Python name")])
def test_a_probe_module_is_named_as_a_probe_can_be(tmp_path, name, says):
    root = write_course(tmp_path / "c")
    (root / "probes").mkdir()
    (root / "probes" / f"{name}.py").write_text("def f(module):\n    return 1\n")
    with pytest.raises(CourseError, match=says):
        load_course(root)


def test_an_exercise_cannot_be_named_probes(tmp_path):
    root = write_course(tmp_path / "c")
    (root / "course.toml").write_text('name = "c"\nexercises = ["probes"]\n')
    with pytest.raises(CourseError, match="the package the course's own probes"):
        load_course(root)


def test_checks_import_their_own_courses_probes_and_courses_never_mix(tmp_path):
    a, b = (write_course(tmp_path / n) for n in "ab")
    for root, value in ((a, 1), (b, 2)):
        (root / "probes").mkdir()
        (root / "probes" / "shared.py").write_text(f"VALUE = {value}\n")
    for root, value in ((a, 1), (b, 2), (a, 1)):
        import_checks_from(root / "checks")
        import probes.shared

        assert probes.shared.VALUE == value
        assert Path(probes.shared.__file__).parent == (root / "probes").resolve()
    # A course without probes leaves none importable.
    c = write_course(tmp_path / "c")
    import_checks_from(c / "checks")
    assert "probes" not in sys.modules and "probes.shared" not in sys.modules


def test_the_worker_resolves_the_courses_probes_beside_the_graders(tmp_path, monkeypatch):
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "mine.py").write_text("def run(module, x):\n    return x + 1\n\n"
                                    "def _private(module):\n    return 0\n")
    monkeypatch.setattr(seal, "_RESOLVED", {})
    try:
        seal.load_course_probes(str(folder))
        table = seal.resolve_probes()
        assert table["mine:run"](None, 1) == 2 and "mine:_private" not in table
        assert "tracing:count_steps" in table  # the grader's own, under their names
        # Compiled under its name in the course, not the zygote's copy's folder (what a warning
        # through it shows a student), its source readable there.
        assert table["mine:run"].__code__.co_filename == "probes/mine.py"
        import linecache

        assert linecache.getline("probes/mine.py", 2) == "    return x + 1\n"
    finally:
        seal.install_course_probes(None)
        sys.path_importer_cache.pop(str(folder.resolve()), None)
