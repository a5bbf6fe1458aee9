"""Probes for `autograd_graph`: calls that need live autograd graphs, run inside the worker next
to student code.

A graph cannot cross the process boundary (a tensor crosses as values), so these probes build
the graph the check describes (a plain list of steps) in the worker, hand the live tensors to the
student's function and return plain records: names, booleans, detached tensors, counts. The
grader builds the same graphs with `build` (imported from here) to compute what it expects.
Nothing here knows an expected value.

Nothing runs at import: the worker's zygote imports every probe module before any tensor
operation (grader/worker/zygote.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# --------------------------------------------------------------------------- graphs from steps
# A program is a list of steps; step i makes tensor i:
#   ("leaf", values, requires_grad)          a float64 tensor made by the user
#   ("param", values)                        an nn.Parameter
#   (unary, i)                               UNARY[unary](tensor i)
#   (binary, i, j)                           BINARY[binary](tensor i, tensor j)
#   ("const_" + binary, i, number)           BINARY[binary](tensor i, number)
#   ("detach", i) / ("requires_grad_", i)    tensor i.detach() / .detach().requires_grad_()
#   ("no_grad_" + unary, i)                  UNARY[unary](tensor i) under torch.no_grad()
#   ("retain_grad", i)                       tensor i itself, after tensor i.retain_grad()
#   ("freeze", i)                            tensor i itself, after requires_grad_(False)

UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": torch.exp, "tanh": torch.tanh, "sin": torch.sin, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "neg": torch.neg, "square": lambda t: t ** 2,
    "sum": torch.sum, "mean": torch.mean, "t": lambda t: t.t(), "flat": lambda t: t.reshape(-1),
    "clone": torch.clone, "log1p_abs": lambda t: torch.log1p(t.abs()),
}
BINARY: dict[str, Callable[[Any, Any], torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "matmul": torch.matmul,
}


def build(program: list) -> list[torch.Tensor]:
    """The tensors of `program`, one per step (see above)."""
    out: list[torch.Tensor] = []
    for step in program:
        op, args = step[0], step[1:]
        if op == "leaf":
            t = torch.tensor(args[0], dtype=torch.float64).requires_grad_(bool(args[1]))
        elif op == "param":
            t = torch.nn.Parameter(torch.tensor(args[0], dtype=torch.float64))
        elif op == "detach":
            t = out[args[0]].detach()
        elif op == "requires_grad_":
            t = out[args[0]].detach().requires_grad_()
        elif op == "retain_grad":
            t = out[args[0]]
            t.retain_grad()
        elif op == "freeze":
            t = out[args[0]].requires_grad_(False)
        elif op.startswith("no_grad_"):
            with torch.no_grad():
                t = UNARY[op.removeprefix("no_grad_")](out[args[0]])
        elif op.startswith("const_"):
            t = BINARY[op.removeprefix("const_")](out[args[0]], args[1])
        elif op in UNARY:
            t = UNARY[op](out[args[0]])
        else:
            t = BINARY[op](out[args[0]], out[args[1]])
        out.append(t)
    return out


def _plain(value: Any) -> Any:
    """Tensors detached (a tensor with history crosses the wire as values only)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _kept(value: Any) -> Any:
    """Like `_plain`, but a tensor keeps its requires_grad flag (as a fresh leaf), so that the
    grader can tell a returned piece of the graph from plain values."""
    if isinstance(value, torch.Tensor):
        out = value.detach().clone()
        return out.requires_grad_(True) if value.requires_grad and out.is_floating_point() \
            else out
    if isinstance(value, (list, tuple)):
        return type(value)(_kept(v) for v in value)
    if isinstance(value, dict):
        return {k: _kept(v) for k, v in value.items()}
    return value


def _grads(tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    return {name: None if t.grad is None else t.grad.detach().clone()
            for name, t in tensors.items()}


def tensor_state(t: torch.Tensor) -> dict:
    """What a caller can see of tensor `t`: its values, dtype, shape, requires_grad, whether it
    is a leaf, its type and its .grad (None, or the values)."""
    grad = None
    if t.is_leaf:  # reading .grad of a non-leaf warns
        grad = None if t.grad is None else t.grad.detach().clone()
    return {"values": t.detach().clone(), "dtype": str(t.dtype).removeprefix("torch."),
            "requires_grad": bool(t.requires_grad), "is_leaf": bool(t.is_leaf),
            "type": type(t).__name__, "grad": grad}


def watched_call(module, name: str, args: list, names: list) -> dict:
    """`module.<name>(*args)`, with the state (`tensor_state`) of every tensor argument taken
    before and after the call: {"value": the result (tensors keep requires_grad, see `_kept`),
    "before": {arg name: state}, "after": {arg name: state}}. `names` names the arguments in
    order; only tensor arguments are recorded."""
    watched = {n: a for n, a in zip(names, args) if isinstance(a, torch.Tensor)}
    before = {n: tensor_state(t) for n, t in watched.items()}
    value = getattr(module, name)(*args)
    return {"value": _kept(value), "before": before,
            "after": {n: tensor_state(t) for n, t in watched.items()}}


def grad_fn_chain(module, program: list) -> dict:
    """`module.grad_fn_chain(y)` with y the last tensor of `program`; also reports whether the
    call changed any .grad (it must not run backward)."""
    tensors = build(program)
    named = {str(i): t for i, t in enumerate(tensors) if t.is_leaf and t.requires_grad}
    result = module.grad_fn_chain(tensors[-1])
    return {"value": _plain(result), "grads_after": _grads(named)}


def leaves_reached(module, program: list, names: dict) -> dict:
    """`module.leaves_reached(y, tensors)` with y the last tensor of `program` and tensors
    {name: tensor of step i} for `names` = {name: i}. Reports the .grad of every tensor of the
    program after the call (None everywhere unless the call ran backward)."""
    tensors = build(program)
    passed = {name: tensors[i] for name, i in names.items()}
    result = module.leaves_reached(tensors[-1], passed)
    every = {str(i): t for i, t in enumerate(tensors) if t.is_leaf}
    return {"value": _plain(result), "grads_after": _grads(every)}


def grad_status(module, program: list, names: dict) -> Any:
    """`module.grad_status({name: tensor of step i})` for `names` = {name: i}."""
    tensors = build(program)
    return _plain(module.grad_status({name: tensors[i] for name, i in names.items()}))


# --------------------------------------------------------------------------- trunks and heads
# A trunk maps x (any shape) to h of x's shape; a head maps h to a scalar. The docstring is the
# formula messages show.


def _tanh_scale(x):
    """tanh(1.5 * x)"""
    return torch.tanh(1.5 * x)


def _sin_times_x(x):
    """sin(x) * x"""
    return torch.sin(x) * x


def _mix(x):
    """softplus(x) + 0.3 * x * roll(x, 1) (along the flattened x)"""
    flat = x.reshape(-1)
    return (torch.nn.functional.softplus(flat) + 0.3 * flat * torch.roll(flat, 1)).reshape(
        x.shape)


TRUNKS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh_scale": _tanh_scale, "sin_times_x": _sin_times_x, "mix": _mix,
}


