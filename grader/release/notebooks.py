"""Student notebooks, generated from the stubs: one per exercise module.

A notebook holds, in the stub's order: an introduction (the module docstring: the concept), a
code cell with the module's imports and other top-level code, then for every function and class
a markdown cell with its contract and worked example (its docstring, rendered: `>>>` examples
and indented code become code blocks) and a code cell with its stub (without the docstring, which
is just above), followed by a "check your work" cell when visible checks are about it; at the
end a cell that checks the whole exercise. Nothing is retyped: every word comes from the stub,
so the notebooks cannot drift from it.

A "check your work" cell calls `grader.jupyter.check`, which sends the cells run so far to the
grader in a separate process; the checks run there against a sandboxed worker, never in the
kernel. Graded notebooks skip these cells (`grader.intake.notebook.is_check_cell`).

Cells carry metadata `{"torchgrade": {"role": ..., "name": ...}}` (roles: intro, code, doc,
stub, check) and stable ids, so that generating twice gives identical files and
`fill_solutions` can put an answer key in the stub cells.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

import grader
from grader.course.folder import active_course

CHECK_IMPORT = "from grader.jupyter import check"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


# --------------------------------------------------------------------------- finding stubs


def exercises_root() -> Path:
    return active_course().exercises_dir


def solutions_root() -> Path:
    return active_course().solutions_dir


def module_path(exercise: str, root: Path) -> Path | None:
    """`root/<exercise>.py`, or a module in a subfolder: `root/**/<exercise>.py`, or (for ids
    like `bughunt_mnist`) `root/bughunt/mnist.py`."""
    direct = root / f"{exercise}.py"
    if direct.is_file():
        return direct
    nested = sorted(p for p in root.rglob(f"{exercise}.py") if "__pycache__" not in p.parts)
    if nested:
        return nested[0]
    folder, _, name = exercise.partition("_")
    candidate = root / folder / f"{name}.py"
    return candidate if name and candidate.is_file() else None


def stub_path(exercise: str) -> Path:
    path = module_path(exercise, exercises_root())
    if path is None:
        raise FileNotFoundError(f"no stub for the exercise {exercise!r} in {exercises_root()}")
    return path


def solution_path(exercise: str) -> Path | None:
    return module_path(exercise, solutions_root())


# --------------------------------------------------------------------------- reading a stub


@dataclass(frozen=True)
class Part:
    """A run of top-level code (`name` None) or one function/class definition of a module."""

    name: str | None
    code: str             # the source, without the definition's docstring
    doc: str | None = None
    signature: str = ""   # `softmax_rows(x, dim)`, `MLP(in_dim, hidden, ...)`


def module_parts(source: str) -> tuple[str, list[Part]]:
    """The module docstring and the module's top-level parts, in order. Comments travel with
    the statement below them; consecutive plain statements form one part."""
    tree = ast.parse(source)
    lines = source.splitlines()
    body = list(tree.body)
    module_doc = ast.get_docstring(tree) or ""
    if body and _is_docstring(body[0]):
        body = body[1:]
    parts: list[Part] = []
    plain_start: int | None = None  # first line of a run of plain statements
    previous_end = _docstring_end(tree)
    for node in body:
        start, end = previous_end, _end(node)
        previous_end = end
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if plain_start is None:
                plain_start = start
            continue
        if plain_start is not None:
            parts.append(Part(None, _trim(lines[plain_start:start])))
            plain_start = None
        chunk = lines[start:end]
        doc = ast.get_docstring(node)
        if doc is not None and len(node.body) > 1:
            first = node.body[0]
            drop = set(range(first.lineno - 1 - start, _end(first) - start))
            chunk = [line for i, line in enumerate(chunk) if i not in drop]
        parts.append(Part(node.name, _trim(chunk), doc, _signature(node)))
    if plain_start is not None:
        parts.append(Part(None, _trim(lines[plain_start:])))
    else:
        trailing = _trim(lines[previous_end:])
        if trailing and parts:  # comments after the last statement
            last = parts[-1]
            parts[-1] = Part(last.name, last.code + "\n" + trailing, last.doc, last.signature)
    return module_doc, [p for p in parts if p.code.strip()]


def _is_docstring(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _docstring_end(tree: ast.Module) -> int:
    return _end(tree.body[0]) if tree.body and _is_docstring(tree.body[0]) else 0


def _end(node: ast.stmt) -> int:
    """The last line of a parsed statement (typeshed allows None, for nodes made by hand)."""
    assert node.end_lineno is not None
    return node.end_lineno


def _trim(lines: list[str]) -> str:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(lines)


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                     and n.name == "__init__"), None)
        if init is None:
            return node.name
        args = ast.unparse(_without_annotations(init.args))
        return f"{node.name}({args.removeprefix('self, ').removeprefix('self')})"
    return f"{node.name}({ast.unparse(_without_annotations(node.args))})"


def _without_annotations(args: ast.arguments) -> ast.arguments:
    copy = ast.arguments(posonlyargs=[ast.arg(a.arg) for a in args.posonlyargs],
                         args=[ast.arg(a.arg) for a in args.args],
                         vararg=ast.arg(args.vararg.arg) if args.vararg else None,
                         kwonlyargs=[ast.arg(a.arg) for a in args.kwonlyargs],
                         kw_defaults=args.kw_defaults,
                         kwarg=ast.arg(args.kwarg.arg) if args.kwarg else None,
                         defaults=args.defaults)
    return copy


# --------------------------------------------------------------------------- docstrings as markdown

_MARKDOWN_SPECIAL = re.compile(r"([\\*_\[\]<>$|~])")


def escape_markdown(text: str) -> str:
    """Prose as literal markdown: specials escaped outside `code spans`, which stay code."""
    pieces = re.split(r"(`[^`]*`)", text)
    out = [p if p.startswith("`") and p.endswith("`") and len(p) > 1
           else _MARKDOWN_SPECIAL.sub(r"\\\1", p) for p in pieces]
    line = "".join(out)
    return "\\" + line if line.lstrip().startswith(("#", "=", "+", "-")) else line


def docstring_markdown(doc: str) -> str:
    """A docstring as markdown: its prose escaped, its `>>>` examples and indented blocks as
    Python code blocks (an example is introduced as such)."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += ["", "*Example:*", "", "```python", *_dedent(block), "```", ""]
            continue
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["```python", *_dedent(block), "```", ""]
            continue
        out.append(escape_markdown(line) if stripped else "")
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def _dedent(block: list[str]) -> list[str]:
    indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
    return [b[indent:] for b in block]


