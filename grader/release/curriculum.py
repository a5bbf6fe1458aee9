"""The exercise contract, CURRICULUM.md, generated from the stubs so that it cannot drift.

Every word of the contract lives in `exercises/`: the general rules in the package's docstring,
each exercise's concept in its module docstring, and the contract of each function or class in
its signature and docstring; the bug hunts' common rules in `exercises/bughunt/__init__.py`, and
the pitfalls the fault catalogue promises in the course's `faults.toml` (`pitfalls`). This module
only gathers them, in course order (`exercises` of `course.toml`):

    python -m grader.release.curriculum > CURRICULUM.md

`tests/test_curriculum.py` keeps the committed file equal to `curriculum_markdown()`, every
public name of every stub in it, and every solution's signatures equal to its stub's.
Code cites the contract by exercise name ("CURRICULUM.md, `softmax_rows`"), never by a
section number.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from grader.course.faults import catalogue, load
from grader.release.notebooks import escape_markdown, exercises_root, stub_path
from grader.course.registry import known_exercises

COMMAND = "python -m grader.release.curriculum > CURRICULUM.md"
HEADER = (f"<!-- Generated from the docstrings of exercises/ by `{COMMAND}`: edit the stubs, "
          "not this file. -->")
PITFALLS_HEADING = "## Pitfalls the fault catalogue holds"


def curriculum_markdown() -> str:
    """The whole contract as markdown: the general rules, then one section per exercise in
    curriculum order (a subfolder's `__init__` docstring introduces its exercises), then the
    pitfalls the fault catalogue holds at least."""
    root = exercises_root()
    title, intro = _split_title(ast.get_docstring(_parse(root / "__init__.py")) or "")
    out = [HEADER, "", f"# {escape_markdown(title)}", "", doc_markdown(intro)]
    folders_seen: set[Path] = set()
    for exercise in known_exercises():
        path = stub_path(exercise)
        folder = path.parent
        if folder != root and folder not in folders_seen:
            folders_seen.add(folder)
            out += folder_section(folder, root)
        out += exercise_section(exercise, path, root)
    out += pitfalls_section()
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------- sections


def folder_section(folder: Path, root: Path) -> list[str]:
    """A subfolder of exercises (the bug hunts), introduced by its `__init__` docstring."""
    init = folder / "__init__.py"
    doc = ast.get_docstring(_parse(init)) if init.is_file() else None
    title, rest = _split_title(doc or "")
    name = folder.relative_to(root).as_posix()
    return ["", f"## `{name}/`: {escape_markdown(title)}", "", doc_markdown(rest)]


def exercise_section(exercise: str, path: Path, root: Path) -> list[str]:
    """One exercise: the student file, the module docstring, then each public definition with
    its signature and docstring. A bug hunt's contract is its module docstring (what the
    grader calls), so its definitions are listed by signature only."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    title, intro = _split_title(ast.get_docstring(tree) or "")
    rel = path.relative_to(root).as_posix()
    notebook = f" (or `{exercise}.ipynb`)" if path.parent == root else ""
    out = ["", f"## `{exercise}`: {escape_markdown(title)}", "",
           f"The student file: `exercises/{rel}`{notebook}.", "", doc_markdown(intro)]
    definitions = public_definitions(tree)
    if path.parent != root:
        out += ["", "Its definitions:", "", "```python",
                *(line for node in definitions for line in signature_lines(node, source)),
                "```"]
        return out
    for node in definitions:
        out += ["", f"### `{node.name}`", "", "```python",
                *signature_lines(node, source), "```"]
        doc = ast.get_docstring(node)
        if doc:
            out += ["", doc_markdown(doc)]
    return out


def pitfalls_section() -> list[str]:
    """The faults the catalogue promises to hold (`pitfalls` in faults.toml), with titles."""
    faults = catalogue()
    lines = [f"- `{fid}`: {escape_markdown(faults[fid].title) if fid in faults else '(missing)'}"
             for fid in load().pitfalls]
    return ["", PITFALLS_HEADING, "",
            ("The fault catalogue (`faults.toml`, its `pitfalls` list) holds "
             "at least these faults:"), "", *lines]


