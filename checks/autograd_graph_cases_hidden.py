"""Hidden inputs of the `autograd_graph` checks: never shipped."""

from __future__ import annotations

import numpy as np

UNARY_STEPS = ["exp", "tanh", "sin", "sigmoid", "neg", "square", "clone", "log1p_abs", "relu",
               "flat"]
BINARY_STEPS = ["add", "sub", "mul", "div"]


def random_chain(seed: int, length: int = 6) -> list:
    """A chain from one leaf (step 0) with a constant tensor (step 1, no grad) used on either
    side of binary operations: a node whose constant input comes first has (None, 0) as its
    first next function."""
    rng = np.random.default_rng(seed)
    program: list = [("leaf", rng.uniform(0.5, 1.5, 3).round(3).tolist(), True),
                     ("leaf", rng.uniform(0.5, 1.5, 3).round(3).tolist(), False)]
    prev = 0
    for _ in range(length):
        if rng.random() < 0.5:
            op = BINARY_STEPS[rng.integers(len(BINARY_STEPS))]
            step: tuple[object, ...] = (op, 1, prev) if rng.random() < 0.5 else (op, prev, 1)
        elif rng.random() < 0.3:
            step = ("const_" + BINARY_STEPS[rng.integers(len(BINARY_STEPS))], prev,
                    round(float(rng.uniform(0.5, 2.0)), 2))
        else:
            step = (UNARY_STEPS[rng.integers(len(UNARY_STEPS))], prev)
        program.append(step)
        prev = len(program) - 1
    program.append(("sum" if seed % 2 else "mean", prev))
    return program


SPECIAL_CHAINS = [
    # y is the leaf itself, and y does not require grad: no grad_fn, []
    [("leaf", [1.0, 2.0], True)],
    [("leaf", [1.0, 2.0], False), ("exp", 0), ("sum", 1)],
    # the constant first in a product: MulBackward0's next_functions start with (None, 0)
    [("leaf", [1.0, 2.0], True), ("leaf", [3.0, 4.0], False), ("mul", 1, 0), ("tanh", 2),
     ("matmul", 3, 1)],
    # a detached middle: the chain ends where the graph was cut
    [("leaf", [1.0, 2.0], True), ("exp", 0), ("requires_grad_", 1), ("sin", 2), ("sum", 3)],
]

LEAF_GRAPHS_HIDDEN = [
    # a Parameter, a leaf used only under no_grad, a fresh leaf made by detach().requires_grad_()
    ([("param", [0.5, 1.0]), ("leaf", [1.0, -1.0], True), ("leaf", [2.0, 2.0], True),
      ("requires_grad_", 2), ("no_grad_tanh", 1), ("mul", 0, 4), ("add", 5, 3), ("sum", 6)],
     {"p": 0, "q": 1, "r": 2, "r2": 3, "s": 4}),
    # only the second branch of the last node reaches b; a frozen leaf; a leaf used twice
    ([("leaf", [1.0, 2.0], True), ("leaf", [0.5, 0.5], True), ("leaf", [3.0, 1.0], True),
      ("freeze", 2), ("mul", 3, 0), ("mul", 0, 0), ("exp", 1), ("add", 4, 5), ("mul", 7, 6),
      ("sum", 8)],
     {"a": 0, "b": 1, "c": 2, "m": 5}),
    # a deep chain with the leaf at the bottom of the second input
    ([("leaf", [1.0], False), ("leaf", [2.0], True)] + [("const_mul", 0, 2.0)]
     + [("tanh", i) for i in range(2, 12)] + [("add", 12, 1), ("sum", 13)],
     {"k": 0, "z": 1, "mid": 7}),
    # y = h + h forty times over: 2**40 paths down to the leaves, 41 nodes (and a leaf on
    # the side): only a walk that visits each node once ends
    ([("leaf", [0.5, -0.5], True), ("leaf", [1.0, 2.0], True), ("mul", 0, 1)]
     + [("add", i, i) for i in range(2, 42)] + [("sum", 42)],
     {"a": 0, "b": 1}),
]

STATUS_GRAPHS_HIDDEN = [
    ([("param", [0.5, 1.0]), ("leaf", [1.0, 2.0], True), ("leaf", [3.0, 4.0], False),
      ("mul", 0, 1), ("retain_grad", 3), ("clone", 1), ("requires_grad_", 3), ("add", 2, 2),
      ("leaf", [5.0, 6.0], True), ("freeze", 8), ("mul", 2, 9), ("sum", 3)],
     {"param": 0, "x": 1, "const": 2, "kept": 4, "copy": 5, "fresh": 6, "const_sum": 7,
      "frozen": 9, "const_product": 10, "total": 11}),
]

# The contract's cases (exercises/autograd_graph.py), every one run by the hidden check.
INPLACE_CASES = ("sin_add_", "exp_add_", "saved_mul_add_", "unsaved_add_add_", "leaf_mul_",
                 "relu_", "sigmoid_mul_", "sigmoid_clone_mul_", "sigmoid_data_mul_",
                 "leaf_no_grad_mul_")
INPLACE_X = [[-1.0, 0.5, 2.0], [0.25, -0.75, 1.5, 3.0]]

# "total" is g(h) = h.sum(): dL/dh arrives as one value expanded to h's shape, which a hook that
# clamps its argument in place (clamp_) cannot write.
CLIP_CASES_HIDDEN = [("sin_times_x", "softsq", (2, 3), 1.5), ("mix", "ramp", (6,), 1.0),
                     ("tanh_scale", "cubes", (4,), 100.0), ("tanh_scale", "total", (4,), 0.5)]