# --------------------------------------------------------------------------- notebooks


def check_cell_source(exercise: str, names: list[str], course: str | None = None) -> str:
    """A Check your work cell; `course`: the course folder its checks come from, when not the
    installed torchgrade's default course (a release's notebooks never name one)."""
    what = ", ".join(names) if names else f"every function of {exercise}"
    args = ", ".join([repr(x) for x in [exercise, *names]]
                     + ([f"course={course!r}"] if course else []))
    return (f"# Check your work: the grader runs the visible checks of {what} on the cells you\n"
            "# have run so far, in a sandbox (this cell itself is not graded).\n"
            f"{CHECK_IMPORT}\ncheck({args})")


HOW_TO = """### How to work in this notebook

Run the cells from the top. Replace each `raise NotImplementedError` with your code and run the
cell, then run the **Check your work** cell below it: the grader runs the visible checks of that
function on the code you have run in this notebook (in a separate, sandboxed process) and prints
each verdict, with what it called, what came back, what was expected and a hint. Hidden checks
are listed by title; they run when your work is graded. Hand in this notebook as
`{file}` (scratch cells are fine: a cell that raises does not erase your definitions, and
`%magics` and `!shell` lines are ignored by the grader)."""


def notebook_title(exercise: str, module_doc: str) -> tuple[str, str]:
    """The notebook's title (markdown) and the rest of the stub's docstring (after its first
    paragraph). The title is the exercise's name and the docstring's summary (its first
    paragraph, wrapped lines joined), the name not said twice when the summary begins with it
    (as the stub `torchgrade new-exercise` writes does: "scale_it: a starting point ...")."""
    summary, _, rest = module_doc.strip().partition("\n\n")
    line = " ".join(summary.split())
    if re.match(rf"[`*_]*{re.escape(exercise)}(?![A-Za-z0-9_])", line):
        return escape_markdown(line), rest
    return (f"{exercise}: {escape_markdown(line)}" if line else exercise), rest


