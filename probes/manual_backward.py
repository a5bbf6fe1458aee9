"""Probes for `manual_backward`: calls that need live objects (a Python function as an argument,
an autograd graph, `Value` nodes), run inside the worker next to student code.

Checks pick a test function by name. The scalar ones (for `numerical_gradient`) are written once
for numpy and torch (`xp` is the module): the worker runs them on the numpy arrays the student's
code perturbs, and the grader imports this very table to differentiate them with torch autograd
in float64. The vector ones (for `vector_jacobian_product`) are torch only. Nothing here knows an
expected value; each probe returns plain records (arrays, tensors, floats) for the check to judge.
"""

from __future__ import annotations

import contextlib
import io
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

# --------------------------------------------------------------------------- test functions
# Scalar: (xp, x, *consts) -> a scalar (numpy scalar or 0-d tensor), for x of any shape. Moderate
# magnitudes (|f| of order 1-10 on the inputs the checks send) keep finite-difference errors
# predictable. The docstring is the formula students read in messages.


def _sin_times_square(xp, x):
    """sum(sin(x) * x**2)"""
    return (xp.sin(x) * x ** 2).sum()


def _log_sum_exp(xp, x):
    """log(sum(exp(x)))"""
    return xp.log(xp.exp(x).sum())


def _coupled_tanh(xp, x):
    """sum(tanh(x_flat) * roll(x_flat, 1)) + 0.1 * sum(x**3)"""
    # every element meets its neighbour (in flattened order), so the gradient is not elementwise
    flat = x.reshape(-1)
    return (xp.tanh(flat) * xp.roll(flat, 1)).sum() + 0.1 * (flat ** 3).sum()


def _quadratic_form(xp, x, a):
    """0.5 * x_flat @ A @ x_flat, A symmetric"""
    flat = x.reshape(-1)
    return 0.5 * flat @ (a @ flat)


def _exp_cubic(xp, x):
    """sum(exp(x / 2) + x**3 / 3)"""
    # a large third derivative: the error of a difference formula shows clearly
    return (xp.exp(0.5 * x) + x ** 3 / 3.0).sum()


SCALAR_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sin_times_square": _sin_times_square,
    "log_sum_exp": _log_sum_exp,
    "coupled_tanh": _coupled_tanh,
    "quadratic_form": _quadratic_form,
    "exp_cubic": _exp_cubic,
}


# Vector, torch only: (x, *consts) -> a tensor of any shape (0-d for scalar_norm).


def _tanh_of_matmul(x, a):
    """tanh(A @ x), A of shape (3, len(x))"""
    return torch.tanh(a @ x)


def _elementwise(x):
    """sin(x) * x + x**2"""
    return torch.sin(x) * x + x ** 2


def _softmax_rows(x):
    """softmax(x) along the last axis"""
    return torch.softmax(x, dim=-1)


def _outer(x):
    """x[:, None] * cos(x)[None, :]"""
    return x[:, None] * torch.cos(x)[None, :]


def _column_sums(x):
    """(x**3).sum(0)"""
    return (x ** 3).sum(0)


def _scalar_norm(x):
    """sqrt(sum(x**2)), a 0-d tensor"""
    return (x ** 2).sum().sqrt()


VECTOR_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "tanh_of_matmul": _tanh_of_matmul,
    "elementwise": _elementwise,
    "softmax_rows": _softmax_rows,
    "outer": _outer,
    "column_sums": _column_sums,
    "scalar_norm": _scalar_norm,
}


# --------------------------------------------------------------------------- mlp_loss_and_grads


def mlp_params_after_call(module, X: np.ndarray, labels: np.ndarray, params: dict) -> dict:
    """Call `module.mlp_loss_and_grads(X, labels, params)` and report what became of the
    caller's dict: `{"result": the student's result, "rebound": keys now bound to another object,
    "added": keys the call put in, "removed": keys it took out}`. Writes into the arrays
    themselves show through shared memory; replacing an entry (params["W"] = ..., or
    grads = params; grads["W"] = ...) shows only here, where the dict lives."""
    passed = dict(params)
    result = module.mlp_loss_and_grads(X, labels, passed)
    return {"result": result,
            "rebound": sorted(k for k in params if k in passed and passed[k] is not params[k]),
            "added": sorted(str(k) for k in passed if k not in params),
            "removed": sorted(k for k in params if k not in passed)}


# --------------------------------------------------------------------------- numerical_gradient


def numerical_gradient(module, function: str, x: np.ndarray, consts: list, *eps: float):
    """`module.numerical_gradient(f, x[, eps])` with f the named scalar test function; returns
    the student's result. A shared `x` lets the grader see afterwards whether it was restored."""
    fn = SCALAR_FUNCTIONS[function]

    def f(arr):
        return float(fn(np, arr, *consts))

    # eps by keyword, as the contract names it
    return module.numerical_gradient(f, x, **({"eps": eps[0]} if eps else {}))


def numerical_gradient_step(module, function: str, x: np.ndarray) -> dict:
    """`module.numerical_gradient(f, x)` with eps left to its default; records how far from
    x the points f was called at lie (the largest change of one element per call): the step
    the default eps gives. Returns {"value": the result, "steps": one number per call}."""
    fn = SCALAR_FUNCTIONS[function]
    start = np.array(x, dtype=np.float64, copy=True)
    steps: list[float] = []

    def f(arr):
        steps.append(float(np.abs(np.asarray(arr, dtype=np.float64) - start).max()))
        return float(fn(np, arr))

    return {"value": module.numerical_gradient(f, x), "steps": steps}


# ----------------------------------------------------------------------- vector_jacobian_product