# --------------------------------------------------------------------------- definitions


def public_definitions(tree: ast.Module) -> list[ast.FunctionDef | ast.ClassDef]:
    """The module's top-level functions and classes whose names do not start with `_`."""
    return [node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]


def public_names(path: Path) -> list[str]:
    return [node.name for node in public_definitions(_parse(path))]


def signature_lines(node: ast.FunctionDef | ast.ClassDef, source: str, indent: str = ""
                    ) -> list[str]:
    """A definition of `source` as a stub line (`def f(x: int) -> int: ...`); a class with the
    stub lines of its methods (private `_helpers` left out, dunders kept). Annotations and
    defaults are spelled as in the source."""
    def text(expr: ast.AST) -> str:
        return ast.get_source_segment(source, expr) or ast.unparse(expr)

    decorators = [f"{indent}@{text(d)}" for d in node.decorator_list]
    if isinstance(node, ast.FunctionDef):
        returns = f" -> {text(node.returns)}" if node.returns else ""
        return [*decorators, f"{indent}def {node.name}({arguments(node.args, text)}){returns}: ..."]
    bases = ", ".join(text(b) for b in [*node.bases, *node.keywords])
    head = f"{indent}class {node.name}({bases})" if bases else f"{indent}class {node.name}"
    methods = [m for m in node.body if isinstance(m, ast.FunctionDef) and is_public(m.name)]
    if not methods:
        return [*decorators, f"{head}: ..."]
    return [*decorators, f"{head}:",
            *(line for m in methods for line in signature_lines(m, source, indent + "    "))]


def arguments(args: ast.arguments, text=ast.unparse) -> str:
    """A parameter list as PEP 8 writes it (`step: int = 1`, `seed=0`, `*shapes: int`);
    `text` spells an annotation or a default."""
    def parameter(arg: ast.arg, default: ast.expr | None) -> str:
        name = f"{arg.arg}: {text(arg.annotation)}" if arg.annotation else arg.arg
        if default is None:
            return name
        return f"{name} = {text(default)}" if arg.annotation else f"{name}={text(default)}"

    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = [parameter(a, d) for a, d in zip(positional, defaults, strict=True)]
    if args.posonlyargs:
        parts.insert(len(args.posonlyargs), "/")
    if args.vararg:
        parts.append("*" + parameter(args.vararg, None))
    elif args.kwonlyargs:
        parts.append("*")
    parts += [parameter(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg:
        parts.append("**" + parameter(args.kwarg, None))
    return ", ".join(parts)


def is_public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


# --------------------------------------------------------------------------- docstrings


def doc_markdown(doc: str) -> str:
    """A docstring as markdown: prose escaped (code spans kept), `- ` bullets kept as a list
    (continuation lines indented), `>>>` examples and indented blocks as Python code."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    in_list = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        previous_blank = i == 0 or not lines[i - 1].strip()
        if stripped.startswith(">>>") or (line.startswith("    ") and previous_blank):
            block, i = _code_block(lines, i)
            out += ["", "```python", *block, "```", ""]
            in_list = False
            continue
        if line.startswith("- "):
            if not in_list and out and out[-1]:
                out.append("")
            out.append("- " + escape_markdown(line[2:]))
            in_list = True
        elif in_list and line.startswith("  ") and stripped:
            out.append("  " + escape_markdown(stripped))
        else:
            if in_list and stripped:
                out.append("")
            out.append(escape_markdown(line) if stripped else "")
            in_list = False
        i += 1
    text = "\n".join(out).strip()
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def _code_block(lines: list[str], i: int) -> tuple[list[str], int]:
    """The example or indented block starting at line i (dedented), and the line after it."""
    block = []
    if lines[i].strip().startswith(">>>"):
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
    else:
        while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
            block.append(lines[i])
            i += 1
    while block and not block[-1].strip():
        block.pop()
    indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
    return [b[indent:] for b in block], i


def _split_title(doc: str) -> tuple[str, str]:
    """A docstring's first line (without its full stop) and the rest."""
    title, _, rest = doc.strip().partition("\n")
    return title.strip().removesuffix("."), rest.strip()


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def main() -> int:
    sys.stdout.write(curriculum_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
