"""The floor plan: `grader/` is a pipeline of stages, and no module imports one from a later
stage (imports inside functions count too), and no import cycle. Fast: reads sources only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

GRADER = Path(__file__).resolve().parents[1] / "grader"

# The order of the pipeline. A module may import its own stage and earlier ones only.
STAGES = [
    ("grader", "grader.errors", "grader.models", "grader.evidence", "grader.worker",
     "grader.probes"),  # foundations: the types between stages, the sandbox
    ("grader.course",),     # what is graded: exercises, checks registry, fault catalogue
    ("grader.intake",),     # submissions found, read, fingerprinted; assignments
    ("grader.checking", "grader.api"),  # the checks' plugin, student proxy, comparisons,
                            # selection; the check authors' API (`from grader import check`)
    ("grader.running",),    # one submission, a batch, the pool
    ("grader.scoring",),    # results assembled, diagnosed, weighted
    ("grader.similarity",),  # files of one exercise compared across a class (no code runs)
    ("grader.outputs",),    # results.json, reports, index, terminal, exports
    ("grader.release",),    # what instructors hand out
    ("grader.authoring",),  # what helps instructors write a course (new-exercise, verify)
    ("grader.grading",),    # a class graded into OUT: one submission's steps, the one place a
                            # result is finished, the one writer of OUT, OUT's bookkeeping
    ("grader.commands",),   # one module per command
    ("grader.cli", "grader.jupyter", "grader.checkserver", "grader.__main__"),  # entry points
]


def stage_of(module: str) -> int:
    best, rank = "", None
    for i, prefixes in enumerate(STAGES):
        for p in prefixes:
            inside = module == p or (p != "grader" and module.startswith(p + "."))
            if inside and len(p) > len(best):
                best, rank = p, i
    assert rank is not None, f"{module} is in no stage of the floor plan"
    return rank


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(GRADER.rglob("*.py")):
        rel = path.relative_to(GRADER.parent).with_suffix("")
        if "samples" in rel.parts:
            continue
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The grader modules `name` imports (also inside functions), as module names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        found |= {c for c in candidates if c in known and c != name}
    return found


# Imports allowed up the floor plan, each with why. Only one: `grader/__init__.py` re-exports
# the check authors' API (`from grader import check`) by importing `grader.api` inside its
# PEP 562 `__getattr__`, on first use of one of those names; `import grader` (which the worker
# parent does before forking student workers) loads nothing of the later stages.
# `test_the_lazy_reexport_stays_lazy` proves that import is inside that function only.
LAZY_REEXPORTS = {("grader", "grader.api")}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """Who imports whom, the allowed lazy re-exports left out."""
    mods = modules()
    return {name: {t for t in imports(name, path, set(mods)) if (name, t) not in LAZY_REEXPORTS}
            for name, path in mods.items()}


def test_every_module_is_in_a_stage(graph):
    for name in graph:
        stage_of(name)


def test_no_module_imports_a_later_stage(graph):
    back = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if stage_of(b) > stage_of(a))
    assert back == []


def test_no_import_cycle(graph):
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_floor_plan_catches_an_arrow_back_up():
    """The check itself can fail: a running module importing an output is caught."""
    assert stage_of("grader.outputs.report") > stage_of("grader.running.pool")
    assert stage_of("grader.course.registry") < stage_of("grader.intake.submission")
    with pytest.raises(AssertionError, match="no stage"):
        stage_of("grader.somewhere_new")


def test_the_lazy_reexport_stays_lazy():
    """`grader/__init__.py` imports no module at its top level (beyond the standard library's)
    and imports `grader.api` only inside `__getattr__`: the exception above is exactly that."""
    path = GRADER / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert top == [], "grader/__init__.py imports at its top level"
    known = set(modules())
    assert imports("grader", path, known) == {"grader.api"}
    lazy = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
    inside = [n for n in ast.walk(lazy) if isinstance(n, ast.ImportFrom)]
    assert [(n.module, [a.name for a in n.names]) for n in inside] == [("grader", ["api"])]
