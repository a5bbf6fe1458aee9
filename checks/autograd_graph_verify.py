"""How the `autograd_graph` checks (visible and hidden) read what comes back and judge it,
shipped with the visible checks. Expected values come from `autograd_graph_reference.py`
(replayed from recorded values in a student release).

Tolerances: the reference solution and the answer key compute the same float64 operations
(measured: identical, or within 2e-16 relative where torch.func takes another path), so
rtol 1e-10 / atol 1e-12 leaves a wide margin while any wrong formula, a missing weight, an
unclipped gradient or a gradient summed twice is off by far more.
"""

from __future__ import annotations

import torch

from grader import CheckFailure, expect_array, fail, short

RTOL, ATOL = 1e-10, 1e-12

CHAIN_HINT = ("start at y.grad_fn; for each node append type(node).__name__, then move to the "
              "node of its next_functions that is not None; stop after the node that has no "
              "next functions (AccumulateGrad, the leaf's).")
LEAVES_HINT = ("walk every branch: a stack of nodes, starting with y.grad_fn, each node pushing "
               "the nodes of its next_functions that are not None; an AccumulateGrad node holds "
               "its leaf in node.variable. Compare tensors with `is`; do not call backward.")
STATUS_HINT = ("leaf: t.is_leaf; keeps_grad: t.requires_grad and (t.is_leaf or t.retains_grad).")
NON_LEAF_HINT = ("h is not a leaf: after backward its .grad is None unless h.retain_grad() was "
                 "called before; or get both gradients at once with "
                 "torch.autograd.grad(L, [h, w]).")
TWO_HINT = ("h = f(x) once; L_a.backward(retain_graph=True) keeps the graph for the second pass; "
            "copy x.grad (x.grad.clone()) and reset it (x.grad = None) before L_b.backward(); or "
            "torch.autograd.grad(L_a, x, retain_graph=True) and torch.autograd.grad(L_b, x).")
WEIGHTED_HINT = ("build L = wa * L_a + wb * L_b from one h = f(x) and run one backward pass on L: "
                 "autograd weights every contribution itself.")
VJP_HINT = ("y = f(x); y.backward(v): v is the gradient of y, and backward adds v^T J into "
            "x.grad (never assign x.grad yourself).")
INPLACE_HINT = ("run the case's code exactly as the contract writes it, and catch RuntimeError "
                "(try: ... except RuntimeError: return 'error'); return xl.grad otherwise.")
FROZEN_HINT = ("keep the graph from L back to x: make a leaf copy of x that requires grad and "
               "freeze the encoder's WEIGHT (We.detach() in the forward, or compute only the "
               "gradients you need with torch.autograd.grad(L, [x, Wh])); h.detach() or "
               "torch.no_grad() around the encoder cut x off as well.")
CLIP_HINT = ("def hook(grad): seen.append(grad.clone()); return grad.clamp(-c, c); "
             "h.register_hook(hook) before g(h).backward(): the hook's return value replaces "
             "the gradient.")


def plain_tensor(got):
    """A returned tensor's values (`expect_tensor` has failed one that requires grad)."""
    return got.detach() if isinstance(got, torch.Tensor) else got


def expect_tensor(got, expected: torch.Tensor, *, call: str, hint: str) -> None:
    """A torch tensor of expected's shape (any float dtype) with expected's values, that does
    not require grad (every tensor this module's functions return is plain values)."""
    if got is None:
        fail(f"{call} returned None; expected a tensor of shape {tuple(expected.shape)}.",
             call=call, expected=f"a tensor of shape {tuple(expected.shape)}", got="None",
             hint=hint)
    if isinstance(got, torch.Tensor) and got.requires_grad:
        fail(f"{call} returned a tensor that requires grad: a piece of the graph (a gradient "
             "computed with create_graph=True, or a result not detached), where the contract "
             "asks for a tensor that does not require grad.", call=call,
             expected="a tensor that does not require grad", got="a tensor that requires grad",
             hint="return values: .detach() a result that requires grad, and compute gradients "
                  "without create_graph=True (it is for gradients of gradients).")
    expect_array(plain_tensor(got), expected.detach(), call=call, rtol=RTOL, atol=ATOL,
                 check_dtype=False, hint=hint)


def close(got, expected: torch.Tensor) -> bool:
    """Whether `got` is a tensor of expected's shape and values (for naming a mistake)."""
    got = plain_tensor(got)
    return (isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(expected.shape)
            and bool(torch.allclose(got.to(torch.float64), expected, rtol=1e-8, atol=1e-10)))


def as_pair(got, *, call: str, what: str) -> tuple:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail(f"{call} returned {short(got)}; expected {what}.", call=call, expected=what,
             got=short(got))
    return tuple(got)


