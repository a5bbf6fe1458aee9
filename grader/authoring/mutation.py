"""Generated mutants: small, automatic changes to a reference solution (`torchgrade verify`).

`generate(source, filename=...)` returns every mutant of a module's source text that the
operators below make, each a whole module that compiles. A mutant that still scores full marks
is a check to strengthen (or a change that cannot matter: marked equivalent in the course).

Operators (their names are `GeneratedMutant.operator`):

    arithmetic      a binary or augmented operator swapped (+ -, * /, // /, % //, ** *, @ *,
                    & |, ^ &, << >>), a unary minus or ~ dropped
    constant        a number changed (0 -> 1, 1 -> 0, n -> n + 1, a float -> 0.0, 0.0 -> 1.0),
                    True <-> False, None -> 0
    comparison      one comparison operator changed (< <=, > >=, == !=, is / is not, in / not in)
    dims            the value of a `dim=`/`axis=`/`keepdim=`... argument, or an integer
                    positional argument of a reduction or axis call (`.sum(1)`,
                    `.transpose(0, 1)`, `torch.cat(xs, 0)`): to another axis (0 -> 1,
                    k -> k - 1, -1 -> -2, -k -> -k + 1), a flag flipped, None -> 0
    drop-call       a call used as a statement removed (`strides.append(step)`,
                    `loss.backward()`); `print` calls are left alone
    drop-statement  an augmented assignment, an in-place write (`out[i] = v`, `p.grad = None`),
                    a rebinding (`x = x.float()` after `x` was bound), `continue`, `break`,
                    `raise` removed; `return value` -> `return None`
    swap-args       two neighbouring positional arguments of a call swapped (not of
                    `np.maximum` and other functions whose arguments commute)
    and-or          `and` <-> `or`
    not             `not x` -> `x`; the condition of an `if`, `while` or `x if c else y` negated

Left alone: docstrings, type annotations, imports, decorators, f-strings, the exception a
`raise` builds, and `if __name__ == "__main__":` blocks.

Why not a mutation library: mutmut 3 (3.8.1) makes its mutants only inside its own
trampolined copy of a project (`mutmut.mutation.file_mutation.create_mutations` is an internal
function on libcst, moved between 3.x releases) and brings click, coverage, libcst, textual and
setproctitle; cosmic-ray 8.7 has a string API (`cosmic_ray.mutating.mutate_code(code, operator,
occurrence)`) but numbers its mutants by occurrence in the whole file (every edit renumbers
them), has no dropped calls, dropped statements or swapped arguments, and brings aiohttp,
sqlalchemy, gitpython and stevedore; mutatest 3.1 (2020) pins coverage < 6 and works on files
with a test command. None knows axes and dims. The operators here are plain `ast` (stdlib).

Each mutant's text is the original with only the changed node's text replaced (comments and
layout kept, so its diff is one line); the result is parsed back and must equal the mutated
tree, else the node is parenthesized, else the whole module is `ast.unparse`d.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPERATORS = ("arithmetic", "constant", "comparison", "dims", "drop-call", "drop-statement",
             "swap-args", "and-or", "not")

BINARY_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.MatMult: ast.Mult,
    ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
}
COMPARE_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
DIM_KEYWORDS = {"dim", "dims", "axis", "axes", "keepdim", "keepdims", "dim0", "dim1",
                "start_dim", "end_dim", "axis1", "axis2", "source", "destination"}
# Calls whose integer positional arguments are axes (or a count beside one: changed alike).
DIM_CALLS = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "cumsum",
    "cumprod", "std", "var", "norm", "logsumexp", "softmax", "log_softmax", "all", "any",
    "median", "sort", "argsort", "topk", "transpose", "swapaxes", "swapdims", "moveaxis",
    "movedim", "permute", "unsqueeze", "squeeze", "expand_dims", "flatten", "unflatten",
    "stack", "cat", "concat", "concatenate", "split", "chunk", "flip", "roll", "gather",
    "index_select", "narrow", "select", "size", "diff", "repeat_interleave", "take_along_axis",
    "unbind", "count_nonzero", "nanmean", "nansum", "average",
}
SILENT_CALLS = {"print"}  # dropping one changes no result: an equivalent mutant, always
# Functions whose arguments commute: swapping them makes an equivalent mutant, always.
SYMMETRIC_CALLS = {"maximum", "minimum", "fmax", "fmin", "add", "multiply", "hypot", "gcd",
                   "lcm", "logical_and", "logical_or", "logical_xor", "bitwise_and",
                   "bitwise_or", "bitwise_xor", "equal", "not_equal", "eq", "ne"}
CLIP = 70  # characters of code a change shows on each side


@dataclass(frozen=True)
class GeneratedMutant:
    """One generated mutant. `id` depends only on the function it is in, the operator, the
    original and new code and which occurrence of that same change it is: an edit elsewhere in
    the file leaves it unchanged. `source` is the whole mutated module (it compiles)."""

    id: str
    operator: str
    where: str          # "solutions/x.py:LINE"
    line: int
    change: str         # "`dim=1` -> `dim=0` in softmax_rows"
    before: str         # the original line, stripped
    after: str          # the same line in the mutant, stripped
    source: str


@dataclass
class _Edit:
    """A change to one node: `target` is replaced by `make(copy_of_target)` in the tree."""

    operator: str
    target: Any                            # an ast node with a position
    make: Callable[..., Any]
    old: str
    new: str


def generate(source: str, *, filename: str) -> list[GeneratedMutant]:
    """Every mutant of `source` (see the module docstring), in source order; no two with the
    same text, none equal to the original. A `source` that does not parse gives none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    walk = _Walk(tree)
    out: list[GeneratedMutant] = []
    seen = {source}
    occurrences: Counter[tuple[str, ...]] = Counter()
    for edit in sorted(walk.edits, key=lambda e: (e.target.lineno, e.target.col_offset,
                                                  OPERATORS.index(e.operator))):
        mutated = _apply(source, tree, edit)
        if mutated is None:
            continue
        text, changed, inserted = mutated
        if text in seen or not changed:
            continue
        seen.add(text)
        qualname = walk.qualname.get(id(edit.target), "<module>")
        key = (qualname, edit.operator, edit.old, edit.new)
        occurrences[key] += 1
        digest = hashlib.sha256("\0".join((*key, str(occurrences[key]))).encode()).hexdigest()
        line = edit.target.lineno
        place = "at module level" if qualname == "<module>" else f"in {qualname}"
        # Shown as written: the original's text, and the text put in its place.
        t = edit.target
        old = source[_offset(source, t.lineno, t.col_offset):
                     _offset(source, t.end_lineno, t.end_col_offset)] or edit.old
        if edit.new:
            shown_old, shown_new = _around_difference(" ".join(old.split()),
                                                      " ".join(inserted.split()))
            change = f"`{shown_old}` -> `{shown_new}` {place}"
        else:
            change = f"`{_clip(old)}` removed {place}"
        out.append(GeneratedMutant(
            id=f"g{digest[:10]}", operator=edit.operator, where=f"{filename}:{line}", line=line,
            change=change, before=_line(source, line), after=_line(text, line), source=text))
    return out


