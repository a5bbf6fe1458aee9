"""Hidden checks for `autograd_graph`: random chains and branching graphs, every kind of leaf,
other shapes, the side effects the contract forbids (a backward while walking, a second call
of f, a second backward pass), each pitfall of the seeds with the fault it means."""

import torch

from autograd_graph_cases import TRUNK_CASES, describe, tensor
from autograd_graph_cases_hidden import (CLIP_CASES_HIDDEN, INPLACE_CASES, INPLACE_X,
                                         LEAF_GRAPHS_HIDDEN, SPECIAL_CHAINS,
                                         STATUS_GRAPHS_HIDDEN, random_chain)
from autograd_graph_reference import (chain_reference, clipped_reference, frozen_reference,
                                      hidden_grad_reference, inplace_reference,
                                      reached_reference, status_reference,
                                      trunk_losses_reference, vjp_reference)
from autograd_graph_verify import (CHAIN_HINT, INPLACE_HINT, LEAVES_HINT, TWO_HINT, VJP_HINT,
                                   WEIGHTED_HINT, check_clipped, check_frozen,
                                   check_hidden_grad, check_two_gradients, check_vjp,
                                   expect_grads_untouched, expect_left_as_they_were,
                                   expect_names, expect_one_forward, expect_status,
                                   expect_tensor, student_error_fault)
from grader import StudentError, check, fail


@check(points=2, targets="grad_fn_chain")
def test_grad_fn_chain_any_chain(sub):
    """grad_fn_chain: constants on either side, no grad_fn, a cut graph, no backward run"""
    for program in SPECIAL_CHAINS + [random_chain(seed) for seed in range(600, 606)]:
        call = f"grad_fn_chain(y)  # {describe(program)}"
        record = sub.probe("autograd_graph:grad_fn_chain", program, label=call)
        expect_names(record["value"], chain_reference(program), call=call, hint=CHAIN_HINT)
        expect_grads_untouched(record["grads_after"], call=call, hint=CHAIN_HINT)


@check(points=2, targets="leaves_reached", autograd=False)
def test_leaves_reached_branches(sub):
    """leaves_reached: every branch, Parameters, no_grad and detach, without a backward"""
    for program, names in LEAF_GRAPHS_HIDDEN:
        call = (f"leaves_reached(y, {{{', '.join(f'{n!r}: t{i}' for n, i in names.items())}}})"
                f"  # {describe(program)}")
        record = sub.probe("autograd_graph:leaves_reached", program, names, label=call)
        expect_names(record["value"], reached_reference(program, names), call=call,
                     hint=LEAVES_HINT)
        expect_grads_untouched(record["grads_after"], call=call, hint=LEAVES_HINT)


@check(points=2, targets="grad_status")
def test_grad_status_every_kind(sub):
    """grad_status: Parameters, retain_grad, clones, fresh leaves, frozen and constant tensors"""
    for program, names in STATUS_GRAPHS_HIDDEN:
        call = (f"grad_status({{{', '.join(f'{n!r}: t{i}' for n, i in names.items())}}})"
                f"  # {describe(program)}")
        got = sub.probe("autograd_graph:grad_status", program, names, label=call)
        expect_status(got, status_reference(program, names), call=call)


@check(points=2, targets="hidden_grad")
def test_hidden_grad_shapes(sub):
    """hidden_grad for other shapes, with saturated tanh units; x and w left as they were"""
    for seed, (n, d, h, scale) in enumerate([(7, 4, 6, 1.0), (3, 1, 1, 0.5), (5, 3, 4, 4.0)]):
        x, w = tensor(700 + seed, (n, d)), tensor(710 + seed, (d, h), scale)
        call = f"hidden_grad(x, w)  # x {tuple(x.shape)}, w {tuple(w.shape)}"
        record = sub.probe("autograd_graph:watched_call", "hidden_grad", [x, w], ["x", "w"],
                           label=call)
        check_hidden_grad(record["value"], x, w, hidden_grad_reference(x, w), call=call)
        expect_left_as_they_were(record, call=call)


@check(points=3, targets="two_gradients")
def test_two_gradients_one_forward(sub):
    """two_gradients: f called once, a second backward through the kept graph, fresh gradients"""
    cases = TRUNK_CASES + [("mix", (5,)), ("tanh_scale", (1,))]
    for seed, (trunk, shape) in enumerate(cases):
        x = tensor(800 + seed, shape, 1.5)
        call = f"two_gradients(f, x)  # f = {trunk}, x of shape {shape}"
        try:
            record = sub.probe("autograd_graph:two_gradients", trunk, x, label=call)
        except StudentError as exc:
            student_error_fault(exc, "backward through the graph a second time",
                                "double-backward",
                                "The first backward pass freed the graph of h that the second "
                                "needs.", TWO_HINT)
        check_two_gradients(record, trunk_losses_reference(trunk, x), call=call)
        expect_one_forward(record, call=call, why="h is shared by the losses", hint=TWO_HINT)


