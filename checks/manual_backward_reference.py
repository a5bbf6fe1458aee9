"""The answer key of the `manual_backward` checks: torch autograd in float64, computed in the
grader. It never derives a gradient by hand, but it does the exercises' work (a gradient descent,
a vector-Jacobian product, a stable softplus), so like every `*_reference.py` it stays out of a
student release, which replays the values the visible checks need (`grader/release/replay.py`).
"""

from __future__ import annotations

import numpy as np
import torch

from grader.checking.memo import reference_cache
from probes.manual_backward import SCALAR_FUNCTIONS, VECTOR_FUNCTIONS

def _leaf(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, requires_grad=True)


def _grad(t: torch.Tensor) -> torch.Tensor:
    """The gradient the backward just run left in the grader's own leaf `t`."""
    assert t.grad is not None
    return t.grad


@reference_cache
def mse_reference(X, y, w, b) -> tuple[float, np.ndarray, float]:
    """(loss, dL/dw, dL/db) by autograd."""
    tw, tb = _leaf(w), _leaf(b)
    loss = ((torch.from_numpy(X) @ tw + tb - torch.from_numpy(y)) ** 2).mean()
    loss.backward()
    return loss.item(), _grad(tw).numpy(), _grad(tb).item()


@reference_cache
def fit_linear_gd_reference(X, y, lr: float, steps: int) -> tuple[np.ndarray, float, list[float]]:
    w, b = np.zeros(X.shape[1]), 0.0
    losses = []
    for _ in range(steps):
        loss, dw, db = mse_reference(X, y, w, b)
        losses.append(loss)
        w, b = w - lr * dw, b - lr * db
    return w, b, losses


def cross_entropy_reference(logits, labels) -> tuple[float, np.ndarray]:
    t = _leaf(logits)
    loss = torch.nn.functional.cross_entropy(t, torch.from_numpy(np.asarray(labels, np.int64)))
    loss.backward()
    return loss.item(), _grad(t).numpy()


def mlp_reference(X, labels, params) -> tuple[float, dict[str, np.ndarray]]:
    leaves = {k: _leaf(v) for k, v in params.items()}
    hidden = torch.relu(torch.from_numpy(X) @ leaves["W1"] + leaves["b1"])
    logits = hidden @ leaves["W2"] + leaves["b2"]
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(np.asarray(labels, np.int64)))
    loss.backward()
    return loss.item(), {k: _grad(t).numpy() for k, t in leaves.items()}


def scalar_gradient_reference(function: str, x: np.ndarray, consts=()) -> np.ndarray:
    t = _leaf(x)
    SCALAR_FUNCTIONS[function](torch, t, *(torch.from_numpy(c) for c in consts)).backward()
    return _grad(t).numpy()


def vjp_reference(function: str, x: torch.Tensor, v: torch.Tensor, consts=()) -> torch.Tensor:
    """v^T J as the gradient of sum(f(x) * v): the same numbers as grad_outputs=v (the product's
    backward hands exactly v to f), without the explicit gradient argument whose first use in a
    process makes torch import sympy (1.5 s)."""
    t = x.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad((VECTOR_FUNCTIONS[function](t, *consts) * v).sum(), t)
    return g


def softplus_reference(x: torch.Tensor, grad_output: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(softplus(x), grad_output * sigmoid(x)), both exact to float64 rounding at any x."""
    return torch.logaddexp(x, torch.zeros_like(x)), grad_output * torch.sigmoid(x)
