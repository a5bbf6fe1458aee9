"""CURRICULUM.md, the exercise contract, is generated from the stubs and matches the solutions.

Fast: reads files only (no sandbox, no worker). The committed file must be what
`python -m grader.release.curriculum` writes, so a stub's docstring and the contract cannot
disagree; every public definition of every stub is in it; and every solution defines what its stub
defines with the same call signature, so the contract cannot drift from the reference either.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from conftest import EXERCISES, REPO
from grader.release import curriculum, notebooks
from grader.release.curriculum import COMMAND, curriculum_markdown, public_names
from grader.release.notebooks import solution_path, stub_path
from grader.course.registry import known_exercises

pytestmark = pytest.mark.fast  # no sandbox: part of `pytest -m fast`

EXERCISE_IDS = known_exercises()


def section(text: str, exercise: str) -> str:
    """The part of CURRICULUM.md about `exercise`: from its heading to the next one."""
    start = text.index(f"\n## `{exercise}`: ")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_committed_curriculum_is_generated_from_the_stubs():
    committed = (REPO / "CURRICULUM.md").read_text(encoding="utf-8")
    assert committed == curriculum_markdown(), \
        f"CURRICULUM.md differs from the stubs' docstrings: regenerate it with `{COMMAND}`"
    assert committed.startswith("<!-- Generated") and COMMAND in committed.splitlines()[0]


def test_every_stub_is_an_exercise_of_the_curriculum():
    """A stub no registered exercise owns would be left out of the contract."""
    stubs = {p.relative_to(EXERCISES) for p in EXERCISES.rglob("*.py")
             if p.name != "__init__.py" and "__pycache__" not in p.parts}
    owned = {stub_path(e).relative_to(notebooks.exercises_root()) for e in EXERCISE_IDS}
    assert stubs == owned


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_every_public_name_of_the_stub_is_in_its_section(exercise):
    text = section(curriculum_markdown(), exercise)
    names = public_names(stub_path(exercise))
    assert names
    for name in names:
        assert f"def {name}(" in text or f"class {name}" in text, name
        if "/" not in stub_path(exercise).relative_to(notebooks.exercises_root()).as_posix():
            assert f"### `{name}`" in text, name


def test_general_rules_and_pitfalls_are_in_the_contract():
    text = curriculum_markdown()
    assert "General rules for every exercise" in text
    assert "raise `ValueError`" in text
    pitfalls = text[text.index(curriculum.PITFALLS_HEADING):]
    assert "`grad-not-zeroed`: Gradients never zeroed" in pitfalls
    assert "`no-shuffle-sorted-data`" in pitfalls


def test_a_docstring_edit_changes_the_contract(tmp_path, monkeypatch):
    """The contract is read from the stubs, not kept beside them."""
    copy = tmp_path / "exercises"
    shutil.copytree(notebooks.exercises_root(), copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    stub = copy / "strides_broadcasting.py"
    stub.write_text(stub.read_text(encoding="utf-8").replace(
        "Byte strides of a C-ordered", "Byte offsets of a C-ordered"), encoding="utf-8")
    monkeypatch.setattr(notebooks, "exercises_root", lambda: copy)
    monkeypatch.setattr(curriculum, "exercises_root", lambda: copy)
    text = curriculum_markdown()
    assert "Byte offsets of a C-ordered" in section(text, "strides_broadcasting")
    assert text != (REPO / "CURRICULUM.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- solutions


def call_signature(fn: ast.FunctionDef) -> list[tuple[str, str, str | None]]:
    """(kind, name, default) of every parameter: how a caller may call it. Annotations are
    documentation and may differ."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [("positional-only" if i < len(args.posonlyargs) else "positional", a.arg,
            None if d is None else ast.unparse(d))
           for i, (a, d) in enumerate(zip(positional, defaults, strict=True))]
    if args.vararg:
        out.append(("*", args.vararg.arg, None))
    out += [("keyword-only", a.arg, None if d is None else ast.unparse(d))
            for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg:
        out.append(("**", args.kwarg.arg, None))
    return out


def definitions(path: Path) -> dict[str, ast.FunctionDef]:
    """Every public top-level function and every method of a public class (`Cls.method`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = {}
    for node in curriculum.public_definitions(tree):
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
            continue
        for method in node.body:
            if isinstance(method, ast.FunctionDef) and curriculum.is_public(method.name):
                out[f"{node.name}.{method.name}"] = method
    return out


def matches(stub: list, solution: list) -> bool:
    """The solution accepts every call the stub's contract allows: the same parameters, plus
    at most private ones with defaults at the end (e.g. Value's `_children`)."""
    extra = solution[len(stub):]
    return (solution[:len(stub)] == stub
            and all(name.startswith("_") and default is not None for _, name, default in extra))


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_solution_has_the_stubs_definitions_and_signatures(exercise):
    solution = solution_path(exercise)
    assert solution is not None, f"no solution for {exercise}"
    stub_defs, solution_defs = definitions(stub_path(exercise)), definitions(solution)
    assert set(stub_defs) - set(solution_defs) == set()
    for name, fn in stub_defs.items():
        expected, got = call_signature(fn), call_signature(solution_defs[name])
        assert matches(expected, got), (name, expected, got)


def test_signature_comparison_sees_a_renamed_parameter_and_a_new_default():
    stub = call_signature(ast.parse("def f(x, step=1): ...").body[0])
    assert matches(stub, call_signature(ast.parse("def f(x, step=1, _cache=None): ...").body[0]))
    for drifted in ("def f(x, stride=1): ...", "def f(x, step=2): ...", "def f(x, step): ...",
                    "def f(x, step=1, extra=0): ...", "def f(x, *, step=1): ..."):
        assert not matches(stub, call_signature(ast.parse(drifted).body[0])), drifted
