"""Visible checks for `autograd_graph`.

The graphs a function walks are built in the worker by `probes/autograd_graph.py` from the
programs in `autograd_graph_cases.py` (a graph cannot cross the process boundary); the answers
come from torch in the grader (`autograd_graph_reference.py`), the verdicts from
`autograd_graph_verify.py`.
"""

import torch

from autograd_graph_cases import (CHAINS, CLIP_CASES, LEAF_GRAPHS, STATUS_GRAPHS, TRUNK_CASES,
                                  VISIBLE_INPLACE, WEIGHTS, describe, tensor)
# In a student release this module is a stand-in that replays recorded values.
from autograd_graph_reference import (chain_reference, clipped_reference, frozen_reference,
                                      hidden_grad_reference, inplace_reference,
                                      reached_reference, status_reference,
                                      trunk_losses_reference, vjp_reference)
from autograd_graph_verify import (CHAIN_HINT, INPLACE_HINT, LEAVES_HINT, WEIGHTED_HINT,
                                   check_clipped, check_frozen, check_vjp,
                                   check_hidden_grad, check_two_gradients, expect_names,
                                   expect_status, expect_tensor)
from grader import check, fail


@check(points=2, targets="grad_fn_chain", visibility="visible")
def test_grad_fn_chain_values(sub):
    """grad_fn_chain names the nodes from y back to the leaf"""
    for program in CHAINS:
        call = f"grad_fn_chain(y)  # {describe(program)}"
        record = sub.probe("autograd_graph:grad_fn_chain", program, label=call)
        expect_names(record["value"], chain_reference(program), call=call, hint=CHAIN_HINT)


@check(points=2, targets="leaves_reached", visibility="visible", autograd=False)
def test_leaves_reached_values(sub):
    """leaves_reached lists the leaves the graph of y reaches"""
    for program, names in LEAF_GRAPHS:
        call = (f"leaves_reached(y, {{{', '.join(f'{n!r}: t{i}' for n, i in names.items())}}})"
                f"  # {describe(program)}")
        record = sub.probe("autograd_graph:leaves_reached", program, names, label=call)
        expect_names(record["value"], reached_reference(program, names), call=call,
                     hint=LEAVES_HINT)


@check(points=2, targets="grad_status", visibility="visible")
def test_grad_status_values(sub):
    """grad_status tells leaves from the rest, and which tensors keep .grad"""
    for program, names in STATUS_GRAPHS:
        call = (f"grad_status({{{', '.join(f'{n!r}: t{i}' for n, i in names.items())}}})"
                f"  # {describe(program)}")
        got = sub.probe("autograd_graph:grad_status", program, names, label=call)
        expect_status(got, status_reference(program, names), call=call)


@check(points=2, targets="hidden_grad", visibility="visible")
def test_hidden_grad_values(sub):
    """hidden_grad returns dL/dh for the intermediate h and dL/dw"""
    for seed, (n, d, h) in enumerate([(4, 3, 2), (1, 2, 5)]):
        x, w = tensor(seed, (n, d)), tensor(seed + 50, (d, h))
        call = f"hidden_grad(x, w)  # x {tuple(x.shape)}, w {tuple(w.shape)}"
        check_hidden_grad(sub.call("hidden_grad", x, w), x, w, hidden_grad_reference(x, w),
                          call=call)


@check(points=2, targets="two_gradients", visibility="visible")
def test_two_gradients_values(sub):
    """two_gradients returns each loss's gradient on its own"""
    for seed, (trunk, shape) in enumerate(TRUNK_CASES):
        x = tensor(100 + seed, shape)
        call = f"two_gradients(f, x)  # f = {trunk}, x of shape {shape}"
        record = sub.probe("autograd_graph:two_gradients", trunk, x, label=call)
        check_two_gradients(record, trunk_losses_reference(trunk, x), call=call)


@check(points=2, targets="weighted_gradient", visibility="visible")
def test_weighted_gradient_values(sub):
    """weighted_gradient is the gradient of wa * L_a + wb * L_b"""
    for seed, ((trunk, shape), (wa, wb)) in enumerate(zip(TRUNK_CASES, WEIGHTS)):
        x = tensor(200 + seed, shape)
        call = f"weighted_gradient(f, x, {wa}, {wb})  # f = {trunk}, x of shape {shape}"
        record = sub.probe("autograd_graph:weighted_gradient", trunk, x, wa, wb, label=call)
        ga, gb = trunk_losses_reference(trunk, x)
        expect_tensor(record["value"], wa * ga + wb * gb, call=call, hint=WEIGHTED_HINT)


# The first y.backward(v) in a process imports sympy (1-2.5 s measured): a wider deadline.
@check(points=2, targets="backward_with_gradient", visibility="visible", timeout=20)
def test_backward_with_gradient_values(sub):
    """backward_with_gradient puts v^T J into x.grad"""
    x, v = tensor(300, (4,)), tensor(301, (4,))
    call = "backward_with_gradient(f, x, v)  # f = sin_times_x, x.grad None before"
    record = sub.probe("autograd_graph:backward_with_gradient", "sin_times_x", x, v, label=call)
    check_vjp(record, vjp_reference("sin_times_x", x, v),
              vjp_reference("sin_times_x", x, torch.ones_like(v)), call=call)


@check(points=2, targets="inplace_case", visibility="visible")
def test_inplace_case_values(sub):
    """inplace_case: an in-place change autograd accepts, one it refuses, and the fix"""
    for values in ([0.0, 1.0], [-1.0, 0.5, 2.0]):
        x = torch.tensor(values, dtype=torch.float64)
        for case in VISIBLE_INPLACE:
            call = f"inplace_case({case!r}, x)  # x = {values}"
            got, expected = sub.call("inplace_case", case, x), inplace_reference(case, x)
            if isinstance(expected, str):
                if got != expected:
                    fail(f"{call} returned {got!r}; expected 'error': autograd refuses this "
                         "case.", call=call, expected="'error'", got=repr(got),
                         hint=INPLACE_HINT)
            else:
                expect_tensor(got, expected, call=call, hint=INPLACE_HINT)


@check(points=2, targets="frozen_encoder_grads", visibility="visible")
def test_frozen_encoder_grads_values(sub):
    """frozen_encoder_grads reaches x through the frozen encoder"""
    for seed, (n, d, h, k) in enumerate([(1, 2, 1, 1), (4, 3, 5, 2)]):
        x, we, wh = tensor(400 + seed, (n, d)), tensor(410 + seed, (d, h)), \
            tensor(420 + seed, (h, k))
        t = tensor(430 + seed, (n, k))
        call = f"frozen_encoder_grads(x, We, Wh, t)  # N={n}, D={d}, H={h}, K={k}"
        check_frozen(sub.call("frozen_encoder_grads", x, we, wh, t),
                     frozen_reference(x, we, wh, t), call=call)


@check(points=2, targets="clipped_backward", visibility="visible")
def test_clipped_backward_values(sub):
    """clipped_backward clips h's gradient with a hook and records what it saw"""
    for seed, (trunk, head, shape, c) in enumerate(CLIP_CASES):
        x = tensor(500 + seed, shape)
        call = f"clipped_backward(f, g, x, {c})  # f = {trunk}, g = {head}, x of shape {shape}"
        record = sub.probe("autograd_graph:clipped_backward", trunk, head, x, c, label=call)
        check_clipped(record, clipped_reference(trunk, head, x, c), call=call)
