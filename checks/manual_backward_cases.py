"""Inputs the `manual_backward` checks send (how they read what comes back is in
`manual_backward_verify.py`). The answer key is in `manual_backward_reference.py`: autograd
code that does the exercises' work, which a student release must not ship (it gets the values
the visible checks need, recorded).

The scalar and vector test functions come from `probes.manual_backward`, the very table
the worker uses, so the function a submission differentiated and the one the grader
differentiated are the same.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from probes.manual_backward import VECTOR_FUNCTIONS, describe_step

# --------------------------------------------------------------------------- data


def linear_problem(rng: np.random.Generator, n: int, d: int, scale: float = 1.0
                   ) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((n, d)) * scale
    y = X @ rng.standard_normal(d) + rng.standard_normal() + 0.3 * rng.standard_normal(n)
    return X, y


def mlp_params(rng: np.random.Generator, d: int, h: int, c: int) -> dict[str, np.ndarray]:
    return {"W1": rng.standard_normal((d, h)) / math.sqrt(d), "b1": 0.1 * rng.standard_normal(h),
            "W2": rng.standard_normal((h, c)) / math.sqrt(h), "b2": 0.1 * rng.standard_normal(c)}


def away_from_relu_kinks(X: np.ndarray, params: dict, margin: float = 1e-3) -> bool:
    """Whether no hidden pre-activation lies within `margin` of 0 (where relu has no slope)."""
    return bool(np.abs(X @ params["W1"] + params["b1"]).min() > margin)


def vector_output_shape(function: str, x: torch.Tensor, consts=()) -> tuple[int, ...]:
    with torch.no_grad():
        return tuple(VECTOR_FUNCTIONS[function](x, *consts).shape)


# --------------------------------------------------------------------------- Value programs


@dataclass(frozen=True)
class Mirror:
    """A `Value` program evaluated in torch.double: each node's data and grad."""
    data: list[float]
    grad: list[float]


_BINARY: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "pow": operator.pow}
_UNARY: dict[str, Callable[..., Any]] = {
    "neg": operator.neg, "relu": torch.relu, "tanh": torch.tanh, "exp": torch.exp}


def mirror_program(program: list) -> Mirror:
    nodes: list[torch.Tensor] = []

    def operand(spec):
        return nodes[spec[1]] if spec[0] == "node" else spec[1]

    for step in program:
        op = step[0]
        if op == "leaf":
            node = torch.tensor(float(step[1]), dtype=torch.float64, requires_grad=True)
        elif op in _UNARY:
            node = _UNARY[op](operand(step[1]))
        else:
            node = _BINARY[op](operand(step[1]), operand(step[2]))
        if not node.is_leaf:
            node.retain_grad()
        nodes.append(node)
    nodes[-1].backward()
    return Mirror(data=[n.item() for n in nodes],
                  grad=[n.grad.item() if n.grad is not None else 0.0 for n in nodes])


