"""Gradients by hand: one factor slipped away somewhere."""

from __future__ import annotations

import math

import numpy as np
import torch

# --------------------------------------------------------------------------- linear regression


def mse_linear_grads(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float
                     ) -> tuple[np.ndarray, float]:
    # L = mean(r ** 2) with r = X @ w + b - y, so dL/dr = 2 r / N; the chain rule through
    # X @ w + b sends that back as X.T @ (dL/dr) for w and its sum for b.
    n = X.shape[0]
    residual = X @ w + b - y
    d_residual = residual / n
    return X.T @ d_residual, float(d_residual.sum())


def mse_loss(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> float:
    residual = X @ w + b - y
    return float(np.mean(residual ** 2))


def fit_linear_gd(X: np.ndarray, y: np.ndarray, lr: float, steps: int
                  ) -> tuple[np.ndarray, float, list[float]]:
    w = np.zeros(X.shape[1])
    b = 0.0
    losses = []
    for _ in range(steps):
        losses.append(mse_loss(X, y, w, b))  # the loss *before* this update
        dw, db = mse_linear_grads(X, y, w, b)
        w = w - lr * dw
        b = b - lr * db
    return w, b, losses


# --------------------------------------------------------------------------- classification


def log_softmax(logits: np.ndarray) -> np.ndarray:
    # Subtracting the row maximum changes nothing mathematically (it cancels in the ratio) but
    # keeps exp() from overflowing: the largest exponent is 0, so the sum is at least 1 and
    # log() of it is finite. log-softmax = shifted - log(sum(exp(shifted))).
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    n = logits.shape[0]
    log_probs = log_softmax(logits)
    rows = np.arange(n)
    loss = -log_probs[rows, labels].mean()
    # d(-log p_label)/d logits = softmax - one_hot(label); the mean divides by N.
    grad = np.exp(log_probs)
    grad[rows, labels] -= 1.0
    return float(loss), grad / n


def mlp_loss_and_grads(X: np.ndarray, labels: np.ndarray, params: dict
                       ) -> tuple[float, dict]:
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    # forward, keeping what backward needs
    pre = X @ W1 + b1
    hidden = np.maximum(pre, 0.0)
    logits = hidden @ W2 + b2
    loss, d_logits = softmax_cross_entropy(logits, labels)
    # backward, one layer at a time
    d_W2 = hidden.T @ d_logits
    d_b2 = d_logits.sum(axis=0)
    d_hidden = d_logits @ W2.T
    d_pre = d_hidden * (pre > 0)  # ReLU passes gradient only where its input was positive
    d_W1 = X.T @ d_pre
    d_b1 = d_pre.sum(axis=0)
    return loss, {"W1": d_W1, "b1": d_b1, "W2": d_W2, "b2": d_b2}


# --------------------------------------------------------------------------- checking gradients


def numerical_gradient(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(x, dtype=np.float64)
    # np.ndindex walks every index of any shape, including () for a 0-d array.
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + eps
        f_plus = f(x)
        x[index] = original - eps
        f_minus = f(x)
        x[index] = original  # restore exactly (adding and subtracting eps may round)
        # central difference: error shrinks like eps**2, a forward difference's like eps
        grad[index] = (f_plus - f_minus) / (2.0 * eps)
    return grad


# --------------------------------------------------------------------------- autograd


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        # log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)): the exponent is never positive, so
        # nothing overflows, and log1p keeps precision when exp(-|x|) is tiny.
        return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        # d softplus / dx = sigmoid(x); torch.sigmoid is stable at both ends.
        return grad_output * torch.sigmoid(x)


def vector_jacobian_product(f, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    # A detached copy that requires grad: the caller's x (and its .grad) stay untouched.
    x = x.detach().requires_grad_(True)
    y = f(x)
    # One backward pass with grad_outputs=v computes v^T J directly; J is never built.
    (vjp,) = torch.autograd.grad(y, x, grad_outputs=v)
    return vjp


# --------------------------------------------------------------------------- a scalar engine


class Value:
    """A scalar that remembers how it was computed, so that backward() can apply the chain rule."""

    def __init__(self, data: float, _children: tuple = ()):
        self.data = data
        self.grad = 0.0
        self._prev = _children
        self._backward = lambda: None  # adds this node's grad into its children's

    @staticmethod
    def _wrap(other) -> "Value":  # quoted: a notebook cell has no `from __future__`
        return other if isinstance(other, Value) else Value(other)

    def __add__(self, other):
        other = self._wrap(other)
        out = Value(self.data + other.data, (self, other))

        def _backward():
            # += : a node used twice receives the sum of both paths' gradients
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = self._wrap(other)
        out = Value(self.data * other.data, (self, other))

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, exponent):
        if not isinstance(exponent, (int, float)):
            raise TypeError("only a plain number may be an exponent")
        out = Value(self.data ** exponent, (self,))

        def _backward():
            self.grad += exponent * self.data ** (exponent - 1) * out.grad

        out._backward = _backward
        return out

    def relu(self):
        out = Value(self.data if self.data > 0 else 0.0, (self,))

        def _backward():
            self.grad += (out.data > 0) * out.grad

        out._backward = _backward
        return out

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,))

        def _backward():
            self.grad += (1.0 - t * t) * out.grad

        out._backward = _backward
        return out

    def exp(self):
        e = math.exp(self.data)
        out = Value(e, (self,))

        def _backward():
            self.grad += e * out.grad

        out._backward = _backward
        return out

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def __truediv__(self, other):
        return self * self._wrap(other) ** -1

    # A plain number on the left: Python tries number.__add__(value) first, which returns
    # NotImplemented, and then value.__radd__(number).
    def __radd__(self, other):
        return self + other

    def __rsub__(self, other):
        return (-self) + other

    def __rmul__(self, other):
        return self * other

    def __rtruediv__(self, other):
        return self._wrap(other) * self ** -1

    def backward(self) -> None:
        # Topological order: every node after all the nodes it was computed from. Walking it
        # backwards, a node's grad is complete (every use has added to it) before it is passed on.
        order, seen = [], set()

        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for child in node._prev:
                    visit(child)
                order.append(node)

        visit(self)
        self.grad = 1.0
        for node in reversed(order):
            node._backward()

    def __repr__(self) -> str:
        return f"Value(data={self.data}, grad={self.grad})"