def expect_names(got, expected: list[str], *, call: str, hint: str,
                 ordered: bool = True) -> None:
    """A list of strings equal to `expected`, exactly (the contract names the strings:
    `type(node).__name__`, whose AccumulateGrad is not node.name()'s
    'torch::autograd::AccumulateGrad')."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(n, str) for n in got):
        fail(f"{call} returned {short(got)}; expected a list of strings.", call=call,
             expected=short(expected), got=short(got), hint=hint)
    names = list(got)
    if (names if ordered else sorted(names)) != expected:
        qualified = [n for n in names if "::" in n]
        why = (f" ({qualified[0]!r} is what node.name() gives; the contract asks for "
               "type(node).__name__)") if qualified else ""
        fail(f"{call} returned {short(names, 400)}; expected {short(expected, 400)}{why}.",
             call=call, expected=short(expected), got=short(names), hint=hint)


def expect_grads_untouched(grads_after: dict, *, call: str, hint: str) -> None:
    """Every leaf's .grad is still None after the call (it must not run backward)."""
    touched = sorted(k for k, g in grads_after.items() if g is not None)
    if touched:
        fail(f"{call} left a gradient in the .grad of t{', t'.join(touched)}: it ran a "
             "backward pass, and the contract asks to walk the graph without one.", call=call,
             expected=".grad left as it was (None)", got=f".grad of t{touched[0]} set",
             hint=hint)


def expect_status(got, expected: dict, *, call: str) -> None:
    if not isinstance(got, dict) or set(got) != set(expected):
        fail(f"{call} returned {short(got, 300)}; expected a dict with the keys "
             f"{sorted(expected)}.", call=call, expected=short(expected), got=short(got),
             hint=STATUS_HINT)
    for name, (leaf, keeps) in expected.items():
        pair = got[name]
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(type(b) is bool for b in pair)):
            kinds = ", ".join(type(b).__name__ for b in pair) \
                if isinstance(pair, (tuple, list)) else type(pair).__name__
            fail(f"{call}[{name!r}] is {short(pair)} ({kinds}); expected a pair of Python "
                 "bools (leaf, keeps_grad).", call=call, expected=str((leaf, keeps)),
                 got=short(pair), hint=STATUS_HINT)
        got_leaf, got_keeps = bool(pair[0]), bool(pair[1])
        if got_leaf != leaf:
            fail(f"{call}[{name!r}]: leaf is {got_leaf}; expected {leaf}.", call=call,
                 expected=f"leaf={leaf}", got=f"leaf={got_leaf}",
                 hint="a tensor that does not require grad is always a leaf; one that does is "
                      "a leaf exactly when its grad_fn is None (t.is_leaf says so).")
        if got_keeps != keeps:
            fault = "grad-of-non-leaf" if (got_keeps and not leaf) else None
            fail(f"{call}[{name!r}]: keeps_grad is {got_keeps}; expected {keeps}.", call=call,
                 expected=f"keeps_grad={keeps}", got=f"keeps_grad={got_keeps}",
                 hint="backward stores .grad in leaves that require grad, and in non-leaves "
                      "only after retain_grad().", fault=fault)


def check_hidden_grad(got, x, w, expected, *, call: str) -> None:
    dh, dw = as_pair(got, call=call, what="a pair (dL/dh, dL/dw)")
    if dh is None:
        fail(f"{call} returned None for dL/dh: h is not a leaf, so backward did not keep its "
             "gradient in h.grad.", call=call, expected="dL/dh", got="None", hint=NON_LEAF_HINT,
             fault="grad-of-non-leaf")
    expect_tensor(dh, expected[0], call=f"{call}[0], dL/dh", hint=NON_LEAF_HINT)
    expect_tensor(dw, expected[1], call=f"{call}[1], dL/dw", hint=NON_LEAF_HINT)


def check_two_gradients(record: dict, expected: tuple, *, call: str) -> None:
    ga, gb = as_pair(record["value"], call=call, what="a pair (dL_a/dx, dL_b/dx)")
    ea, eb = expected
    if close(gb, ea + eb) or (close(ga, eb) and close(gb, eb)) or close(ga, ea + eb):
        fail(f"{call}: a returned gradient holds both losses' contributions (or the first "
             "changed with the second pass): x.grad accumulates across backward passes, and a "
             "reference to it follows every later change.", call=call,
             expected="each loss's gradient on its own", got="accumulated gradients",
             hint=TWO_HINT, fault="grad-accumulated-between-backwards")
    expect_tensor(ga, ea, call=f"{call}[0], dL_a/dx", hint=TWO_HINT)
    expect_tensor(gb, eb, call=f"{call}[1], dL_b/dx", hint=TWO_HINT)


def expect_one_forward(record: dict, *, call: str, why: str, hint: str) -> None:
    """f was called exactly once; `why` says why the contract asks so (in parentheses)."""
    if record["calls"] != 1:
        fail(f"{call} called f {record['calls']} times; the contract calls it once ({why}).",
             call=call, expected="1 call of f", got=f"{record['calls']} calls", hint=hint)


