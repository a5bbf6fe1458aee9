"""autograd_graph computing by hand what a formula gives (hidden_grad, frozen_encoder_grads),
running the in-place cases from their source text, and clipping through two autograd.grad
calls instead of a backward pass."""

import textwrap

import torch

SOURCES = {
    "sin_add_": "y = xl.sin(); y.add_(1.0); L = (y * y).sum()",
    "exp_add_": "y = xl.exp(); y.add_(1.0); L = y.sum()",
    "saved_mul_add_": "a = xl * 2; b = a * a; a.add_(1.0); L = b.sum()",
    "unsaved_add_add_": "a = xl * 2; b = a + 3; a.add_(1.0); L = (b * a).sum()",
    "leaf_mul_": "xl.mul_(2.0); L = xl.sum()",
    "relu_": "a = xl * 3; a.relu_(); L = (a ** 2).sum()",
    "sigmoid_mul_": "s = xl.sigmoid(); s.mul_(2.0); L = s.sum()",
    "sigmoid_clone_mul_": "s = xl.sigmoid().clone(); s.mul_(2.0); L = s.sum()",
    "sigmoid_data_mul_": "s = xl.sigmoid(); s.data.mul_(2.0); L = s.sum()",
    "leaf_no_grad_mul_": """
        with torch.no_grad():
            xl.mul_(2.0)
        L = (xl ** 2).sum()
    """,
}


def grad_fn_chain(y):
    chain, node = [], y.grad_fn
    while node is not None:
        chain.append(type(node).__name__)
        live = [pair[0] for pair in node.next_functions if pair[0] is not None]
        node = live[0] if len(live) > 0 else None
    return chain


def leaves_reached(y, tensors):
    frontier, seen, reached = [y.grad_fn], set(), []
    while frontier:
        nxt = []
        for node in frontier:
            if node is None or node in seen:
                continue
            seen.add(node)
            if getattr(node, "variable", None) is not None:
                reached.append(node.variable)
            nxt += [fn for fn, _ in node.next_functions]
        frontier = nxt
    return sorted([name for name, t in tensors.items() if any(r is t for r in reached)])


def grad_status(tensors):
    return {name: (bool(t.is_leaf), bool(t.requires_grad) and (bool(t.is_leaf)
                                                               or bool(t.retains_grad)))
            for name, t in tensors.items()}


def hidden_grad(x, w):
    h = torch.tanh(x @ w)
    dh = 2 * h / x.shape[0]
    dw = x.T @ (dh * (1 - h ** 2))
    return dh, dw


def two_gradients(f, x):
    h = f(x)
    ga = torch.autograd.grad(h.sum(), x, retain_graph=True)[0]
    gb = torch.autograd.grad((h ** 2).sum(), x, retain_graph=False)[0]
    return ga.detach(), gb.detach()


def weighted_gradient(f, x, wa, wb):
    h = f(x)
    # dL/dh = wa + 2 * wb * h: one backward pass from h with that upstream gradient
    return torch.autograd.grad(h, x, grad_outputs=wa + 2 * wb * h.detach())[0]


def backward_with_gradient(f, x, v):
    y = f(x)
    y.backward(v)


def inplace_case(case, x):
    if case not in SOURCES:
        raise ValueError(f"unknown case {case!r}")
    scope = {"torch": torch, "xl": x.detach().clone().requires_grad_(True)}
    try:
        exec(textwrap.dedent(SOURCES[case]), scope)
        scope["L"].backward()
    except RuntimeError:
        return "error"
    return scope["xl"].grad


def frozen_encoder_grads(x, We, Wh, t):
    We, Wh = We.detach(), Wh.detach()
    h = torch.tanh(x @ We)
    out = h @ Wh
    dout = 2 * (out - t) / out.numel()
    dWh = h.T @ dout
    dpre = (dout @ Wh.T) * (1 - h ** 2)
    return dpre @ We.T, dWh


def clipped_backward(f, g, x, c):
    h = f(x)
    seen = torch.autograd.grad(g(h), h, retain_graph=True)[0]
    grad = torch.autograd.grad(h, x, grad_outputs=seen.clamp(-c, c))[0]
    x.grad = grad.detach().clone()
    return grad, seen
