"""Hollow implementations: a solution with some functions' bodies replaced by a trivial one.

A check that passes for `def center_columns(x): return None` ("leaves its input alone") or for
`def broadcast_shape(a, b): raise ValueError` ("raises on incompatible shapes") gives points for
a side property of code that does not do the job. `torchgrade verify` grades every hollow
implementation `hollow(source, functions)` makes and requires every check whose targets are
among the hollowed functions to fail on each: a side property's check must also ask for the
basic behaviour it is a property of.

The bodies (`BODIES`): raise ValueError, return None, return the first argument unchanged,
and return zeros shaped like the answer (`ZEROS`: the function is wrapped, not rewritten; see
`ZEROS_WRAPPER`). Only module-level functions are hollowed; a class is not (an empty `__init__`
or `forward` is not a trivial implementation of a module, it is a crash, which any check
already fails).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ZEROS = "return zeros shaped like its answer"
BODIES = {
    "raise ValueError": "raise ValueError('not implemented')",
    "return None": "return None",
    "return its first argument": "return {first}",
    ZEROS: None,  # not a body: ZEROS_WRAPPER wraps the function
}
# "Zeros of the right shape" is the answer a student fakes when the checks compare shapes,
# dtypes or signs but never a value; its shape is only known from the real answer. So the
# solution's function runs on copies of its arguments and its answer comes back with every
# tensor, array and number zeroed, containers kept. Only a function of plain data (tensors,
# arrays, numbers, strings, None, containers of them) is hollowed so: called with a model, an
# optimizer, a loader or a function, it would still do its work on the copies, which the
# checks' instruments (hooks, recording optimizers) copied along would see; it raises then, as
# it does for an answer with nothing to zero or only zeros already (None, a model: the
# solution's own answer). Raising fails every check, so such a call proves nothing either way.
ZEROS_WRAPPER = """

def _torchgrade_zeroed(value):
    import numbers
    import numpy
    import torch
    if isinstance(value, torch.Tensor):
        return torch.zeros_like(value), bool(value.numel()) and bool((value != 0).any())
    if isinstance(value, numpy.ndarray):
        return numpy.zeros_like(value), bool(value.size) and bool((value != 0).any())
    if isinstance(value, bool):
        return False, value
    if isinstance(value, numbers.Number):
        return type(value)(0), value != 0
    if isinstance(value, (tuple, list)):
        pairs = [_torchgrade_zeroed(v) for v in value]
        items = [v for v, _ in pairs]
        same = type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        return same, any(c for _, c in pairs)
    if isinstance(value, dict):
        pairs = {k: _torchgrade_zeroed(v) for k, v in value.items()}
        return type(value)((k, v) for k, (v, _) in pairs.items()), any(
            c for _, c in pairs.values())
    return value, False


def _torchgrade_plain(value):
    import numbers
    import numpy
    import torch
    if value is None or isinstance(value, (str, bytes, numbers.Number, numpy.ndarray)):
        return True
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return True
    if isinstance(value, (tuple, list)):
        return all(_torchgrade_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_torchgrade_plain(v) for v in value.values())
    return False


def _torchgrade_zeros(function):
    import copy
    import functools

    @functools.wraps(function)
    def zeros(*args, **kwargs):
        if not _torchgrade_plain((args, kwargs)):
            raise ValueError("not implemented")
        args, kwargs = copy.deepcopy((args, kwargs))
        answer, changed = _torchgrade_zeroed(function(*args, **kwargs))
        if not changed:
            raise ValueError("not implemented")
        return answer
    return zeros
"""


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
        if template is None:
            wrapped = "".join(f"{n} = _torchgrade_zeros({n})\n" for n in sorted(functions))
            out.append(HollowMutant(tuple(sorted(functions)), body,
                                    source.rstrip("\n") + "\n" + ZEROS_WRAPPER + wrapped))
            continue
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
