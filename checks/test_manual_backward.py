"""Visible checks for `manual_backward` (CURRICULUM.md section 2).

Every gradient is compared with torch autograd in float64, computed in the grader (inputs in
`manual_backward_cases.py`, answers in `manual_backward_reference.py`, verdicts in
`manual_backward_verify.py`). Functions that take a Python function or build live objects
(`numerical_gradient`, `vector_jacobian_product`, `Softplus`, `Value`) are driven by the probes
in `probes/manual_backward.py`, which return plain records.
"""

import numpy as np
import torch

from manual_backward_cases import linear_problem, mlp_case, vector_output_shape
# In a student release this module is a stand-in that replays recorded values
# (grader/release/replay.py).
from manual_backward_reference import scalar_gradient_reference, vjp_reference
from manual_backward_verify import (ATOL, NUMGRAD_ATOL, NUMGRAD_HINT, NUMGRAD_RTOL,
                                                  RTOL, VJP_HINT, check_cross_entropy, check_mlp,
                                                  check_mse, check_value_program,
                                                  compare_trajectory, expect_values,
                                                  numerical_gradient_call, record_descent_path,
                                                  record_lr_sweep,
                                                  softplus_call, vjp_call)
from grader import check, short


@check(points=2, targets="mse_linear_grads", visibility="visible", autograd=False)
def test_mse_linear_grads_values(sub, evidence):
    """mse_linear_grads matches autograd"""
    rng = np.random.default_rng(301)
    for n, d in [(5, 3), (20, 4), (8, 1)]:
        X, y = linear_problem(rng, n, d)
        w, b = rng.standard_normal(d), float(rng.standard_normal())
        where = f"  # X {X.shape}, y ({n},), w ({d},), b = {b:.4g}"
        check_mse(sub.call("mse_linear_grads", X, y, w, b), X, y, w, b, where=where,
                  evidence=evidence)


@check(points=2, targets="fit_linear_gd", visibility="visible", autograd=False)
def test_fit_linear_gd_trajectory(sub, evidence):
    """fit_linear_gd follows the reference gradient-descent trajectory step for step"""
    rng = np.random.default_rng(302)
    X, y = linear_problem(rng, 30, 3)
    got = sub.call("fit_linear_gd", X, y, 0.1, 25)
    try:
        compare_trajectory(got, X, y, 0.1, 25)
    finally:  # pass or fail, once the verdict is made
        record_descent_path(sub, evidence)
        record_lr_sweep(sub, evidence)


@check(points=2, targets="softmax_cross_entropy", visibility="visible", autograd=False)
def test_softmax_cross_entropy_values(sub, evidence):
    """softmax_cross_entropy matches autograd on moderate logits"""
    rng = np.random.default_rng(303)
    for n, c in [(6, 4), (10, 3), (3, 7)]:
        logits = rng.standard_normal((n, c)) * 3
        labels = rng.integers(0, c, n)
        where = f"  # logits of shape {logits.shape}, labels {short(labels, 60)}"
        check_cross_entropy(sub, logits, labels, where, evidence)


@check(points=2, targets="mlp_loss_and_grads", visibility="visible", autograd=False)
def test_mlp_loss_and_grads_values(sub, evidence):
    """mlp_loss_and_grads matches autograd for a one-hidden-layer network"""
    rng = np.random.default_rng(304)
    for n, d, h, c in [(8, 5, 6, 3), (16, 3, 10, 4)]:
        X, labels, params = mlp_case(rng, n, d, h, c)
        where = f"  # N={n}, D={d}, H={h}, C={c}"
        check_mlp(sub.call("mlp_loss_and_grads", X, labels, params), X, labels, params,
                  where=where, evidence=evidence)


@check(points=2, targets="numerical_gradient", visibility="visible")
def test_numerical_gradient_values(sub):
    """numerical_gradient agrees with the true gradient at the default eps"""
    rng = np.random.default_rng(305)
    for function, shape in [("sin_times_square", (4,)), ("coupled_tanh", (3, 3)),
                            ("log_sum_exp", (5,))]:
        x = rng.uniform(-2, 2, shape)
        label, got = numerical_gradient_call(sub, function, x)
        expect_values(got, scalar_gradient_reference(function, x), call=label,
                      rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL, hint=NUMGRAD_HINT)


@check(points=2, targets="Softplus", visibility="visible")
def test_softplus_values_and_gradients(sub):
    """Softplus.apply computes softplus and backpropagates grad_output * sigmoid(x)"""
    gen = torch.Generator().manual_seed(306)
    for shape in [(7,), (3, 4)]:
        x = torch.randn(shape, generator=gen, dtype=torch.float64) * 3
        grad_output = torch.randn(shape, generator=gen, dtype=torch.float64)
        softplus_call(sub, x, grad_output, f"  # x = {short(x, 120)}, random grad_output")


@check(points=2, targets="vector_jacobian_product", visibility="visible")
def test_vector_jacobian_product_values(sub):
    """vector_jacobian_product equals v^T J for a few functions"""
    gen = torch.Generator().manual_seed(307)
    a = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    cases = [("tanh_of_matmul", torch.randn(5, generator=gen, dtype=torch.float64), (a,)),
             ("elementwise", torch.randn(6, generator=gen, dtype=torch.float64), ()),
             ("softmax_rows", torch.randn(4, generator=gen, dtype=torch.float64), ())]
    for function, x, consts in cases:
        v = torch.randn(vector_output_shape(function, x, consts), generator=gen,
                        dtype=torch.float64)
        label, record = vjp_call(sub, function, x, v, consts)
        expect_values(record["value"], vjp_reference(function, x, v, consts), call=label,
                      rtol=RTOL, atol=ATOL, hint=VJP_HINT)


@check(points=2, targets="Value", visibility="visible", autograd=False)
def test_value_simple_expression(sub):
    """Value computes data and gradients of a small expression (nodes used twice)"""
    # n0 feeds n2 and n3; n3 feeds n4 and n5: a gradient that is not accumulated, or passed
    # on before every use has added to it, comes out wrong.
    program = [("leaf", 0.5), ("leaf", -1.5), ("mul", ("node", 0), ("node", 1)),
               ("add", ("node", 2), ("node", 0)), ("tanh", ("node", 3)),
               ("mul", ("node", 4), ("node", 3)), ("add", ("node", 5), ("const", 1.0)),
               ("exp", ("node", 6))]
    check_value_program(sub, program, title="a small Value expression")
