"""The check authors' API (`from grader import check, ...`): cheap to import, complete, and
documented in docs/AUTHORING.md as it is. Fast: reads sources and imports in this process."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import grader

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "AUTHORING.md"
INIT = REPO / "grader" / "__init__.py"
# What the `sub` fixture offers authors (the guide documents each; COURSE19's list, plus the
# timed call that the shipped checks use for cost contracts).
SUB_METHODS = ("call", "shared", "has", "raises", "timed_call")


def section(title: str) -> str:
    """The text of the guide's `## title` section."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def documented_signatures(text: str) -> dict[str, str]:
    """The definition-list terms of a guide section: lines that are one backticked call or
    name, e.g. "`expect_equal(got, expected, *, call, hint=None, what=\"returned\")`"."""
    out = {}
    for line in text.splitlines():
        found = re.fullmatch(r"`((?:sub\.)?[A-Za-z_]+)(\(.*\))?`", line.strip())
        if found:
            out[found.group(1)] = found.group(2) or ""
    return out


def params_of_text(signature: str) -> list[tuple[str, str, str | None]]:
    """(name, kind, default source) of a documented "(a, *, b=1)"."""
    fn = ast.parse(f"def f{signature}: pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [(p.arg, "POSITIONAL_OR_KEYWORD", ast.unparse(d) if d else None)
           for p, d in zip(positional, defaults)]
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", None))
    out += [(p.arg, "KEYWORD_ONLY", ast.unparse(d) if d else None)
            for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", None))
    return out


def params_of(fn) -> list[tuple[str, str, str | None]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind.name, None if p.default is p.empty else repr(p.default))
            for p in sig.parameters.values() if p.name != "self"]


def same_default(doc: str | None, real: str | None) -> bool:
    if doc is None or real is None:
        return doc == real
    return ast.literal_eval(doc) == ast.literal_eval(real)


def test_import_grader_imports_nothing():
    """`grader/__init__.py` has no import at its top level (the worker parent imports it before
    forking student workers; torch, pytest and the checks' modules load on first use of an
    API name), and only `__getattr__` imports, lazily, `grader.api`."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    assert [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))] == []
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert functions == {"__getattr__", "__dir__"}


def test_every_api_name_resolves_from_grader():
    import grader.api

    assert grader.__all__ == grader.api.__all__
    for name in grader.__all__:
        assert getattr(grader, name) is getattr(grader.api, name), name
    assert set(grader.__all__) <= set(dir(grader))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        grader.nothing_here  # noqa: B018


def test_the_api_is_the_graders_own_objects():
    """Re-exports, not copies: a check written with them behaves as the shipped checks do."""
    from grader.checking import compare, student
    from grader.course import registry

    assert grader.check is registry.check
    assert grader.fail is compare.fail and grader.CheckFailure is compare.CheckFailure
    assert grader.StudentError is student.StudentError
    assert grader.StudentModule is student.StudentModule


def test_every_api_name_is_documented_with_its_signature():
    """Each name of `grader.__all__` is a term of the guide's "The check API" section, and a
    callable's documented parameters (names, kinds, defaults) are its real ones."""
    terms = documented_signatures(section("The check API"))
    assert sorted(set(grader.__all__) - set(terms)) == []
    for name in grader.__all__:
        obj = getattr(grader, name)
        if not terms[name]:
            continue
        real = params_of(obj.__init__ if inspect.isclass(obj) else obj)
        doc = params_of_text(terms[name])
        assert [(n, k) for n, k, _ in doc] == [(n, k) for n, k, _ in real], name
        for (n, _, d), (_, _, r) in zip(doc, real):
            assert same_default(d, r), f"{name}: {n}={d} documented, {r} in the code"


def test_the_sub_fixture_is_documented_as_it_is():
    from grader.checking import plugin
    from grader.checking.student import StudentModule

    assert hasattr(plugin, "sub") and hasattr(plugin, "evidence")  # the fixtures checks ask for
    terms = documented_signatures(section("The `sub` fixture"))
    for method in SUB_METHODS:
        term = f"sub.{method}"
        assert term in terms, f"{term} not documented"
        real = [(n, k) for n, k, _ in params_of(getattr(StudentModule, method))]
        doc = [(n, k) for n, k, _ in params_of_text(terms[term])]
        # The documentation may name a positional parameter by what it holds (ExcType).
        assert [k for _, k in doc] == [k for _, k in real], term
        assert [n for n, k in doc if k == "KEYWORD_ONLY"] == \
            [n for n, k in real if k == "KEYWORD_ONLY"], term


def test_the_signature_reader_catches_a_wrong_documentation():
    """The check above can fail: a default or a keyword-only marker documented wrongly."""
    from grader.checking.compare import expect_equal

    real = params_of(expect_equal)
    assert params_of_text('(got, expected, *, call, hint=None, what="returned")') == \
        [(n, k, None if d is None else repr(ast.literal_eval(d))) for n, k, d in real]
    assert params_of_text("(got, expected, call, hint=None)") != real
    assert not same_default("'x'", "'y'")

