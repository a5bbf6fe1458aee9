"""The autograd graph: reference solution.

Its contract: CURRICULUM.md, `autograd_graph`.
"""

from __future__ import annotations

import torch

INPLACE_CASES = ("sin_add_", "exp_add_", "saved_mul_add_", "unsaved_add_add_", "leaf_mul_",
                 "relu_", "sigmoid_mul_", "sigmoid_clone_mul_", "sigmoid_data_mul_",
                 "leaf_no_grad_mul_")

def grad_fn_chain(y):
    names = []
    node = y.grad_fn
    while node is not None:
        names.append(type(node).__name__)
        # A chain: one input depends on the leaf; None marks a constant input.
        inputs = [fn for fn, _ in node.next_functions if fn is not None]
        node = inputs[0] if inputs else None
    return names


def leaves_reached(y, tensors):
    leaves = []
    seen = set()  # each node once: a node shared by many paths is not walked again
    stack = [y.grad_fn]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):  # only AccumulateGrad nodes hold a leaf
            leaves.append(node.variable)
        stack.extend(fn for fn, _ in node.next_functions if fn is not None)
    return sorted(name for name, t in tensors.items() if any(t is leaf for leaf in leaves))


def grad_status(tensors):
    return {name: (bool(t.is_leaf), bool(t.requires_grad and (t.is_leaf or t.retains_grad)))
            for name, t in tensors.items()}


def hidden_grad(x, w):
    w = w.detach().clone().requires_grad_(True)
    h = torch.tanh(x @ w)
    loss = (h ** 2).sum() / x.shape[0]
    # autograd.grad returns the gradient of any tensor of the graph, leaf or not.
    dh, dw = torch.autograd.grad(loss, [h, w])
    return dh, dw


def two_gradients(f, x):
    h = f(x)
    loss_a = h.sum()
    loss_b = (h ** 2).sum()
    loss_a.backward(retain_graph=True)  # the second pass needs h's graph again
    grad_a = x.grad.clone()  # a copy: the next backward adds into x.grad in place
    x.grad = None
    loss_b.backward()
    return grad_a, x.grad.clone()


def weighted_gradient(f, x, wa, wb):
    h = f(x)
    loss = wa * h.sum() + wb * (h ** 2).sum()
    (grad,) = torch.autograd.grad(loss, x)
    return grad


def backward_with_gradient(f, x, v):
    y = f(x)
    y.backward(v)  # v is dL/dy: autograd computes v^T J and adds it into x.grad


def inplace_case(case, x):
    xl = x.detach().clone().requires_grad_(True)
    try:
        if case == "sin_add_":
            y = xl.sin()
            y.add_(1.0)
            loss = (y * y).sum()
        elif case == "exp_add_":
            y = xl.exp()
            y.add_(1.0)
            loss = y.sum()
        elif case == "saved_mul_add_":
            a = xl * 2
            b = a * a
            a.add_(1.0)
            loss = b.sum()
        elif case == "unsaved_add_add_":
            a = xl * 2
            b = a + 3
            a.add_(1.0)
            loss = (b * a).sum()
        elif case == "leaf_mul_":
            xl.mul_(2.0)
            loss = xl.sum()
        elif case == "relu_":
            a = xl * 3
            a.relu_()
            loss = (a ** 2).sum()
        elif case == "sigmoid_mul_":
            s = xl.sigmoid()
            s.mul_(2.0)
            loss = s.sum()
        elif case == "sigmoid_clone_mul_":
            s = xl.sigmoid().clone()
            s.mul_(2.0)
            loss = s.sum()
        elif case == "sigmoid_data_mul_":
            s = xl.sigmoid()
            s.data.mul_(2.0)
            loss = s.sum()
        elif case == "leaf_no_grad_mul_":
            with torch.no_grad():
                xl.mul_(2.0)
            loss = (xl ** 2).sum()
        else:
            raise ValueError(f"unknown case {case!r}")
        loss.backward()
    except RuntimeError:
        return "error"
    return xl.grad.detach().clone()


def frozen_encoder_grads(x, We, Wh, t):
    x = x.detach().clone().requires_grad_(True)
    Wh = Wh.detach().clone().requires_grad_(True)
    # The weight is detached, not the activation: x keeps its path through the encoder.
    h = torch.tanh(x @ We.detach())
    loss = ((h @ Wh - t) ** 2).mean()
    dx, dWh = torch.autograd.grad(loss, [x, Wh])
    return dx, dWh


def clipped_backward(f, g, x, c):
    seen = []

    def clip(grad):
        seen.append(grad.detach().clone())
        return grad.clamp(-c, c)  # a new tensor, returned: it replaces the gradient

    h = f(x)
    handle = h.register_hook(clip)
    g(h).backward()
    handle.remove()
    return x.grad.detach().clone(), seen[0]