def expect_left_as_they_were(record: dict, *, call: str) -> None:
    """Every tensor argument of a `watched_call` record is as it was before the call: values,
    shape, dtype, requires_grad, leafness, type and .grad (None, or the same values)."""
    for name, before in record["before"].items():
        after = record["after"][name]
        change = _state_change(before, after)
        if change:
            fail(f"{call} changed its argument {name}: {change}. The contract leaves {name} as "
                 "it was.", call=call, expected=f"{name} as it was", got=f"{name}: {change}",
                 hint=f"work on a copy: {name}.detach().clone().requires_grad_() when you need "
                      f"its gradient, {name}.detach() when it must get none; never "
                      f"{name}.requires_grad_(...) or an in-place operation on {name} itself.")


def _state_change(before: dict, after: dict) -> str:
    """What differs between two `tensor_state` records, in words ('' when nothing)."""
    for key, what in (("type", "type"), ("dtype", "dtype"), ("requires_grad", "requires_grad"),
                      ("is_leaf", "is_leaf")):
        if before[key] != after[key]:
            return f"its {what} went from {before[key]} to {after[key]}"
    old, new = before["values"], after["values"]
    if tuple(old.shape) != tuple(new.shape):
        return f"its shape went from {tuple(old.shape)} to {tuple(new.shape)}"
    if not torch.equal(old, new):
        return "its values changed (an in-place operation wrote into it)"
    old, new = before["grad"], after["grad"]
    if old is None and new is not None:
        return ".grad went from None to a gradient (a backward pass reached it)"
    if old is not None and (new is None or tuple(old.shape) != tuple(new.shape)
                            or not torch.equal(old, new)):
        return ".grad changed"
    return ""


def student_error_fault(exc, text: str, fault: str, message: str, hint: str) -> None:
    """Turn a StudentError whose message holds torch's `text` into a named fault; re-raise
    any other."""
    if text in str(exc):
        raise CheckFailure(f"{exc}\n{message}", call=getattr(exc, "call", None), hint=hint,
                           fault=fault) from None
    raise exc


def check_clipped(record: dict, expected: tuple, *, call: str) -> None:
    clipped, dh, plain = expected
    grad, seen = as_pair(record["value"], call=call, what="a pair (x.grad, seen)")
    if record.get("hook_arg_changed"):
        fail(f"{call}: the hook changed the gradient it received in place (clamp_ or another "
             "in-place operation on its argument); the contract asks it to return a new "
             "tensor. In place fails outright when the incoming gradient is one value shared "
             "by every element (as for g(h) = h.sum()).", call=call,
             expected="the hook's argument left as it was", got="changed in place",
             hint=CLIP_HINT)
    if close(grad, plain) and not close(plain, clipped):
        fail(f"{call}: x.grad is the unclipped gradient: the hook's clipping did not reach "
             "the backward pass.", call=call, expected="dL/dx with dL/dh clamped",
             got="unclipped dL/dx", hint=CLIP_HINT, fault="hook-returns-none")
    expect_tensor(grad, clipped, call=f"{call}[0], x.grad", hint=CLIP_HINT)
    expect_tensor(seen, dh, call=f"{call}[1], the dL/dh the hook saw (before clipping)",
                  hint=CLIP_HINT)


def check_frozen(got, expected, *, call):
    dx, dwh = as_pair(got, call=call, what="a pair (dL/dx, dL/dWh)")
    if dx is None or (close(dx, torch.zeros_like(expected[0]))
                      and not close(expected[0], torch.zeros_like(expected[0]))):
        fail(f"{call} returned {'None' if dx is None else 'zeros'} for dL/dx: the graph "
             "between L and x was cut.", call=call, expected="dL/dx", got="no gradient",
             hint=FROZEN_HINT, fault="detach-on-path")
    expect_tensor(dx, expected[0], call=f"{call}[0], dL/dx", hint=FROZEN_HINT)
    expect_tensor(dwh, expected[1], call=f"{call}[1], dL/dWh", hint=FROZEN_HINT)


def check_vjp(record: dict, expected: torch.Tensor, ones: torch.Tensor, *, call: str,
              before: torch.Tensor | None = None) -> None:
    """x.grad after backward_with_gradient: `before` (None: no gradient yet) plus v^T J;
    `ones` is 1^T J, what a backward that ignores v gives."""
    base = 0 if before is None else before
    if close(record["grad"], base + ones) and not close(ones, expected):
        fail(f"{call}: x.grad got 1^T J, the gradient of y.sum(): v was not used.", call=call,
             expected="v^T J", got="1^T J", hint=VJP_HINT, fault="gradient-argument-ignored")
    if before is not None and close(record["grad"], expected):
        fail(f"{call}: x.grad is v^T J alone; it held a gradient before the call, and backward "
             "adds to it.", call=call, expected="old x.grad + v^T J", got="v^T J",
             hint=VJP_HINT)
    expect_tensor(record["grad"], base + expected, call=call + ", x.grad afterwards",
                  hint=VJP_HINT)
