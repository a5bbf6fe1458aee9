"""Generated mutants (grader/authoring/mutation.py): every operator makes its change, every
mutant compiles and differs from the original and from the others, what must be left alone is,
and ids survive unrelated edits. Fast: no grading."""

from __future__ import annotations

import ast

import pytest

from grader.authoring.mutation import CLIP, OPERATORS, generate
from grader.authoring.verify import choose

pytestmark = pytest.mark.fast

SOURCE = '''"""Module docstring: 1 + 2 > 0."""
import numpy as np
from typing import Any

EPS = 1e-8


def softmax_rows(x: np.ndarray, flag: bool = True) -> np.ndarray:
    """Its docstring: 3 > 2 and not 4."""
    shifted = x - x.max(axis=1, keepdims=True)  # a comment that stays
    e = np.exp(shifted)
    total = e.sum(1)
    out: list[Any] = []
    out.append(total)
    if x.ndim < 2 and not flag:
        raise ValueError(f"need 2-d, got {x.ndim + 7}")
    for i in range(3):
        if i == 1 or flag:
            continue
    y = x.transpose(0, 1)
    y = pow(y, 2)
    total *= 2
    return e / total[:, None]


if __name__ == "__main__":
    print(softmax_rows(np.ones((2, 3)) + 5))
'''

EXPECTED = {  # operator -> changes it must make (exactly as `change` says them)
    "arithmetic": ["`x - x.max(axis=1, keepdims=True)` -> `x + x.max(axis=1, keepdims=True)` "
                   "in softmax_rows", "`total *= 2` -> `total /= 2` in softmax_rows",
                   "`e / total[:, None]` -> `e * total[:, None]` in softmax_rows"],
    "constant": ["`1e-8` -> `0.0` at module level", "`None` -> `0` in softmax_rows",
                 "`True` -> `False` in softmax_rows", "`3` -> `4` in softmax_rows"],
    "comparison": ["`x.ndim < 2` -> `x.ndim <= 2` in softmax_rows",
                   "`i == 1` -> `i != 1` in softmax_rows"],
    "dims": ["`axis=1` -> `axis=0` in softmax_rows", "`keepdims=True` -> `keepdims=False` in "
             "softmax_rows", "`e.sum(1)` -> `e.sum(0)` in softmax_rows",
             "`x.transpose(0, 1)` -> `x.transpose(1, 1)` in softmax_rows",
             "`x.transpose(0, 1)` -> `x.transpose(0, 0)` in softmax_rows"],
    "drop-call": ["`out.append(total)` removed in softmax_rows"],
    "drop-statement": ["`total *= 2` removed in softmax_rows", "`continue` removed in "
                       "softmax_rows", "`y = pow(y, 2)` removed in softmax_rows",
                       "`return e / total[:, None]` -> `return None` in softmax_rows"],
    "swap-args": ["`pow(y, 2)` -> `pow(2, y)` in softmax_rows"],
    "and-or": ["`x.ndim < 2 and not flag` -> `x.ndim < 2 or not flag` in softmax_rows",
               "`i == 1 or flag` -> `i == 1 and flag` in softmax_rows"],
    "not": ["`not flag` -> `flag` in softmax_rows",
            "`i == 1 or flag` -> `not (i == 1 or flag)` in softmax_rows"],
}


@pytest.fixture(scope="module")
def mutants():
    return generate(SOURCE, filename="solutions/m.py")


def by_change(mutants):
    return {m.change: m for m in mutants}


def test_every_operator_makes_its_changes(mutants):
    changes = {(m.operator, m.change) for m in mutants}
    for operator, wanted in EXPECTED.items():
        for change in wanted:
            assert (operator, change) in changes, (operator, change, sorted(
                c for o, c in changes if o == operator))
    assert {m.operator for m in mutants} == set(OPERATORS)


def test_the_raise_is_dropped_but_its_message_left_alone(mutants):
    raised = [m for m in mutants if m.change.startswith("`raise ValueError")]
    assert [m.operator for m in raised] == ["drop-statement"]
    assert not any("x.ndim + 7" in m.change and not m.change.startswith("`raise")
                   for m in mutants)


def test_every_mutant_compiles_differs_and_is_unique(mutants):
    original = ast.dump(ast.parse(SOURCE))
    sources = [m.source for m in mutants]
    assert len(set(sources)) == len(sources)
    for m in mutants:
        compile(m.source, m.where, "exec")
        assert ast.dump(ast.parse(m.source)) != original, m.change
        assert m.where == f"solutions/m.py:{m.line}"
        assert m.before == SOURCE.splitlines()[m.line - 1].strip()
        assert m.before != m.after, m.change