# --------------------------------------------------------------------------- finding edits


class _Walk:
    """The tree's nodes in a fixed order, each node's enclosing function, and the edits."""

    def __init__(self, tree: ast.Module):
        self.qualname: dict[int, str] = {}
        self.skipped: set[int] = set()
        self.dim_values: set[int] = set()
        self.edits: list[_Edit] = []
        self._skip_zones(tree)
        self._visit(tree, [], bound=set())

    def _skip_zones(self, tree: ast.Module) -> None:
        def skip(node: ast.AST | None) -> None:
            if node is not None:
                self.skipped.update(id(n) for n in ast.walk(node))

        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(
                        body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                    skip(body[0])  # the docstring
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for decorator in node.decorator_list:
                    skip(decorator)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                skip(node.returns)
            if isinstance(node, ast.arg):
                skip(node.annotation)
            if isinstance(node, ast.AnnAssign):
                skip(node.annotation)
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.JoinedStr, ast.Global,
                                 ast.Nonlocal)):
                skip(node)
            if isinstance(node, ast.Raise):
                skip(node.exc)
                skip(node.cause)
            if isinstance(node, ast.If) and _is_main_guard(node.test):
                skip(node)
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                skip(node)

    def _visit(self, node: ast.AST, stack: list[str], *, bound: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack = stack + [node.name]
            if not isinstance(node, ast.ClassDef):
                a = node.args
                bound = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
                bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        self.qualname[id(node)] = ".".join(stack) or "<module>"
        if id(node) not in self.skipped:
            self._edits_of(node, stack, bound)
        for child in ast.iter_child_nodes(node):
            self._visit(child, stack, bound=bound)
        # Names bound by this statement count as bound for the statements after it.
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                bound.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))

    def _add(self, operator: str, target: Any, make: Callable[..., Any]) -> None:
        if not hasattr(target, "lineno"):
            return
        new = make(copy.deepcopy(target))
        old_text = ast.unparse(target)
        new_text = "" if isinstance(new, ast.Pass) else ast.unparse(new)
        if old_text != new_text:
            self.edits.append(_Edit(operator, target, make, old_text, new_text))

    def _edits_of(self, node: ast.AST, stack: list[str], bound: set[str]) -> None:
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY_SWAPS:
            self._add("arithmetic", node, lambda n: _with(n, op=BINARY_SWAPS[type(n.op)]()))
        elif isinstance(node, ast.AugAssign) and type(node.op) in BINARY_SWAPS:
            self._add("arithmetic", node, lambda n: _with(n, op=BINARY_SWAPS[type(n.op)]()))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)):
            self._add("arithmetic", node, lambda n: n.operand)
        if isinstance(node, ast.Call):
            self._call_edits(node)
        if isinstance(node, ast.keyword) and node.arg in DIM_KEYWORDS:
            self._dim_edit(node.value, node, lambda n, new: _with(n, value=new))
        if isinstance(node, ast.Constant) and id(node) not in self.dim_values:
            new = _other_constant(node.value)
            if new is not _NONE:
                self._add("constant", node, lambda n, v=new: ast.Constant(v))
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in COMPARE_SWAPS:
                    self._add("comparison", node, lambda n, i=i: _with(
                        n, ops=[*n.ops[:i], COMPARE_SWAPS[type(n.ops[i])](), *n.ops[i + 1:]]))
        if isinstance(node, ast.BoolOp):
            self._add("and-or", node, lambda n: _with(
                n, op=ast.Or() if isinstance(n.op, ast.And) else ast.And()))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._add("not", node, lambda n: n.operand)
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and id(node.test) not in self.skipped:
            self._add("not", node.test, lambda n: ast.UnaryOp(ast.Not(), n))
        if isinstance(node, ast.stmt):
            self._statement_edits(node, stack, bound)

    def _call_edits(self, node: ast.Call) -> None:
        name = called_name(node.func)
        if name in DIM_CALLS:
            for i, arg in enumerate(node.args):
                self._dim_edit(arg, node, lambda n, new, i=i: _with(
                    n, args=[*n.args[:i], new, *n.args[i + 1:]]))
        positional = node.args
        if not any(isinstance(a, ast.Starred) for a in positional) and \
                name not in SILENT_CALLS | SYMMETRIC_CALLS:
            for i in range(len(positional) - 1):
                if ast.dump(positional[i]) != ast.dump(positional[i + 1]):
                    self._add("swap-args", node, lambda n, i=i: _with(
                        n, args=[*n.args[:i], n.args[i + 1], n.args[i], *n.args[i + 2:]]))

    def _dim_edit(self, value: ast.AST, holder: ast.AST, put: Callable[..., Any]) -> None:
        """An axis `value` held by `holder` (a keyword, or the call: shown whole in the
        change) changed by `put(holder_copy, new_value)`."""
        number = _int_literal(value)
        if number is not None:
            new: ast.AST = _literal(_other_axis(number))
        elif isinstance(value, ast.Constant) and (value.value is None
                                                  or isinstance(value.value, bool)):
            new = ast.Constant(0 if value.value is None else not value.value)
        else:
            return
        self.dim_values.update(id(n) for n in ast.walk(value))
        self._add("dims", holder, lambda n, v=new: put(n, copy.deepcopy(v)))

    def _statement_edits(self, node: ast.stmt, stack: list[str], bound: set[str]) -> None:
        drop: ast.stmt | None = None
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            if called_name(node.value.func) not in SILENT_CALLS:
                self._add("drop-call", node, lambda n: ast.Pass())
            return
        if isinstance(node, (ast.AugAssign, ast.Continue, ast.Break, ast.Raise)):
            drop = node
        elif isinstance(node, ast.Assign):
            in_init = bool(stack) and stack[-1] == "__init__"
            for t in node.targets:
                if isinstance(t, ast.Subscript) or (isinstance(t, ast.Attribute)
                                                    and not in_init):
                    drop = node
                elif isinstance(t, ast.Name) and t.id in bound and len(stack) > 0:
                    drop = node
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            self._add("drop-statement", node, lambda n: ast.Return(ast.Constant(None)))
        if drop is not None:
            self._add("drop-statement", node, lambda n: ast.Pass())