def exercise_notebook(exercise: str, *, source: str | None = None,
                      checks: list[list[str]] | None = None,
                      course: str | None = None) -> nbformat.NotebookNode:
    """The student notebook of `exercise` from its stub (`source`, default: the packaged stub).
    `checks`: the targets of each visible check. A check cell follows the last definition
    each check is about (a check of save_checkpoint and load_checkpoint after the latter);
    default: one after every definition. `course`: see `check_cell_source`."""
    if source is None:
        source = stub_path(exercise).read_text(encoding="utf-8")
    module_doc, parts = module_parts(source)
    checked = None if checks is None else check_anchors([p.name for p in parts if p.name], checks)
    title, concept = notebook_title(exercise, module_doc)
    cells = [_markdown(f"# {title}\n\n"
                       + docstring_markdown(concept.strip()) + "\n\n"
                       + HOW_TO.format(file=f"{exercise}.ipynb"), "intro", None, "intro")]
    code_parts = 0
    for part in parts:
        if part.name is None:
            code_parts += 1
            cells.append(_code(part.code, "code", None, f"code-{code_parts}"))
            continue
        heading = f"## `{part.signature or part.name}`"
        text = docstring_markdown(part.doc) if part.doc else ""
        cells.append(_markdown(f"{heading}\n\n{text}".strip(), "doc", part.name,
                               f"doc-{part.name}"))
        cells.append(_code(part.code, "stub", part.name, f"stub-{part.name}"))
        if checked is None or part.name in checked:
            cells.append(_code(check_cell_source(exercise, [part.name], course), "check", part.name,
                               f"check-{part.name}"))
    cells.append(_markdown("## Check the whole exercise\n\nEvery visible check of this "
                           "exercise, and the hidden ones by title.", "doc", None, "doc-all"))
    cells.append(_code(check_cell_source(exercise, [], course), "check", None, "check-all"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["torchgrade"] = {"exercise": exercise, "version": grader.__version__}
    return nb


def check_anchors(names: list[str], checks: list[list[str]]) -> set[str]:
    """The definitions a check cell follows: for each check, the last of its targets in the
    notebook (a check is run once everything it is about can be there)."""
    anchors = set()
    for targets in checks:
        present = [names.index(t) for t in targets if t in names]
        if present:
            anchors.add(names[max(present)])
    return anchors


def _markdown(text: str, role: str, name: str | None, cell_id: str):
    cell = nbformat.v4.new_markdown_cell(text)
    return _tag(cell, role, name, cell_id)


def _code(text: str, role: str, name: str | None, cell_id: str):
    cell = nbformat.v4.new_code_cell(text)
    return _tag(cell, role, name, cell_id)


def _tag(cell, role: str, name: str | None, cell_id: str):
    cell.id = re.sub(r"[^A-Za-z0-9_-]", "-", cell_id)[:64]
    cell.metadata["torchgrade"] = {"role": role, **({"name": name} if name else {})}
    return cell


def visible_targets(exercises: list[str]) -> dict[str, list[list[str]]]:
    """For each exercise, the targets of each of its visible checks (collected, not run)."""
    from grader.checking.selection import collect_checks

    targets: dict[str, list[list[str]]] = {e: [] for e in exercises}
    for found in collect_checks(exercises):
        if found.info.visibility == "visible":
            targets[found.exercise].append(list(found.info.targets))
    return targets


def write_notebooks(out: Path, exercises: list[str], *, course: str | None = None) -> list[Path]:
    """`out/<exercise>.ipynb` for every exercise (validated nbformat); returns the paths.
    `course`: see `check_cell_source`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    targets = visible_targets(exercises)
    paths = []
    for exercise in exercises:
        nb = exercise_notebook(exercise, checks=targets.get(exercise, []), course=course)
        nbformat.validate(nb)
        path = out / f"{exercise}.ipynb"
        path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- answer keys


def fill_solutions(nb: nbformat.NotebookNode, solution: str) -> nbformat.NotebookNode:
    """A copy of a generated notebook with each stub cell replaced by the solution's definition
    of the same name. Solution code without a stub cell of its own (helpers, constants,
    imports) goes into the cell of the next definition, or the first code cell for what comes
    before the first one."""
    nb = nbformat.from_dict(nb)
    _, parts = module_parts(solution)
    by_name = {p.name: p for p in parts if p.name}
    stub_cells = {c.metadata.get("torchgrade", {}).get("name"): c for c in nb.cells
                  if c.metadata.get("torchgrade", {}).get("role") == "stub"}
    pending: list[str] = []
    leading: list[str] = []
    seen_definition = False
    for part in parts:
        text = part.code
        if part.name in stub_cells:
            stub_cells[part.name].source = "\n\n".join(pending + [text])
            pending = []
            seen_definition = True
        elif not seen_definition and part.name is None:
            leading.append(text)
        else:
            pending.append(text)
    first_code = next((c for c in nb.cells if c.metadata.get("torchgrade", {}).get("role")
                       == "code"), None)
    if leading and first_code is not None:
        first_code.source = "\n\n".join(leading)
    elif leading:
        pending = leading + pending
    if pending:
        last = [c for c in nb.cells if c.metadata.get("torchgrade", {}).get("role") == "stub"]
        last[-1].source += "\n\n\n" + "\n\n".join(pending)
    missing = [n for n in stub_cells if n not in by_name]
    if missing:
        raise ValueError(f"the solution defines no {', '.join(missing)}")
    return nb