def test_only_the_changed_text_changes(mutants):
    """The mutant is the original with one node's text replaced: comments and layout stay."""
    m = by_change(mutants)["`axis=1` -> `axis=0` in softmax_rows"]
    assert m.source == SOURCE.replace("x.max(axis=1,", "x.max(axis=0,")
    assert m.after == "shifted = x - x.max(axis=0, keepdims=True)  # a comment that stays"
    dropped = by_change(mutants)["`out.append(total)` removed in softmax_rows"]
    assert dropped.source == SOURCE.replace("    out.append(total)\n", "    pass\n")


def test_what_is_left_alone(mutants):
    lines = SOURCE.splitlines()
    main = lines.index('if __name__ == "__main__":') + 1
    docstrings = {1, lines.index('    """Its docstring: 3 > 2 and not 4."""') + 1}
    imports = {2, 3}
    for m in mutants:
        assert m.line < main, m.change                       # the __main__ block
        assert m.line not in docstrings | imports, m.change
        head = m.source.splitlines()[7]
        assert head.startswith("def softmax_rows(x: np.ndarray, flag: bool = ")  # annotations
        assert head.endswith(") -> np.ndarray:")
        assert "out: list[Any] = []" in m.source
    assert not any("print" in m.change for m in mutants)


def test_generation_is_deterministic(mutants):
    again = generate(SOURCE, filename="solutions/m.py")
    assert [(m.id, m.change, m.source) for m in again] == \
        [(m.id, m.change, m.source) for m in mutants]
    assert len({m.id for m in mutants}) == len(mutants)


def test_ids_survive_unrelated_edits(mutants):
    """A line added elsewhere (a new function, a comment) moves the lines, not the ids."""
    edited = SOURCE.replace("EPS = 1e-8\n", "EPS = 1e-8\n\n\ndef other(a, b):\n"
                            "    return a + b * 2  # new\n")
    again = generate(edited, filename="solutions/m.py")
    old = {m.id: m.change for m in mutants}
    new = {m.id: m.change for m in again}
    assert old.items() <= new.items()
    assert any(c.endswith("in other") for c in new.values())
    shifted = {m.id: m.line for m in again}
    assert all(shifted[m.id] == m.line + (4 if m.line > 5 else 0) for m in mutants)


def test_a_repeated_change_gets_one_id_per_occurrence():
    source = "def f(a):\n    b = a + 1\n    c = a + 1\n    return b * c\n"
    plus = [m for m in generate(source, filename="f.py")
            if m.change == "`a + 1` -> `a - 1` in f"]
    assert len(plus) == 2 and plus[0].id != plus[1].id


def test_precedence_is_kept_when_a_change_needs_parentheses():
    source = "def f(a, b, c):\n    return a * (b + c) - -a\n"
    for m in generate(source, filename="f.py"):
        ns: dict = {}
        exec(compile(m.source, "f.py", "exec"), ns)  # noqa: S102 - our own test text
        tree = ast.parse(m.source)
        assert isinstance(tree.body[0], ast.FunctionDef)
    swapped = {m.change: m for m in generate(source, filename="f.py")}
    assert "`-a` -> `a` in f" in swapped
    assert swapped["`-a` -> `a` in f"].after == "return a * (b + c) - a"


def test_a_file_that_does_not_parse_gives_no_mutants():
    assert generate("def f(:\n", filename="f.py") == []


def test_the_cap_chooses_the_same_mutants_whatever_the_order(mutants):
    capped = choose(mutants, 5)
    assert len(capped) == 5
    assert [m.id for m in choose(list(reversed(mutants)), 5)] == [m.id for m in capped]
    assert choose(mutants, None) == sorted(mutants, key=lambda m: m.id)


def test_arguments_that_commute_are_not_swapped():
    source = "import numpy as np\n\ndef f(a, b):\n    return np.maximum(a, b) + np.clip(a, b, 1)\n"
    swaps = [m.change for m in generate(source, filename="f.py") if m.operator == "swap-args"]
    assert swaps == ["`np.clip(a, b, 1)` -> `np.clip(b, a, 1)` in f",
                     "`np.clip(a, b, 1)` -> `np.clip(a, 1, b)` in f"]


def test_two_changes_in_one_long_expression_read_differently():
    terms = " + ".join(f"weight_{i} * feature_{i}" for i in range(8))
    source = f"def f(**kw):\n    return {terms}\n"
    assert len(terms) > 2 * CLIP
    plus = [m.change for m in generate(source, filename="f.py") if m.operator == "arithmetic"
            and "+" in m.change.split("->")[0] and "-" in m.change.split("->")[1]]
    assert len(plus) == 7 and len(set(plus)) == 7, plus