# --------------------------------------------------------------------------- applying edits


def _apply(source: str, tree: ast.Module, edit: _Edit) -> tuple[str, bool, str] | None:
    """The mutant's text, whether its tree differs from the original's, and the text that
    replaced the node's; None when it does not compile. Only the top-level statement holding
    the edit is compared (the text outside the edited node is the original's: a splice that
    changed how the rest parses changes the number of statements or this one's tree). The
    edit is made in `tree` itself for the comparison, and undone."""
    target = edit.target
    k = next(i for i, s in enumerate(tree.body) if s.lineno <= target.lineno <= s.end_lineno)
    statement = tree.body[k]
    new_node = edit.make(copy.deepcopy(target))
    original = _dump(statement)
    parent = statement if target is not statement else tree
    swap = _swap(parent, target, new_node)
    if swap is None:
        return None
    try:
        wanted = ast.dump(tree.body[k])
        new_text = ast.unparse(new_node)
        start = _offset(source, target.lineno, target.col_offset)
        end = _offset(source, target.end_lineno, target.end_col_offset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `x is 0` and friends: a mutant may say anything
            for text in (new_text, f"({new_text})"):
                spliced = source[:start] + text + source[end:]
                try:
                    parsed = ast.parse(spliced)
                    if len(parsed.body) == len(tree.body) and ast.dump(parsed.body[k]) == wanted:
                        compile(parsed, "<mutant>", "exec")
                        return spliced, wanted != original, text
                except (SyntaxError, ValueError):
                    continue
            # The splice changed how the text parses: render the whole module instead.
            try:
                whole = ast.unparse(ast.fix_missing_locations(copy.deepcopy(tree)))
                compile(whole, "<mutant>", "exec")
                return whole, wanted != original, new_text
            except (SyntaxError, ValueError, RecursionError):
                return None
    finally:
        swap()


def _swap(root: ast.AST, old: ast.AST, new: ast.AST) -> Callable[[], None] | None:
    """Put `new` where `old` is under `root`; returns what undoes it (None: not found)."""
    for parent in ast.walk(root):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return functools.partial(setattr, parent, name, old)
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return functools.partial(value.__setitem__, i, old)
    return None


_DUMPS: dict[int, tuple[ast.AST, str]] = {}


def _dump(statement: ast.AST) -> str:
    """ast.dump of an original statement, once per statement (each has many edits)."""
    kept = _DUMPS.get(id(statement))
    if kept is None or kept[0] is not statement:
        if len(_DUMPS) > 10_000:
            _DUMPS.clear()
        kept = _DUMPS[id(statement)] = (statement, ast.dump(statement))
    return kept[1]


def _offset(source: str, line: int, col: int) -> int:
    """The character offset of (line, col) in `source`; ast's col is in UTF-8 bytes."""
    starts, lines = _lines(source)
    return starts[line - 1] + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8",
                                                                              "replace"))


