"""Every exercise's checks, through `torchgrade verify` on the shipped course: full marks for
the solution (three times, identical verdicts), zero for the stub, exactly the declared failures
for every wrong implementation in mutants/ (patches of the solution), every check
failed by at least one of them, no check passed by a hollow implementation of its targets,
generated mutants killed or marked equivalent; here too: a module's stub fails every check
as "not implemented yet", a bug hunt's stub exactly its seeded faults, and full marks for the
correct submissions in other styles in tests/styles/."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from conftest import EXERCISES, REPO, SOLUTIONS, end_to_end_checks, not_passed
from grader.course.bughunt import applicable, hunt, is_bughunt, render, scored_checks, student_path
from grader.course.registry import check_files, exercise_of, known_exercises, visibility_of_file
from conftest import run_and_score
from grader.checking.selection import CheckSelection
from grader.intake.submission import load_submission
from grader.authoring.verify import ExerciseVerdict, verify
from grader.course.folder import default_course

STYLES = REPO / "tests" / "styles"
ALL = known_exercises()
STYLE_FILES = sorted((e, p.name) for e in ALL for p in STYLES.glob(f"{e}__*.py"))


def solution(exercise: str) -> str:
    """The reference: a module's solution, or a bug hunt's fixed script."""
    if is_bughunt(exercise):
        return (SOLUTIONS / student_path(exercise)).read_text()
    return (SOLUTIONS / f"{exercise}.py").read_text()


def failures(result) -> dict[str, str]:
    return {c.id: c.message for c in result.checks if c.status != "passed"}


# The shipped course proved as any course is: `torchgrade verify` (grader/authoring/verify.py)
# grades the solution three times, the stub, every declared mutant (mutants/) and
# the first VERIFY_CAP generated mutants (a stable choice) of each exercise. Its verdicts are
# written to $TORCHGRADE_VERIFY_OUT (CI keeps them) as verify-<exercise>.json.
VERIFY_CAP = int(os.environ.get("TORCHGRADE_VERIFY_MAX_MUTANTS", "30"))
# Survivors known to be weaknesses of the checks, still to kill (not equivalent: a wrong
# solution that scores full marks), by exercise. Any other survivor fails the test. Empty: every
# survivor of the first VERIFY_CAP was killed by a check or marked equivalent in course.toml.
OPEN_SURVIVORS: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def verified(tmp_path_factory) -> dict[str, ExerciseVerdict]:
    out = Path(os.environ.get("TORCHGRADE_VERIFY_OUT") or tmp_path_factory.mktemp("verify"))
    out.mkdir(parents=True, exist_ok=True)
    verdicts: dict[str, ExerciseVerdict] = {}

    def keep(exercise: str, verdict: ExerciseVerdict) -> None:
        verdicts[exercise] = verdict
        (out / f"verify-{exercise}.json").write_text(verdict.model_dump_json(indent=2))

    verify(default_course(), ALL, max_mutants=VERIFY_CAP, jobs=2, on_exercise=keep)
    return verdicts


# The first item runs the whole verification (`verified`): ~660 gradings in pools of 2 (~210 of
# them hollow implementations), about 10 minutes on 2 idle cores; a CI machine that other jobs
# keep busy took longer.
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("exercise", ALL)
def test_verify_proves_the_shipped_exercise(verified, exercise):
    """The solution scores full marks three times with the same verdicts, the stub zero, every
    declared mutant fails exactly the checks it declares and names its diagnoses, every check is
    failed by some declared mutant, none is passed by a hollow implementation, and every
    generated mutant graded is killed or marked equivalent (with a reason) in
    course.toml."""
    verdict = verified[exercise]
    assert verdict.problems == [], verdict.problems
    assert verdict.solution_full_marks and verdict.stub_scores_zero
    assert verdict.declared_mutants.wrong == [], [w.model_dump() for w in
                                                  verdict.declared_mutants.wrong]
    assert verdict.declared_mutants.as_declared == verdict.declared_mutants.total > 0
    assert verdict.checks_never_failed == []
    # No check gives points to a function that does nothing but raise or return (hollow).
    assert verdict.hollow.total > 0 and verdict.hollow.vacuous == [], verdict.hollow
    generated = verdict.generated_mutants
    assert generated.total > 0 or VERIFY_CAP == 0
    open_ = OPEN_SURVIVORS.get(exercise, set())
    assert [s.model_dump() for s in generated.survivors if s.id not in open_] == []


@pytest.mark.parametrize("exercise", [e for e in ALL if not is_bughunt(e)])
def test_stub_scores_zero_with_a_message_on_every_check(grade_files, exercise):
    stub = (EXERCISES / f"{exercise}.py").read_text()
    result = grade_files({f"{exercise}.py": stub}, exercises=[exercise])
    assert result.score == 0 and result.checks
    for c in result.checks:
        assert c.status in ("error", "failed") and "not implemented yet" in c.message, c
        assert (c.status, c.reason) == ("error", "not_implemented"), c  # shown as "todo"


@pytest.mark.parametrize("exercise", [e for e in ALL if not is_bughunt(e)])
def test_a_missing_function_is_said_missing_by_every_check(grade_files, exercise):
    """The solution with every top-level function and class renamed: each check says the file
    defines no such name (`not_defined`), also the checks that reach it through a probe in the
    worker (which met an AttributeError and said the student's code raised it)."""
    tree = ast.parse((SOLUTIONS / f"{exercise}.py").read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            node.name += "_renamed"
    result = grade_files({f"{exercise}.py": ast.unparse(tree)}, exercises=[exercise])
    assert result.score == 0 and result.checks
    for c in result.checks:
        assert "has no attribute" not in c.message, c
        assert (c.status, c.reason) == ("error", "not_defined"), c


@pytest.mark.parametrize("exercise", [e for e in ALL if is_bughunt(e)])
def test_bughunt_stub_fails_exactly_its_seeded_faults(grade_files, exercise):
    """A bug hunt's stub is its faulty script: it scores zero, failing exactly the checks of
    its seeded faults, each naming its fault, and (beside them) only end-to-end checks whose
    subject the faults break (a run that learns less, a layer that does not learn); the checks
    of other faults pass."""
    stub = (EXERCISES / student_path(exercise)).read_text()
    result = grade_files({student_path(exercise): stub}, exercises=[exercise])
    seeded = hunt(exercise).seeded
    failing = not_passed(result)
    assert scored_checks(exercise, seeded) <= failing, failures(result)
    assert failing - scored_checks(exercise, seeded) <= end_to_end_checks(exercise), \
        failures(result)
    # (a failing guard takes a share of the copy's points, which stay what its faults are
    # worth: grader.scoring.results.scored_checks)
    assert result.score == 0 and result.max_score == 2 * len(seeded)
    assert {d for c in result.checks for d in c.diagnoses} == set(seeded)


@pytest.mark.parametrize("exercise, style", STYLE_FILES)
def test_correct_submissions_in_other_styles_score_full_marks(grade_files, exercise, style):
    """Modules and bug hunts alike: tests/styles/<exercise>__<style>.py (for a bug hunt, the
    whole fixed script written another way) passes every check that counts."""
    result = grade_files({f"{exercise}.py": (STYLES / style).read_text()}, exercises=[exercise])
    assert failures(result) == {}
    assert result.score == result.max_score > 0


def test_every_bughunt_has_correct_fixes_in_other_styles():
    """Issue 18: at least 6 correct full fixes per bug hunt, in idioms the solutions do not
    use, graded by the test above."""
    for exercise in (e for e in ALL if is_bughunt(e)):
        assert sum(e == exercise for e, _ in STYLE_FILES) >= 6, exercise


def test_missing_function_costs_only_its_checks(grade_files):
    source = solution("strides_broadcasting").replace("def to_tensor(", "def to_tensor_renamed(")
    result = grade_files({"strides_broadcasting.py": source})
    failed = failures(result)
    assert failed and all("to_tensor" in cid for cid in failed)
    assert all("defines no to_tensor" in message for message in failed.values())


def test_a_loader_that_is_the_dataset_is_said_so_not_iterated_until_the_deadline(grade_files):
    """A probe iterated a returned Dataset by index without end (its items never ran out):
    each check waited out its 60-90 s deadline and said "timed out"."""
    [source] = [m.source() for m in default_course().mutants("data_pipeline")
                if m.name == "make_worker_loader_returns_the_dataset"]
    result = grade_files({"data_pipeline.py": source}, exercises=["data_pipeline"])
    worker_checks = [c for c in result.checks if "make_worker_loader" in c.targets]
    assert len(worker_checks) == 2
    for c in worker_checks:
        assert c.status == "failed", (c.id, c.status, c.message)
        assert "returned the dataset it was given, not a DataLoader" in c.message


def test_checks_declare_points_and_the_visibility_of_their_file():
    for path in check_files():
        tree = ast.parse(path.read_text())
        tests = [f for f in tree.body
                 if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
        assert tests, path
        for fn in tests:
            marks = [d for d in fn.decorator_list
                     if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "check"]
            assert marks, f"{path.name}::{fn.name} is not a @check"
            kw = {k.arg: ast.literal_eval(k.value) for k in marks[0].keywords
                  if k.arg in ("visibility", "points")}
            assert kw.get("visibility", "hidden") == visibility_of_file(path), fn.name
            if is_bughunt(exercise_of(path)) and kw.get("visibility") == "visible":
                assert kw["points"] == 0, fn.name  # a bug hunt's points are its faults'
            else:
                assert kw["points"] > 0, fn.name


def test_check_files_hold_imports_and_checks_only():
    """One layout per exercise (checks/README.md): a check file is a docstring, imports
    and @check functions; cases, references and verifiers live in helper modules, and no check
    file imports another."""
    for path in check_files():
        tree = ast.parse(path.read_text())
        body = tree.body[1:] if ast.get_docstring(tree) else tree.body
        imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert body[:len(imports)] == imports, f"{path.name}: imports first"
        for node in body[len(imports):]:
            assert isinstance(node, ast.FunctionDef) and node.name.startswith("test_"), \
                f"{path.name}:{node.lineno} defines something other than a check"
        for node in imports:
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            assert not (module or "").startswith("test_"), \
                f"{path.name} imports the check file {module}"


BUGHUNT_FAULTS = [(e, f) for e in ALL if is_bughunt(e) for f in applicable(e)]


@pytest.mark.parametrize("exercise, fault", BUGHUNT_FAULTS,
                         ids=[f"{e}:{f}" for e, f in BUGHUNT_FAULTS])
def test_bughunt_visible_checks_reveal_no_fault(zygote, tmp_path, exercise, fault):
    """A bug hunt's visible checks are no fault detector: a copy holding any one catalogued
    fault (a variant may hold any) passes them, unless the fault makes `run` raise (then each
    of them says so) or the history's numbers stop being finite (the finiteness check)."""
    root = tmp_path / "student"
    (root / "bughunt").mkdir(parents=True)
    (root / student_path(exercise)).write_text(render(exercise, [fault]), encoding="utf-8")
    submission = load_submission(root, exercises=[exercise])
    result = run_and_score(submission, exercises=[exercise], zygote=zygote,
                        select=CheckSelection(hidden=False))
    assert result.checks and all(c.visibility == "visible" for c in result.checks)
    failed = {c.id: c for c in result.checks if c.status != "passed"}
    raised = [c for c in failed.values()
              if c.status == "error" and "run(seed=0) raised" in c.message]
    if raised:  # run() raised: every check says what it raised, and nothing else
        assert len(raised) == len(failed) == len(result.checks), failures(result)
    else:
        assert set(failed) <= {f"{exercise}.history_is_finite"}, failures(result)
