"""What a shipped check must not reach: what a release leaves out (`refuse_unshipped_reach`).

A release ships the visible checks and the helper modules they import by an import statement
(`grader.release.build.check_helpers`), and leaves out the reference solutions and every helper
only hidden checks may use (`checks/*_hidden.py`). A shipped check that still reaches them works
in the full grader and fails for every student: the release refuses it.

What this static reading of the shipped check files sees (their syntax trees, docstrings aside):

- the grader's door to the solutions, `solution_module` (and `solutions_dir`), named in code, as
  an imported name, or as a string (`getattr(grader, "solution_module")`);
- any string naming a hidden helper or a hidden check file (`"m_cases_hidden"`, or anything
  ending in `_hidden`) or a path into `solutions/`, or a module of the course's checks folder
  at all when it is imported dynamically; strings built from constants (`"m_" + "hidden"`,
  f-strings without fields, `"".join([...])`) are folded first;
- a dynamic import or evaluation whose argument it cannot fold to a constant
  (`importlib.import_module(name)`, `__import__`, `spec_from_file_location`, `runpy`, `exec`,
  `eval`), a `getattr` with a computed name on `grader`, `importlib`, `builtins`, `sys` or
  `runpy`, and `sys.modules[...]` with a computed key: what they reach cannot be known, so a
  shipped check may not use them.

What it cannot see: code that hides these behind values computed at run time in other ways
(a name read from a file, a function object passed around, `globals()` tricks), or reaches the
solutions through the file system (`open("../solutions/x.py")`). Those fail in a release as they
would anyway; the leak scan still keeps the solutions and hidden checks out of it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from grader.course.registry import visibility_of_file

SOLUTION_DOORS = {"solution_module", "solutions_dir"}
BUILTIN_CALLS = {"__import__", "exec", "eval"}
IMPORT_MODULES = {"importlib", "runpy", "imp", "pkgutil"}
DYNAMIC_CALLS = BUILTIN_CALLS | {"import_module", "spec_from_file_location", "SourceFileLoader",
                                 "run_path", "run_module", "load_source", "find_spec"}
MODULE_ROOTS = {"grader", "importlib", "builtins", "__builtins__", "sys", "runpy"}
_SOLUTIONS = re.compile(r"(?:^|[/\\])solutions[/\\]")  # a path into the solutions folder
_HIDDEN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9_]*_hidden(?![A-Za-z0-9_])")


class UnshippedReach(Exception):
    """A shipped check reaches what a release leaves out; the message (one line) says where."""


def refuse_unshipped_reach(files: list[Path], checks_dir: Path) -> None:
    """Raise UnshippedReach for the first of `files` (shipped check files and helpers) that
    reaches a solution or a hidden helper in a way the module docstring lists."""
    course_modules = {p.stem for p in checks_dir.glob("*.py")}
    hidden = {p.stem for p in checks_dir.glob("*.py") if visibility_of_file(p) == "hidden"}
    for path in files:
        problem = _first_problem(ast.parse(path.read_text(encoding="utf-8")), course_modules,
                                 hidden)
        if problem:
            line, what = problem
            raise UnshippedReach(
                f"{path.name}, line {line}: {what}; it ships to students, who have no "
                "solutions and no hidden helpers, so its checks would fail there (only hidden "
                "checks may use them)")


def _first_problem(tree: ast.Module, course_modules: set[str],
                   hidden: set[str]) -> tuple[int, str] | None:
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    modules = _imported_names(tree)
    found = []
    for node in ast.walk(tree):
        what = _problem(node, docstrings, modules, course_modules, hidden)
        if what:
            found.append((getattr(node, "lineno", 0), what))
    return min(found) if found else None


def _problem(node: ast.AST, docstrings: set[int], modules: dict[str, str],
             course_modules: set[str], hidden: set[str]) -> str | None:
    if isinstance(node, ast.Name) and node.id in SOLUTION_DOORS:
        return f"it uses {node.id} (the reference solutions)"
    if isinstance(node, ast.Attribute) and node.attr in SOLUTION_DOORS:
        return f"it uses {node.attr} (the reference solutions)"
    if isinstance(node, ast.alias) and node.name.split(".")[-1] in SOLUTION_DOORS:
        return f"it imports {node.name} (the reference solutions)"
    if isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call)) and \
            id(node) not in docstrings:
        text = _folded(node)
        if text is not None:
            named = _named(text, hidden)
            if named:
                return f"it names {named!r}"
    if isinstance(node, ast.Call):
        return _call_problem(node, modules, course_modules)
    if isinstance(node, ast.Subscript) and _dotted(node.value) == "sys.modules" and \
            _folded(node.slice) is None:
        return "it reads sys.modules with a computed name"
    return None


def _named(text: str, hidden: set[str]) -> str | None:
    """What a string names that only hidden checks may use: a solution door, a hidden module."""
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        if word in SOLUTION_DOORS or word in hidden:
            return word
    match = _HIDDEN.search(text) or _SOLUTIONS.search(text)
    return match.group(0) if match else None


def _call_problem(node: ast.Call, modules: dict[str, str],
                  course_modules: set[str]) -> str | None:
    called = _dotted(node.func)
    head, _, rest = called.partition(".")
    resolved = f"{modules.get(head, head)}.{rest}" if rest else modules.get(head, head)
    name = resolved.rsplit(".", 1)[-1]
    builtin = called == name or resolved.split(".")[0] in ("builtins", "__builtins__")
    if name in DYNAMIC_CALLS and (builtin if name in BUILTIN_CALLS else
                                  resolved.split(".")[0] in IMPORT_MODULES):
        if not node.args:
            return f"it calls {name} with no name the release can read"
        target = _folded(node.args[0])
        if target is None:
            return (f"it calls {name} with a computed argument (the release cannot see what "
                    "it reaches: import helpers with an import statement)")
        module = target.removesuffix(".py").replace("\\", "/").rsplit("/", 1)[-1].split(".")[0]
        if name not in ("exec", "eval") and module in course_modules:
            return (f"it imports the course module {module} dynamically (import helpers with "
                    "an import statement, so that the release ships them)")
    if name == "getattr" and len(node.args) >= 2 and _folded(node.args[1]) is None:
        dotted = _dotted(node.args[0])
        root = dotted.split(".")[0]
        if modules.get(root, root).split(".")[0] in MODULE_ROOTS and \
                (root in modules or root == "__builtins__"):
            return f"it calls getattr on {dotted} with a computed name"
    return None


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """The names the import statements of `tree` bind, with what they stand for: `il` ->
    `importlib` for `import importlib as il`, `im` -> `importlib.import_module` for `from
    importlib import import_module as im`."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else \
                    a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _folded(node: ast.AST) -> str | None:
    """The value of a string expression built from constants only, else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        parts = [_folded(v) for v in node.values]
        return None if None in parts else "".join(p for p in parts if p is not None)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "join" and len(node.args) == 1 and \
            isinstance(node.args[0], (ast.List, ast.Tuple)):
        sep = _folded(node.func.value)
        parts = [_folded(e) for e in node.args[0].elts]
        return None if sep is None or None in parts else sep.join(p for p in parts if p is not None)
    return None