def _cubes(h):
    """sum(4 * h**3)"""
    return (4 * h ** 3).sum()


def _ramp(h):
    """sum(k * h) with k = 0, 1, 2, ... along the flattened h, minus 2.5 * sum(h)"""
    flat = h.reshape(-1)
    k = torch.arange(flat.numel(), dtype=flat.dtype)
    return ((k - 2.5) * flat).sum()


def _softsq(h):
    """sum(exp(h) + 2 * h**2)"""
    return (torch.exp(h) + 2 * h ** 2).sum()


def _total(h):
    """sum(h) (its gradient, all ones, arrives as one value expanded to h's shape: a tensor
    that cannot be written in place)"""
    return h.sum()


HEADS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "cubes": _cubes, "ramp": _ramp, "softsq": _softsq, "total": _total,
}


class _Counted:
    """The trunk `name`, counting its calls and the backward passes through its output (a hook
    on each h it returns, which fires once per pass that reaches h)."""

    def __init__(self, name: str):
        self.fn = TRUNKS[name]
        self.calls = 0
        self.passes = 0

    def __call__(self, x):
        self.calls += 1
        h = self.fn(x)
        if isinstance(h, torch.Tensor) and h.requires_grad:
            h.register_hook(self._seen)
        return h

    def _seen(self, grad):
        self.passes += 1


def _leaf(x: torch.Tensor, grad: torch.Tensor | None = None) -> torch.Tensor:
    leaf = x.detach().clone().requires_grad_(True)
    if grad is not None:
        leaf.grad = grad.detach().clone()
    return leaf


def two_gradients(module, trunk: str, x: torch.Tensor) -> dict:
    """`module.two_gradients(f, x)` with f the named trunk and x a fresh leaf; returns
    {"value": the result (detached), "calls": calls of f, "passes": backward passes through h}."""
    f = _Counted(trunk)
    value = module.two_gradients(f, _leaf(x))
    return {"value": _kept(value), "calls": f.calls, "passes": f.passes}


def weighted_gradient(module, trunk: str, x: torch.Tensor, wa: float, wb: float) -> dict:
    """`module.weighted_gradient(f, x, wa, wb)`, recorded like `two_gradients`."""
    f = _Counted(trunk)
    value = module.weighted_gradient(f, _leaf(x), wa, wb)
    return {"value": _kept(value), "calls": f.calls, "passes": f.passes}


def backward_with_gradient(module, trunk: str, x: torch.Tensor, v: torch.Tensor,
                           x_grad: torch.Tensor | None = None) -> dict:
    """`module.backward_with_gradient(f, x, v)` on a leaf x holding `x_grad` (None: no
    gradient yet); returns {"grad": x.grad afterwards, "calls", "passes"}."""
    f = _Counted(trunk)
    x = _leaf(x, x_grad)
    module.backward_with_gradient(f, x, v)
    return {"grad": None if x.grad is None else x.grad.detach().clone(), "calls": f.calls,
            "passes": f.passes}


class _Watched:
    """The trunk `name`, with a hook registered on each h it returns before the student's: it
    keeps the gradient tensor every later hook receives, and a copy of its values, so that a
    hook that changes its argument in place shows."""

    def __init__(self, name: str):
        self.fn = TRUNKS[name]
        self.arrived: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, x):
        h = self.fn(x)
        if isinstance(h, torch.Tensor) and h.requires_grad:
            h.register_hook(self._seen)
        return h

    def _seen(self, grad):
        self.arrived.append((grad, grad.detach().clone()))

    def changed(self) -> bool:
        """Whether a gradient that arrived at h was changed in place after it arrived."""
        return any(not torch.equal(grad.detach(), copy) for grad, copy in self.arrived)


def clipped_backward(module, trunk: str, head: str, x: torch.Tensor, c: float) -> dict:
    """`module.clipped_backward(f, g, x, c)` with the named trunk and head; returns
    {"value": the result (tensors keep requires_grad), "grad": x.grad afterwards,
    "hook_arg_changed": whether the gradient arriving at h was changed in place}."""
    x = _leaf(x)
    f = _Watched(trunk)
    value = module.clipped_backward(f, HEADS[head], x, c)
    return {"value": _kept(value), "grad": None if x.grad is None else x.grad.detach().clone(),
            "hook_arg_changed": f.changed()}
