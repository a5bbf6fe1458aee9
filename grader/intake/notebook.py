"""Turn a submitted notebook into source chunks: one per code cell, IPython syntax removed.

Runs in the grader and executes nothing: the cells are run later, in the worker, one at a time,
so that a scratch cell that raises after the definitions does not erase them.
"""

from __future__ import annotations

import ast
import json
import re
import warnings

from grader.intake.budget import AnalysisBudget, parse
from grader.models import SourceChunk

# Cell magics whose body is still Python; any other cell magic makes the cell not Python.
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}
# IPython-only lines: `%magic` / `!shell` at the start, their assignment forms (`t = %timeit -o
# f()`, `files = !ls`), and help (`obj?`, `obj??`, `?obj`).
_LINE_MAGIC = re.compile(r"^(\s*)(%|!|[A-Za-z_][\w.,\s\[\]]*=\s*[%!]|\?+[A-Za-z_]"
                         r"|[A-Za-z_][\w.]*\s*\?{1,2}\s*$)")
# Line magics that run the rest of their line as a statement in the notebook's namespace
# (`%time y = f(x)` assigns y): the statement is kept, only the magic is removed.
_STATEMENT_MAGIC = re.compile(r"^(\s*)%time\s+(?=\S)")


# A notebook is parsed (JSON, then nbformat's validation) only within these bounds: 480,000
# cells cost the grader a minute and most of a GB. Measured: the largest honest notebooks of a
# course have a few hundred cells; JSON containers (every cell, its metadata, outputs...) are
# counted from the text before parsing, as an upper bound ("{" and "[" in strings count too).
MAX_CELLS = 2_000
MAX_CONTAINERS = 500_000


class NotebookError(ValueError):
    """The file cannot be read as a notebook; the message says why, for the student."""


# Set by the "check your work" cells (grader.jupyter) on the notebook they make of the cells run
# so far: its cells are the kernel's history, so a cell is named by its run count alone.
FROM_HISTORY = "from_history"


def cell_label(number: int, cell: dict, *, from_history: bool) -> str:
    """How messages name a code cell: its place in the file ("cell 6"), with the run count
    Jupyter shows beside it when the file has one ("cell 6, In [4]"); a cell of the kernel's
    history by its run count alone ("In [4]"), as the student sees it."""
    count = cell.get("execution_count")
    if not isinstance(count, int) or isinstance(count, bool):
        return f"cell {number}"
    return f"In [{count}]" if from_history else f"cell {number}, In [{count}]"


