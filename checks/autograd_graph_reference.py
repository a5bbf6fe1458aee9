"""The answer key of the `autograd_graph` checks: torch itself, run in the grader on the same
graphs the probes build in the worker (`probes.autograd_graph.build`, TRUNKS, HEADS).
It does the exercise's work, so like every `*_reference.py` it stays out of a student release,
which replays the values the visible checks need (`grader/release/replay.py`). Arguments and
results are plain: programs (lists), names, tensors.
"""

from __future__ import annotations

import warnings

import torch

from probes.autograd_graph import HEADS, TRUNKS, build


def chain_reference(program: list) -> list[str]:
    """The class names of the nodes from the last tensor's grad_fn to the leaf: every node of
    a chain has one input that depends on the leaf (asserted: a program that is no chain is a
    mistake of the check, not of the student)."""
    names: list[str] = []
    node = build(program)[-1].grad_fn
    while node is not None:
        names.append(type(node).__name__)
        inputs = {fn for fn, _ in node.next_functions if fn is not None}
        assert len(inputs) <= 1, f"not a chain at {names[-1]}"
        node = next(iter(inputs), None)
    return names


def reached_reference(program: list, names: dict) -> list[str]:
    """The names of `names` ({name: step}) whose tensor is a leaf that requires grad and gets a
    gradient from the last tensor: torch.autograd.grad with allow_unused says which."""
    tensors = build(program)
    y = tensors[-1]
    candidates = [n for n, i in names.items() if tensors[i].is_leaf and tensors[i].requires_grad]
    grads = torch.autograd.grad(y.sum(), [tensors[names[n]] for n in candidates],
                                allow_unused=True) if candidates else []
    return sorted(n for n, g in zip(candidates, grads) if g is not None)


def status_reference(program: list, names: dict) -> dict[str, tuple[bool, bool]]:
    """{name: (is_leaf, keeps_grad)}: is_leaf as torch says; keeps_grad measured by running a
    backward pass through every named tensor that requires grad and seeing whose .grad is
    filled."""
    tensors = build(program)
    named = {n: tensors[i] for n, i in names.items()}
    total = sum(t.sum() for t in named.values() if t.requires_grad)
    if isinstance(total, torch.Tensor):
        total.backward()
    with warnings.catch_warnings():  # reading .grad of a non-leaf warns
        warnings.simplefilter("ignore")
        return {n: (bool(t.is_leaf), t.grad is not None) for n, t in named.items()}


def hidden_grad_reference(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = w.detach().clone().requires_grad_(True)
    h = torch.tanh(x @ w)
    h.retain_grad()
    ((h ** 2).sum() / x.shape[0]).backward()
    assert h.grad is not None and w.grad is not None
    return h.grad, w.grad


def trunk_losses_reference(trunk: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dL_a/dx, dL_b/dx) for L_a = h.sum(), L_b = (h**2).sum(), h = trunk(x): one forward
    pass each, no shared graph."""
    out = []
    for loss in (lambda h: h.sum(), lambda h: (h ** 2).sum()):
        leaf = x.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(TRUNKS[trunk](leaf)), leaf)
        out.append(g)
    return out[0], out[1]


def vjp_reference(trunk: str, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v^T J of the trunk at x (torch.func.vjp)."""
    pullback = torch.func.vjp(TRUNKS[trunk], x.detach().clone())[1]
    return pullback(v)[0]


def inplace_reference(case: str, x: torch.Tensor):
    """The case of the contract run by torch: x's gradient, or "error"."""
    xl = x.detach().clone().requires_grad_(True)
    steps = {
        "sin_add_": lambda: _then(xl.sin(), lambda y: y.add_(1.0), lambda y: (y * y).sum()),
        "exp_add_": lambda: _then(xl.exp(), lambda y: y.add_(1.0), lambda y: y.sum()),
        "saved_mul_add_": lambda: _saved_mul(xl),
        "unsaved_add_add_": lambda: _unsaved_add(xl),
        "leaf_mul_": lambda: _then(xl, lambda y: y.mul_(2.0), lambda y: y.sum()),
        "relu_": lambda: _then(xl * 3, lambda a: a.relu_(), lambda a: (a ** 2).sum()),
        "sigmoid_mul_": lambda: _then(xl.sigmoid(), lambda s: s.mul_(2.0), lambda s: s.sum()),
        "sigmoid_clone_mul_": lambda: _then(xl.sigmoid().clone(), lambda s: s.mul_(2.0),
                                            lambda s: s.sum()),
        "sigmoid_data_mul_": lambda: _then(xl.sigmoid(), lambda s: s.data.mul_(2.0),
                                           lambda s: s.sum()),
        "leaf_no_grad_mul_": lambda: _no_grad_then(xl),
    }
    try:
        steps[case]().backward()
    except RuntimeError:
        return "error"
    return xl.grad


def _then(t, change, loss):
    change(t)
    return loss(t)


def _saved_mul(xl):
    a = xl * 2
    b = a * a
    a.add_(1.0)
    return b.sum()


def _unsaved_add(xl):
    a = xl * 2
    b = a + 3
    a.add_(1.0)
    return (b * a).sum()


def _no_grad_then(xl):
    with torch.no_grad():
        xl.mul_(2.0)
    return (xl ** 2).sum()


def frozen_reference(x, We, Wh, t) -> tuple[torch.Tensor, torch.Tensor]:
    """(dL/dx, dL/dWh) with We a constant (torch.func.grad over x and Wh only)."""
    def loss(xx, wh):
        return ((torch.tanh(xx @ We) @ wh - t) ** 2).mean()
    return torch.func.grad(loss, argnums=(0, 1))(x.detach().clone(), Wh.detach().clone())


def clipped_reference(trunk: str, head: str, x: torch.Tensor, c: float):
    """(x's gradient with dL/dh clamped to [-c, c], the unclipped dL/dh, the unclipped dL/dx)."""
    leaf = x.detach().clone().requires_grad_(True)
    h = TRUNKS[trunk](leaf)
    (dh,) = torch.autograd.grad(HEADS[head](h), h, retain_graph=True)
    (clipped,) = torch.autograd.grad(h, leaf, grad_outputs=dh.clamp(-c, c), retain_graph=True)
    (plain,) = torch.autograd.grad(h, leaf, grad_outputs=dh)
    return clipped, dh, plain
