"""autograd_graph with torch.autograd.grad wherever a gradient is asked for (no .grad read),
a recursive walk of the graph, and a table of in-place cases."""

import torch


def grad_fn_chain(y):
    def walk(node):
        if node is None:
            return []
        rest = [fn for fn, _ in node.next_functions if fn is not None]
        return [type(node).__name__] + (walk(rest[0]) if rest else [])
    return walk(y.grad_fn)


def leaves_reached(y, tensors):
    seen_ids, leaves = set(), []
    keep = []  # keep nodes alive: ids of dead objects could be reused

    def visit(node):
        if node is None or id(node) in seen_ids:
            return
        seen_ids.add(id(node))
        keep.append(node)
        if type(node).__name__ == "AccumulateGrad":
            leaves.append(node.variable)
        for fn, _ in node.next_functions:
            visit(fn)

    visit(y.grad_fn)
    return sorted(n for n, t in tensors.items() if any(t is leaf for leaf in leaves))


def grad_status(tensors):
    return {k: (t.is_leaf, t.requires_grad and (t.is_leaf or t.retains_grad))
            for k, t in tensors.items()}


def hidden_grad(x, w):
    w = w.detach().requires_grad_(True)
    h = (x @ w).tanh()
    return tuple(torch.autograd.grad(h.square().mean(0).sum(), (h, w)))


def two_gradients(f, x):
    h = f(x)
    (ga,) = torch.autograd.grad(h.sum(), x, retain_graph=True)
    (gb,) = torch.autograd.grad(h.pow(2).sum(), x)
    return ga, gb


def weighted_gradient(f, x, wa, wb):
    h = f(x)
    return torch.autograd.grad(wa * h.sum() + wb * h.pow(2).sum(), [x])[0]


def backward_with_gradient(f, x, v):
    y = f(x)
    (vjp,) = torch.autograd.grad(y, x, grad_outputs=v)
    with torch.no_grad():
        x.grad = vjp if x.grad is None else x.grad + vjp


def _sin(xl):
    y = xl.sin(); y.add_(1.0); return (y * y).sum()
def _exp(xl):
    y = xl.exp(); y.add_(1.0); return y.sum()
def _saved(xl):
    a = xl * 2; b = a * a; a.add_(1.0); return b.sum()
def _unsaved(xl):
    a = xl * 2; b = a + 3; a.add_(1.0); return (b * a).sum()
def _leaf(xl):
    xl.mul_(2.0); return xl.sum()
def _relu(xl):
    a = xl * 3; a.relu_(); return (a ** 2).sum()
def _sig(xl):
    s = xl.sigmoid(); s.mul_(2.0); return s.sum()
def _sig_clone(xl):
    s = xl.sigmoid().clone(); s.mul_(2.0); return s.sum()
def _sig_data(xl):
    s = xl.sigmoid(); s.data.mul_(2.0); return s.sum()
def _no_grad(xl):
    with torch.no_grad():
        xl.mul_(2.0)
    return (xl ** 2).sum()


CASES = {"sin_add_": _sin, "exp_add_": _exp, "saved_mul_add_": _saved,
         "unsaved_add_add_": _unsaved, "leaf_mul_": _leaf, "relu_": _relu,
         "sigmoid_mul_": _sig, "sigmoid_clone_mul_": _sig_clone,
         "sigmoid_data_mul_": _sig_data, "leaf_no_grad_mul_": _no_grad}


def inplace_case(case, x):
    if case not in CASES:
        raise ValueError(f"no case {case}")
    xl = x.clone().requires_grad_()
    try:
        (g,) = torch.autograd.grad(CASES[case](xl), xl)
    except RuntimeError:
        return "error"
    return g


def frozen_encoder_grads(x, We, Wh, t):
    x = x.detach().requires_grad_()
    Wh = Wh.detach().requires_grad_()
    # freeze We on a copy; the caller's tensor keeps its flag
    frozen = We.detach()
    loss = (torch.tanh(x @ frozen) @ Wh - t).pow(2).mean()
    return torch.autograd.grad(loss, (x, Wh))


def clipped_backward(f, g, x, c):
    seen = []
    h = f(x)
    h.register_hook(lambda grad: seen.append(grad.clone()) or grad.clamp(-c, c))
    (gx,) = torch.autograd.grad(g(h), x)
    return gx, seen[0]