@check(points=2, targets="weighted_gradient")
def test_weighted_gradient_one_pass(sub):
    """weighted_gradient: one forward, one backward pass, any weights"""
    cases = [("mix", (6,), 0.7, -1.3), ("sin_times_x", (3, 2), 0.0, 2.0),
             ("tanh_scale", (4,), 3.0, 0.0)]
    for seed, (trunk, shape, wa, wb) in enumerate(cases):
        x = tensor(900 + seed, shape, 1.5)
        call = f"weighted_gradient(f, x, {wa}, {wb})  # f = {trunk}, x of shape {shape}"
        try:
            record = sub.probe("autograd_graph:weighted_gradient", trunk, x, wa, wb, label=call)
        except StudentError as exc:
            student_error_fault(exc, "backward through the graph a second time",
                                "double-backward", "Two backward passes shared the graph of h; "
                                "one pass on the weighted sum needs no second.", WEIGHTED_HINT)
        ga, gb = trunk_losses_reference(trunk, x)
        expect_tensor(record["value"], wa * ga + wb * gb, call=call, hint=WEIGHTED_HINT)
        expect_one_forward(record, call=call, why="one h = f(x) serves both losses",
                           hint=WEIGHTED_HINT)
        if record["passes"] > 1:
            fail(f"{call} ran {record['passes']} backward passes through h; the contract asks "
                 "for one, on the weighted sum.", call=call, expected="1 backward pass",
                 got=f"{record['passes']} passes", hint=WEIGHTED_HINT, fault="double-backward")


@check(points=2, targets="backward_with_gradient", timeout=20)
def test_backward_with_gradient_accumulates(sub):
    """backward_with_gradient adds v^T J to a gradient already in x.grad, for any shape"""
    cases = [("mix", (5,), True), ("tanh_scale", (2, 3), True), ("sin_times_x", (3,), False)]
    for seed, (trunk, shape, held) in enumerate(cases):
        x, v = tensor(1000 + seed, shape), tensor(1010 + seed, shape)
        before = tensor(1020 + seed, shape) if held else None
        call = (f"backward_with_gradient(f, x, v)  # f = {trunk}, x of shape {shape}, x.grad "
                f"{'holding a gradient' if held else 'None'} before")
        record = sub.probe("autograd_graph:backward_with_gradient", trunk, x, v, before,
                           label=call)
        check_vjp(record, vjp_reference(trunk, x, v), vjp_reference(trunk, x, torch.ones_like(v)),
                  call=call, before=before)
        expect_one_forward(record, call=call, why="y = f(x) is computed once, then "
                           "backpropagated with v", hint=VJP_HINT)


@check(points=3, targets="inplace_case")
def test_inplace_case_every_case(sub):
    """inplace_case: every case of the contract, x left as it was, ValueError for a bad case"""
    for values in INPLACE_X:
        x = torch.tensor(values, dtype=torch.float64)
        for case in INPLACE_CASES:
            call = f"inplace_case({case!r}, x)  # x = {values}"
            try:
                record = sub.probe("autograd_graph:watched_call", "inplace_case", [case, x],
                                   ["case", "x"], label=call)
            except StudentError as exc:
                student_error_fault(exc, "modified by an inplace operation",
                                    "inplace-on-saved-tensor",
                                    "The case raises RuntimeError: the contract asks for "
                                    "'error' then.", INPLACE_HINT)
            expect_left_as_they_were(record, call=call)
            got, expected = record["value"], inplace_reference(case, x)
            if isinstance(expected, str):
                if got != expected:
                    fail(f"{call} returned {got!r}; expected 'error': autograd refuses this "
                         "case.", call=call, expected="'error'", got=repr(got),
                         hint=INPLACE_HINT)
            elif isinstance(got, str):
                fault = "inplace-on-saved-tensor" if case == "sigmoid_clone_mul_" else None
                fail(f"{call} returned {got!r}; autograd accepts this case and x's gradient "
                     "was expected.", call=call, expected="a tensor", got=repr(got),
                     hint=INPLACE_HINT, fault=fault)
            else:
                expect_tensor(got, expected, call=call, hint=INPLACE_HINT)
    sub.raises(ValueError, "inplace_case", "no_such_case", torch.zeros(2, dtype=torch.float64),
               hint="an unknown case raises ValueError")


@check(points=2, targets="frozen_encoder_grads")
def test_frozen_encoder_grads_more(sub):
    """frozen_encoder_grads: other shapes, We requiring grad or not, arguments left as they were"""
    for seed, (n, d, h, k, we_grad) in enumerate([(6, 4, 3, 3, True), (2, 5, 8, 1, True),
                                                  (3, 2, 2, 2, False)]):
        x, wh = tensor(1100 + seed, (n, d)), tensor(1110 + seed, (h, k))
        we = tensor(1120 + seed, (d, h)).requires_grad_(we_grad)
        t = tensor(1130 + seed, (n, k))
        call = (f"frozen_encoder_grads(x, We, Wh, t)  # N={n}, D={d}, H={h}, K={k}, We "
                f"{'requiring' if we_grad else 'not requiring'} grad")
        record = sub.probe("autograd_graph:watched_call", "frozen_encoder_grads",
                           [x, we, wh, t], ["x", "We", "Wh", "t"], label=call)
        check_frozen(record["value"], frozen_reference(x, we.detach(), wh, t), call=call)
        expect_left_as_they_were(record, call=call)


@check(points=2, targets="clipped_backward")
def test_clipped_backward_more(sub):
    """clipped_backward for other functions, a bound no gradient reaches, no in-place hook"""
    for seed, (trunk, head, shape, c) in enumerate(CLIP_CASES_HIDDEN):
        x = tensor(1200 + seed, shape, 1.5)
        call = f"clipped_backward(f, g, x, {c})  # f = {trunk}, g = {head}, x of shape {shape}"
        record = sub.probe("autograd_graph:clipped_backward", trunk, head, x, c, label=call)
        check_clipped(record, clipped_reference(trunk, head, x, c), call=call)