def program_text(program: list, limit: int = 40) -> str:
    """The program as the Python a student can paste: `n0 = Value(1.5)`, `n2 = 2 - n1`, ..."""
    lines = [f"n{i} = {describe_step(step)}" for i, step in enumerate(program)]
    if len(lines) > limit:
        lines = (lines[:limit // 2] + [f"... ({len(lines) - limit} more steps)"]
                 + lines[-limit // 2:])
    lines.append(f"n{len(program) - 1}.backward()")
    return "\n".join("    " + line for line in lines)


# Steering values away from hazards keeps every correct engine and torch in agreement: no
# division by (nearly) zero, no relu input near its kink, no overflow, no fractional power of a
# negative number.
RELU_MARGIN = 0.05
MAX_MAGNITUDE = 30.0
EXPONENTS = [2, 3, -1, 2.0, 0.5, 1.5, -2]


def random_program(rng: np.random.Generator, leaves: int, ops: int, *,
                   const_prob: float = 0.35, same_prob: float = 0.1) -> list:
    """A random `Value` program in which every node reaches the output and earlier nodes are
    reused often (diamonds), with plain numbers on both sides of the binary operators."""
    program: list = []
    values: list[float] = []
    uses: list[int] = []

    def add(step, value):
        program.append(step)
        values.append(value)
        uses.append(0)
        for spec in step[1:]:
            if isinstance(spec, tuple) and spec[0] == "node":
                uses[spec[1]] += 1

    for _ in range(leaves):
        magnitude = float(rng.uniform(0.3, 2.0))
        start = round(magnitude if rng.random() < 0.6 else -magnitude, 4)
        add(("leaf", start), start)
    made = 0
    while made < ops:
        step = _random_step(rng, values, const_prob, same_prob)
        if step is None:
            continue
        value = _evaluate(step, values)
        if value is None or not abs(value) <= MAX_MAGNITUDE or (value != 0 and abs(value) < 1e-3):
            continue
        add(step, value)
        made += 1
    # Sum the nodes nobody used yet into the output, so backward reaches every node.
    loose = [i for i, u in enumerate(uses) if u == 0]
    while len(loose) > 1 or (loose and program[loose[0]][0] == "leaf"):
        a = loose.pop(0)
        if loose:
            b = loose.pop(0)
            add(("add", ("node", a), ("node", b)), values[a] + values[b])
        else:
            add(("mul", ("node", a), ("const", 1.5)), values[a] * 1.5)
        loose.append(len(program) - 1)
    return program


def _random_step(rng: np.random.Generator, values: list[float], const_prob: float,
                 same_prob: float):
    n = len(values)
    op = str(rng.choice(["add", "sub", "mul", "truediv", "pow", "neg", "relu", "tanh", "exp",
                         "add", "mul", "sub"]))
    a = int(rng.integers(n))
    if op in ("neg", "relu", "tanh", "exp"):
        if op == "relu" and abs(values[a]) < RELU_MARGIN:
            return None
        if op == "exp" and values[a] > 3:
            return None
        return (op, ("node", a))
    if op == "pow":
        exponent = EXPONENTS[int(rng.integers(len(EXPONENTS)))]
        if (isinstance(exponent, float) and not exponent.is_integer() and values[a] < 0.2) or \
                (exponent < 0 and abs(values[a]) < 0.3):
            return None
        return ("pow", ("node", a), ("const", exponent))
    b = a if rng.random() < same_prob else int(rng.integers(n))
    other: tuple[str, Any] = ("node", b)
    if rng.random() < const_prob:
        c = float(rng.uniform(0.5, 3.0)) * (1 if rng.random() < 0.5 else -1)
        other = ("const", int(round(c)) if rng.random() < 0.3 else round(c, 3))
    left, right = (("node", a), other) if rng.random() < 0.5 else (other, ("node", a))
    if op == "truediv":
        denominator = right[1] if right[0] == "const" else values[right[1]]
        if abs(denominator) < 0.3:
            return None
    return (op, left, right)


def _evaluate(step, values: list[float]) -> float | None:
    def val(spec):
        return values[spec[1]] if spec[0] == "node" else spec[1]

    op = step[0]
    try:
        if op in ("neg", "relu", "tanh", "exp"):
            x = val(step[1])
            return {"neg": -x, "relu": max(x, 0.0), "tanh": math.tanh(x), "exp": math.exp(x)}[op]
        return float(_BINARY[op](val(step[1]), val(step[2])))
    except (OverflowError, ZeroDivisionError, TypeError):
        return None


# --------------------------------------------------------------------------- MLP cases


def mlp_case(rng, n, d, h, c, b1_shift=0.0):
    """Inputs whose hidden pre-activations all stay away from relu's kink."""
    while True:
        X = rng.standard_normal((n, d))
        params = mlp_params(rng, d, h, c)
        params["b1"] = params["b1"] + b1_shift
        if away_from_relu_kinks(X, params):
            return X, rng.integers(0, c, n), params
