"""Hollow implementations: a solution with some functions' bodies replaced by a trivial one.

A check that passes for `def center_columns(x): return None` ("leaves its input alone") or for
`def broadcast_shape(a, b): raise ValueError` ("raises on incompatible shapes") gives points for
a side property of code that does not do the job. `torchgrade verify` grades every hollow
implementation `hollow(source, functions)` makes and requires every check whose targets are
among the hollowed functions to fail on each: a side property's check must also ask for the
basic behaviour it is a property of.

The bodies (`BODIES`): raise ValueError, return None, return the first argument unchanged.
Only module-level functions are hollowed; a class is not (an empty `__init__` or `forward` is
not a trivial implementation of a module, it is a crash, which any check already fails).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

BODIES = {
    "raise ValueError": "raise ValueError('not implemented')",
    "return None": "return None",
    "return its first argument": "return {first}",
}


@dataclass(frozen=True)
class HollowMutant:
    functions: tuple[str, ...]  # the hollowed functions, sorted
    body: str                   # a key of BODIES
    source: str                 # the whole module: it compiles

    @property
    def name(self) -> str:
        return f"{', '.join(self.functions)} doing nothing but {self.body}"


def hollowable(source: str) -> set[str]:
    """The module-level functions of `source` (none when it does not parse)."""
    try:
        return set(_functions(ast.parse(source)))
    except SyntaxError:
        return set()


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {node.name: node for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def hollow(source: str, functions: set[str] | frozenset[str]) -> list[HollowMutant]:
    """`source` with every function of `functions` hollowed, once per body of `BODIES` (the
    first argument's only where each has one). Empty when one of `functions` is not a
    module-level function of `source`."""
    defs = _functions(ast.parse(source))
    if not functions or not set(functions) <= set(defs) or any(
            defs[n].body[0].lineno == defs[n].lineno for n in functions):  # `def f(x): ...`
        return []
    lines = source.splitlines(keepends=True)
    out = []
    for body, template in BODIES.items():
        firsts = {name: _first_argument(defs[name]) for name in functions}
        if "{first}" in template and None in firsts.values():
            continue
        text = list(lines)
        # From the last function up, so that earlier line numbers stay right.
        for name in sorted(functions, key=lambda n: defs[n].lineno, reverse=True):
            node = defs[name]
            start, end = node.body[0].lineno - 1, node.end_lineno or node.body[-1].lineno
            indent = " " * node.body[0].col_offset
            text[start:end] = [indent + template.format(first=firsts[name]) + "\n"]
        out.append(HollowMutant(tuple(sorted(functions)), body, "".join(text)))
    return out


def _first_argument(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = node.args.posonlyargs + node.args.args
    return args[0].arg if args else None