def vector_jacobian_product(module, function: str, x: torch.Tensor, v: torch.Tensor,
                            consts: list, x_grad: torch.Tensor | None = None,
                            x_requires_grad: bool = False) -> dict:
    """Call `module.vector_jacobian_product(f, x, v)` with f the named test function.

    `x_requires_grad` / `x_grad` set up the caller's x as a leaf that requires grad, optionally
    holding a gradient already. Returns {"value": the result (detached), "x_grad_before",
    "x_grad_after": x.grad before and after the call (None or a copy)}.
    """
    fn = VECTOR_FUNCTIONS[function]
    x = x.detach().clone()
    if x_requires_grad or x_grad is not None:
        x.requires_grad_(True)
    if x_grad is not None:
        x.grad = x_grad.clone()
    before = None if x.grad is None else x.grad.detach().clone()

    def f(t):
        return fn(t, *consts)

    value = module.vector_jacobian_product(f, x, v)
    after = None if x.grad is None else x.grad.detach().clone()
    if isinstance(value, torch.Tensor):
        value = value.detach()  # a result that still tracks history crosses the wire as values
    return {"value": value, "x_grad_before": before, "x_grad_after": after}


# --------------------------------------------------------------------------- fit_linear_gd


def descent_path(module, X: np.ndarray, y: np.ndarray, lr: float, steps: int) -> list:
    """[w[0], b] after k = 1 .. steps steps of the student's own `fit_linear_gd` (a fresh call
    for each k, since only the end of a run is returned), for the report's picture of the
    path on the loss surface; None where a call failed. Evidence only, never a verdict: what
    the calls print is dropped (the check's output shows its graded call), and three failures
    in a row end the walk."""
    path: list = []
    failures = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for k in range(1, steps + 1):
            try:
                w, b, _ = module.fit_linear_gd(X.copy(), y.copy(), lr, k)
                path.append([float(np.asarray(w, dtype=np.float64).reshape(-1)[0]), float(b)])
                failures = 0
            except Exception:  # noqa: BLE001 - any failure is just a missing point
                path.append(None)
                failures += 1
                if failures == 3:
                    break
    return path


# --------------------------------------------------------------------------- Softplus


def softplus(module, x: torch.Tensor, grad_output: torch.Tensor) -> dict:
    """`y = module.Softplus.apply(x)` on a fresh leaf, then backpropagate `grad_output`.
    Returns {"y": y, "grad": x.grad (None when backward produced none)}."""
    x = x.detach().clone().requires_grad_(True)
    y = module.Softplus.apply(x)
    y_values = y.detach().clone() if isinstance(y, torch.Tensor) else y
    if isinstance(y, torch.Tensor) and y.requires_grad:
        # Backpropagates exactly grad_output into Softplus.backward, like y.backward(grad_output),
        # without the explicit gradient argument whose first use in a process imports sympy
        # (1-2.5 s, measured in a fresh worker).
        (y * grad_output).sum().backward()
    grad = None if x.grad is None else x.grad.detach().clone()
    return {"y": y_values, "grad": grad}


# --------------------------------------------------------------------------- Value

BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
          "truediv": operator.truediv, "pow": operator.pow}
UNARY = {"neg": operator.neg, "relu": lambda v: v.relu(), "tanh": lambda v: v.tanh(),
         "exp": lambda v: v.exp()}


def value_program(module, program: list) -> dict:
    """Build `Value` nodes from `program` and call `backward()` on the last one.

    Each step is `("leaf", number)`, `(unary_op, operand)` or `(binary_op, operand, operand)`,
    an operand being `("node", i)` (the node step i made) or `("const", number)` (a plain Python
    number, so `("const", 2), ("node", 0)` exercises `2 - node` through `__rsub__`).
    Returns {"grad_before": [...], "data": [...], "grad": [...]} with one entry per step
    (`grad_before` read before backward()): a float, or a string describing what the attribute
    held when it was not a number.
    """
    Value = module.Value
    nodes: list[Any] = []

    def operand(spec):
        kind, item = spec
        return nodes[item] if kind == "node" else item

    for step in program:
        op = step[0]
        if op == "leaf":
            nodes.append(Value(step[1]))
        elif op in UNARY:
            nodes.append(UNARY[op](operand(step[1])))
        else:
            nodes.append(BINARY[op](operand(step[1]), operand(step[2])))
        if not isinstance(nodes[-1], Value):
            raise TypeError(f"step {len(nodes) - 1} ({describe_step(step)}) returned "
                            f"{type(nodes[-1]).__name__} {nodes[-1]!r:.60}, not a Value")
    grad_before = [_number(node.grad) for node in nodes]
    nodes[-1].backward()
    return {"grad_before": grad_before,
            "data": [_number(node.data) for node in nodes],
            "grad": [_number(node.grad) for node in nodes]}


def _number(x) -> float | str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    try:
        return float(x)  # numpy scalars, 0-d arrays, one-element tensors
    except (TypeError, ValueError, RuntimeError):
        return f"{type(x).__name__} {x!r:.60}"


def describe_step(step) -> str:
    """A step as the expression it builds, e.g. `2 - n0` or `n3.relu()`."""
    def name(spec):
        return f"n{spec[1]}" if spec[0] == "node" else repr(spec[1])

    op = step[0]
    if op == "leaf":
        return f"Value({step[1]!r})"
    if op == "neg":
        return f"-{name(step[1])}"
    if op in UNARY:
        return f"{name(step[1])}.{op}()"
    symbol = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**"}[op]
    return f"{name(step[1])} {symbol} {name(step[2])}"
