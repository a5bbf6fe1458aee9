"""The checks of `strides_broadcasting`: full marks for the solution, zero for the stub, and
every check fails on at least one wrong implementation (strides_mutants.py)."""

import pytest

from conftest import EXERCISES, REPO, SOLUTIONS, not_passed
from grader.registry import check_files
from strides_mutants import MUTANTS

STYLES = REPO / "tests" / "styles"

EXERCISE = "strides_broadcasting"
SOLUTION = (SOLUTIONS / f"{EXERCISE}.py").read_text()


def test_solution_scores_full_marks_every_time(grade_files):
    runs = [grade_files({f"{EXERCISE}.py": SOLUTION}) for _ in range(3)]
    for result in runs:
        assert not_passed(result) == set(), [c.message for c in result.checks if c.status != "passed"]
        assert result.score == result.max_score > 0
    assert len({tuple((c.id, c.status) for c in r.checks) for r in runs}) == 1


def test_stub_scores_zero_with_a_message_on_every_check(grade_files):
    result = grade_files({f"{EXERCISE}.py": (EXERCISES / f"{EXERCISE}.py").read_text()})
    assert result.score == 0 and result.checks
    for c in result.checks:
        assert c.status in ("error", "failed") and "not implemented yet" in c.message, c


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_fails_exactly_its_checks(grade_files, mutant):
    result = grade_files({f"{EXERCISE}.py": SOLUTION + "\n\n" + mutant.code})
    assert not_passed(result) == set(mutant.fails), {
        c.id: c.message for c in result.checks if c.status != "passed"}


def test_every_check_fails_on_some_mutant(grade_files):
    result = grade_files({f"{EXERCISE}.py": SOLUTION})
    every = {c.id for c in result.checks}
    caught = set().union(*(m.fails for m in MUTANTS))
    assert every - caught == set(), "checks no mutant fails"
    assert caught - every == set(), "mutants name checks that do not exist"


def test_missing_function_costs_only_its_checks(grade_files):
    source = SOLUTION.replace("def to_tensor(", "def to_tensor_renamed(")
    result = grade_files({f"{EXERCISE}.py": source})
    failed = {c.id for c in result.checks if c.status != "passed"}
    assert failed and all("to_tensor" in cid for cid in failed)
    assert all("defines no to_tensor" in c.message for c in result.checks if c.id in failed)


def test_checks_declare_points_targets_and_matching_visibility():
    from grader.registry import visibility_of_file
    import ast

    for path in check_files():
        tree = ast.parse(path.read_text())
        tests = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
        assert tests, path
        for fn in tests:
            marks = [d for d in fn.decorator_list if isinstance(d, ast.Call)
                     and getattr(d.func, "id", "") == "check"]
            assert marks, f"{path.name}::{fn.name} is not a @check"
            kw = {k.arg: ast.literal_eval(k.value) for k in marks[0].keywords
                  if k.arg in ("visibility", "points")}
            assert kw.get("visibility", "hidden") == visibility_of_file(path), fn.name
            assert kw["points"] > 0


@pytest.mark.parametrize("body", [
    "return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)",
    "out = np.zeros((len(a), len(b)))\n    for k in range(a.shape[1]):\n"
    "        out += (a[:, k, None] - b[None, :, k]) ** 2\n    return out",
    "return np.maximum(np.einsum('ij,ij->i', a, a)[:, None] + np.einsum('ij,ij->i', b, b)"
    " - 2 * np.einsum('ik,jk->ij', a, b), 0)",
])
def test_other_vectorised_styles_pass(grade_files, body):
    code = SOLUTION + f"\n\ndef pairwise_sq_dists(a, b):\n    {body}\n"
    assert not_passed(grade_files({f"{EXERCISE}.py": code})) == set()


@pytest.mark.parametrize("style", sorted(p.name for p in STYLES.glob(f"{EXERCISE}_*.py")))
def test_correct_submissions_in_other_styles_score_full_marks(grade_files, style):
    result = grade_files({f"{EXERCISE}.py": (STYLES / style).read_text()})
    assert not_passed(result) == set(), {c.id: c.message for c in result.checks
                                         if c.status != "passed"}