def read_cells(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(label, source) of every code cell (`cell_label`), and notes on what was unusual."""
    notes: list[str] = []
    _check_size(text)
    try:
        raw = json.loads(text)
    except RecursionError:
        raise NotebookError("the notebook is nested too deeply to read") from None
    except ValueError as exc:
        raise NotebookError(f"the notebook is not valid JSON ({_first_line(exc)})") from None
    if isinstance(raw, dict) and isinstance(raw.get("cells"), list) \
            and len(raw["cells"]) > MAX_CELLS:  # before nbformat's validation, which is slow
        raise NotebookError(f"the notebook has {len(raw['cells'])} cells; the limit is "
                            f"{MAX_CELLS}")
    del raw
    # Imported here (~0.1 s): `torchgrade check file.py` reads no notebook and starts its
    # sandbox only after this module is imported.
    import nbformat

    try:
        with warnings.catch_warnings():
            # Notebooks written before nbformat 4.5 have no cell ids: harmless here, and said
            # on stderr it broke `grade`'s progress lines.
            warnings.simplefilter("ignore", nbformat.warnings.MissingIDFieldWarning)
            nb = nbformat.reads(text, as_version=4)
            nbformat.validate(nb)
    except nbformat.reader.NotJSONError as exc:
        raise NotebookError(f"the notebook is not valid JSON ({_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds on odd files
        # Read the cells of a damaged notebook anyway: losing a student's work over a
        # missing metadata key would be worse than grading it.
        nb = json.loads(text)
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise NotebookError(f"the notebook could not be read ({_first_line(exc)})") from None
        notes.append(f"the notebook is not valid nbformat ({_first_line(exc)}); "
                     "its code cells were read anyway")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("the notebook has no list of cells")
    if len(cells) > MAX_CELLS:
        raise NotebookError(f"the notebook has {len(cells)} cells; the limit is {MAX_CELLS}")
    metadata = nb.get("metadata")
    ours = metadata.get("torchgrade") if isinstance(metadata, dict) else None
    from_history = isinstance(ours, dict) and ours.get(FROM_HISTORY) is True
    out = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        label = cell_label(number, cell, from_history=from_history)
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(str(s) for s in source)
        if not isinstance(source, str):
            notes.append(f"{label} has no readable source and was skipped")
            continue
        out.append((label, source))
    return out, notes


def _check_size(text: str) -> None:
    """Refuse, before parsing, a notebook with more cells than MAX_CELLS (counted by their
    "cell_type" keys) or more JSON containers than MAX_CONTAINERS (an upper bound)."""
    cells = text.count('"cell_type"')
    if cells > MAX_CELLS:
        raise NotebookError(f"the notebook has {cells} cells; the limit is {MAX_CELLS}")
    containers = text.count("{") + text.count("[")
    if containers > MAX_CONTAINERS:
        raise NotebookError(f"the notebook has too many parts to read ({containers} JSON "
                            f"objects and lists; the limit is {MAX_CONTAINERS})")


def strip_ipython(source: str) -> tuple[str | None, str | None]:
    """Source with IPython-only syntax removed, or None when the cell is not Python at all;
    plus a note for the student when something was removed."""
    lines = source.splitlines()
    note = None
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split(maxsplit=1)[0] if lines[0].strip() != "%%" else ""
        if magic not in PYTHON_CELL_MAGICS:
            return None, f"cell magic %%{magic} (not Python) was skipped"
        lines = [""] + lines[1:]  # keep line numbers
        note = f"cell magic %%{magic} removed"
    removed = 0
    for i, line in enumerate(lines):
        if m := _STATEMENT_MAGIC.match(line):
            lines[i] = m.group(1) + line[m.end():]
            removed += 1
        elif m := _LINE_MAGIC.match(line):
            # `pass` keeps an indented block valid and the line numbers unchanged.
            lines[i] = f"{m.group(1)}pass"
            removed += 1
    if removed:
        note = (note + "; " if note else "") + f"{removed} IPython magic/shell line(s) removed"
    return "\n".join(lines) + "\n", note


def notebook_chunks(text: str, display_name: str, budget: AnalysisBudget | None = None
                    ) -> tuple[list[SourceChunk], list[str]]:
    """The code cells of a notebook as chunks, with notes; raises NotebookError. The cells the
    grader parses to tell check cells from work are parsed within `budget` (a cell over it is
    work: graded, never taken for a check cell)."""
    budget = budget if budget is not None else AnalysisBudget()
    cells, notes = read_cells(text)
    chunks = []
    checkers: set[str] = set()  # the names check cells imported from grader.jupyter
    for label, source in cells:
        if is_check_cell(source):
            tree = _cell_tree(source, budget, label)
            checkers |= _jupyter_names(tree)
            if _defines_something(tree):
                notes.append(f"{label} asks the grader to check your work, so it is not "
                             "graded: the code in it was ignored (move it to a cell of its own)")
            continue
        if checkers and _only_calls_to(_cell_tree(source, budget, label), checkers):
            continue  # `check(...)` in a cell of its own: a check cell too
        code, note = strip_ipython(source)
        if note:
            notes.append(f"{label}: {note}")
        if code is None or not code.strip():
            continue
        chunks.append(SourceChunk(code=code, filename=f"{display_name} [{label}]",
                                  label=label, keep_going=True))
    return chunks, notes


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


# "Check your work" cells of generated notebooks (grader/release/notebooks.py) import
# grader.jupyter;
# they ask the grader to check the notebook and are no part of the work: never graded.
_CHECK_IMPORT = re.compile(
    r"^[ \t]*(from[ \t]+grader\.jupyter[ \t]+import|import[ \t]+grader\.jupyter)", re.MULTILINE)


def is_check_cell(source: str) -> bool:
    """Whether a cell is a "check your work" cell (it imports grader.jupyter)."""
    return bool(_CHECK_IMPORT.search(source))


def _cell_tree(source: str, budget: AnalysisBudget, label: str) -> ast.Module | None:
    """A cell's code parsed (IPython syntax stripped); None if it does not parse or is over
    `budget`."""
    code, _ = strip_ipython(source)
    return parse(code or "", budget, label)


def _jupyter_names(tree: ast.Module | None) -> set[str]:
    """The names a check cell (parsed) binds from grader.jupyter (`check`, an alias,
    `grader`)."""
    if tree is None:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "grader.jupyter":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names
                      if a.name == "grader.jupyter"}
    return names


def _only_calls_to(tree: ast.Module | None, names: set[str]) -> bool:
    """Whether a cell (parsed) only calls what a check cell imported (`check("ex")`, `r =
    check(...)`, `grader.jupyter.check(...)`): it asks for a check, it is no part of the
    work."""
    if tree is None:
        return False

    def is_check_call(value: ast.expr) -> bool:
        if not isinstance(value, ast.Call):
            return False
        target = value.func
        while isinstance(target, ast.Attribute):
            target = target.value
        return isinstance(target, ast.Name) and target.id in names

    return bool(tree.body) and all(
        isinstance(node, (ast.Expr, ast.Assign)) and is_check_call(node.value)
        for node in tree.body)


def _defines_something(tree: ast.Module | None) -> bool:
    """Whether a check cell (parsed) holds more than imports and calls (code a student put
    there); True for one that could not be parsed."""
    if tree is None:
        return True
    return any(not isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr)) or
               (isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call))
               for node in tree.body)