_LINES: dict[str, tuple[list[int], list[str]]] = {}


def _lines(source: str) -> tuple[list[int], list[str]]:
    """Where each line of `source` starts, and the lines (the last source's, kept)."""
    if source not in _LINES:
        _LINES.clear()
        lines = source.splitlines(keepends=True)
        starts = [0]
        for x in lines:
            starts.append(starts[-1] + len(x))
        _LINES[source] = (starts, lines)
    return _LINES[source]


# --------------------------------------------------------------------------- small helpers

_NONE = object()  # no other constant


def _other_constant(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if value is None:
        return 0
    if isinstance(value, int):
        return {0: 1, 1: 0}.get(value, value + 1)
    if isinstance(value, float):
        return 1.0 if value == 0.0 else 0.0
    return _NONE


def _other_axis(axis: int) -> int:
    if axis == 0:
        return 1
    if axis > 0:
        return axis - 1
    return -2 if axis == -1 else axis + 1


def _int_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
        return -node.operand.value
    return None


def _literal(value: int) -> ast.AST:
    return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))


def _with(node: ast.AST, **fields) -> ast.AST:
    for name, value in fields.items():
        setattr(node, name, value)
    return node


def called_name(func: ast.AST) -> str:
    """The name a call is made by: `f(...)` -> "f", `a.b.f(...)` -> "f"; else ""."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _is_main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CLIP else text[:CLIP - 3] + "..."


def _around_difference(old: str, new: str) -> tuple[str, str]:
    """`old` and `new` clipped to about CLIP characters each around where they differ (two
    changes in one long expression must not read the same)."""
    if max(len(old), len(new)) <= CLIP:
        return old, new
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    cut = max(0, start - CLIP // 3)
    a, b = old[cut:], new[cut:]
    lead = "..." if cut else ""
    return lead + _clip(a), lead + _clip(b)


def _line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""

