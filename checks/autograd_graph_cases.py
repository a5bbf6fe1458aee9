"""Inputs of the `autograd_graph` checks, shipped with the visible checks (hidden-only inputs are
in `autograd_graph_cases_hidden.py`).

Graphs are programs, lists of steps that `probes.autograd_graph.build` turns into tensors
(in the worker for the student's function, in the grader for the answer key); `describe` writes a
program as the code students read in messages.
"""

from __future__ import annotations

import torch

# grad_fn_chain: the docstring's chain, and two more.
CHAINS = [
    [("leaf", [1.0, 2.0], True), ("const_mul", 0, 2.0), ("exp", 1), ("const_add", 2, 1.0),
     ("sum", 3)],
    [("leaf", [[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], True), ("tanh", 0), ("t", 1),
     ("square", 2), ("mean", 3)],
    [("leaf", [0.3, -0.7, 1.1], True), ("sigmoid", 0), ("const_sub", 1, 0.5), ("neg", 2)],
]

# leaves_reached: (program, {name: step}); y is the last step.
LEAF_GRAPHS = [
    # the docstring's example: b only through detach(), c needs no grad, h is no leaf
    ([("leaf", [1.0, 2.0], True), ("leaf", [3.0, 4.0], True), ("leaf", [5.0, 6.0], False),
      ("mul", 0, 2), ("detach", 1), ("add", 3, 4), ("tanh", 0), ("add", 5, 6), ("sum", 7)],
     {"b": 1, "a": 0, "c": 2, "h": 3}),
    # w and v meet in p, which two branches use; u is never used
    ([("leaf", [0.5, -1.5], True), ("leaf", [2.0, 0.25], True), ("leaf", [1.0, 1.0], True),
      ("mul", 0, 1), ("square", 3), ("add", 4, 3), ("sum", 5)],
     {"w": 0, "v": 1, "u": 2, "p": 3}),
]

# grad_status: the docstring's first example.
STATUS_GRAPHS = [
    ([("leaf", [1.0, -1.0], True), ("const_mul", 0, 3.0), ("detach", 0), ("no_grad_tanh", 0)],
     {"w": 0, "h": 1, "frozen": 2, "quiet": 3}),
]

TRUNK_CASES = [("tanh_scale", (4,)), ("sin_times_x", (2, 3))]
WEIGHTS = [(1.0, 0.5), (-2.0, 0.25)]

VISIBLE_INPLACE = ["sin_add_", "exp_add_", "sigmoid_clone_mul_"]

CLIP_CASES = [("tanh_scale", "cubes", (5,), 2.0)]


def tensor(seed: int, shape, scale: float = 1.0) -> torch.Tensor:
    """A seeded float64 tensor of `shape`."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64) * scale


def describe(program: list) -> str:
    """The program as code: `t0 = leaf(...)`, `t3 = t1 * t2`, ... (the last line is y)."""
    ops = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}
    lines = []
    for i, step in enumerate(program):
        op, args = step[0], step[1:]
        if op == "leaf":
            text = f"torch.tensor({args[0]}, requires_grad={bool(args[1])})"
        elif op == "param":
            text = f"nn.Parameter(torch.tensor({args[0]}))"
        elif op == "detach":
            text = f"t{args[0]}.detach()"
        elif op == "requires_grad_":
            text = f"t{args[0]}.detach().requires_grad_()"
        elif op == "retain_grad":
            text = f"t{args[0]}  # after t{args[0]}.retain_grad()"
        elif op == "freeze":
            text = f"t{args[0]}.requires_grad_(False)"
        elif op.startswith("no_grad_"):
            text = f"{op.removeprefix('no_grad_')}(t{args[0]})  # under torch.no_grad()"
        elif op.startswith("const_"):
            text = f"t{args[0]} {ops[op.removeprefix('const_')]} {args[1]!r}"
        elif op in ops:
            text = f"t{args[0]} {ops[op]} t{args[1]}"
        else:
            text = f"{op}(t{args[0]})"
        lines.append(f"t{i} = {text}")
    return "; ".join(lines)
