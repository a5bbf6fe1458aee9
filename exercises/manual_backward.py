"""Gradients by hand, then by autograd.

Backpropagation is the chain rule applied from the loss backwards: each operation turns the
gradient of the loss with respect to its output into gradients with respect to its inputs
(`dL/dinput = dL/doutput * doutput/dinput`), and where a value feeds several operations the
contributions add up. Here you do that by hand for linear regression, softmax cross-entropy and a
small MLP (numpy), check gradients numerically, extend autograd with a custom Function, ask
autograd for a vector-Jacobian product, and finally build a tiny autograd engine of your own.

Fill in every function below. Each docstring is the contract the grader checks; run
`torchgrade check manual_backward.py` to see how you are doing.
"""

from __future__ import annotations

import math  # math.exp, math.tanh: handy for Value

import numpy as np
import torch


def mse_linear_grads(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float
                     ) -> tuple[np.ndarray, float]:
    """Gradients of the mean squared error of a linear model.

    X (N, D), y (N,), w (D,), b a float. The loss is L = mean((X @ w + b - y) ** 2).
    Returns (dL/dw as an array of shape (D,), dL/db as a Python float). By hand: the grader
    runs it with autograd's backward passes switched off (no backward(), torch.autograd.grad).

    >>> X = np.array([[1.0, 2.0], [3.0, 4.0]]); y = np.array([1.0, 2.0])
    >>> dw, db = mse_linear_grads(X, y, np.zeros(2), 0.0)   # residuals r = [-1, -2]
    >>> dw, db                                              # 2/N * X.T @ r, 2/N * sum(r)
    (array([ -7., -10.]), -3.0)
    """
    # TODO
    raise NotImplementedError("mse_linear_grads")


def fit_linear_gd(X: np.ndarray, y: np.ndarray, lr: float, steps: int
                  ) -> tuple[np.ndarray, float, list[float]]:
    """Full-batch gradient descent on the loss of `mse_linear_grads`, from w = 0, b = 0.

    Returns (w, b, losses): w of shape (D,), b a float, and losses a list of `steps` Python
    floats where losses[k] is the loss BEFORE update k (so losses[0] is the loss at w = 0,
    b = 0). Each update is w -= lr * dL/dw, b -= lr * dL/db. Deterministic: the grader compares
    your trajectory with its own step for step. By hand, as above: no backward passes.

    >>> X = np.array([[1.0], [2.0]]); y = np.array([2.0, 4.0])
    >>> w, b, losses = fit_linear_gd(X, y, lr=0.1, steps=2)
    >>> [round(loss, 6) for loss in losses]    # mean(y**2) = 10 at w = 0, b = 0; then 1.06
    [10.0, 1.06]
    >>> w.round(6), round(b, 6)                # dw = -10, db = -6 at the start: w = 1, b = 0.6
    (array([1.32]), 0.78)
    """
    # TODO
    raise NotImplementedError("fit_linear_gd")


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean softmax cross-entropy and its gradient.

    logits (N, C) float, labels (N,) int in [0, C). Returns (loss as a Python float,
    dL/dlogits of shape (N, C)), where loss = mean over rows of -log softmax(logits[i])[labels[i]].
    Must be finite and correct for logits as large as +-1e4 (exp(1e4) overflows: shift first).
    By hand, as above: no backward passes.

    >>> loss, grad = softmax_cross_entropy(np.array([[0.0, 0.0]]), np.array([1]))
    >>> round(loss, 6), grad                  # -log(1/2); softmax - one_hot, divided by N = 1
    (0.693147, array([[ 0.5, -0.5]]))
    """
    # TODO
    raise NotImplementedError("softmax_cross_entropy")


def mlp_loss_and_grads(X: np.ndarray, labels: np.ndarray, params: dict
                       ) -> tuple[float, dict]:
    """Loss and gradients of a one-hidden-layer network, by hand (numpy only).

    params = {"W1": (D, H), "b1": (H,), "W2": (H, C), "b2": (C,)}; X (N, D); labels (N,).
    logits = relu(X @ W1 + b1) @ W2 + b2, loss = mean softmax cross-entropy (as above).
    Returns (loss, grads) where grads has the same keys as params and grads[k] has the shape of
    params[k]. X and params are not modified. No backward passes, as above.

    >>> params = {"W1": np.eye(2), "b1": np.zeros(2), "W2": np.eye(2), "b2": np.zeros(2)}
    >>> loss, grads = mlp_loss_and_grads(np.array([[1.0, -1.0]]), np.array([0]), params)
    >>> round(loss, 6)                       # hidden = [1, 0] (relu), logits = [1, 0]
    0.313262
    >>> grads["W1"][:, 0].round(6)           # 1 - softmax([1, 0])[0] = 0.268941
    array([-0.268941,  0.268941])
    >>> bool((grads["W1"][:, 1] == 0).all())  # no gradient reaches a unit whose input was < 0
    True
    """
    # TODO
    raise NotImplementedError("mlp_loss_and_grads")


def numerical_gradient(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of a scalar function f at x.

    x is a float64 array of any shape (0-d included); returns an array of x's shape whose
    element i is (f(x + eps*e_i) - f(x - eps*e_i)) / (2 * eps), e_i being 1 at i and 0
    elsewhere. You may change x while you work, but x must hold its original values afterwards.

    >>> numerical_gradient(lambda a: float((a ** 2).sum()), np.array([1.0, -2.0])).round(6)
    array([ 2., -4.])
    """
    # TODO
    raise NotImplementedError("numerical_gradient")


class Softplus(torch.autograd.Function):
    """softplus(x) = log(1 + exp(x)) as a custom autograd Function.

    `Softplus.apply(x)` computes it stably (finite for x = +-1e3, where exp(x) overflows), and
    backward returns grad_output * sigmoid(x), computed from what forward saved. It passes
    torch.autograd.gradcheck in float64.

    >>> x = torch.tensor([0.0, 1e3, -1e3], dtype=torch.float64, requires_grad=True)
    >>> y = Softplus.apply(x); y
    tensor([6.9315e-01, 1.0000e+03, 0.0000e+00], dtype=torch.float64, grad_fn=<SoftplusBackward>)
    >>> y.sum().backward(); x.grad
    tensor([0.5000, 1.0000, 0.0000], dtype=torch.float64)
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        # TODO: save what backward needs with ctx.save_for_backward(...)
        raise NotImplementedError("Softplus.forward")

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        # TODO: read it back with ctx.saved_tensors
        raise NotImplementedError("Softplus.backward")


def vector_jacobian_product(f, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v^T J, where J is the Jacobian of y = f(x) at x, through autograd.

    v has the shape of y. Returns a tensor shaped like x whose element j is
    sum_i v[i] * dy[i]/dx[j], computed in one backward pass WITHOUT forming J (x may have
    hundreds of thousands of elements: J would not fit in memory). `x.grad` is left as it was
    (None stays None, a gradient already there is unchanged).

    >>> x = torch.tensor([1.0, 2.0, 3.0])
    >>> vector_jacobian_product(lambda t: t ** 2, x, torch.tensor([1.0, 0.0, 10.0]))
    tensor([ 2.,  0., 60.])
    """
    # TODO
    raise NotImplementedError("vector_jacobian_product")


class Value:
    """A scalar autograd engine.

    Value(data) holds a number in .data and a gradient in .grad (0.0 at first). Operators
    + - * / and ** (the exponent a plain int or float) build new Values and work with a plain
    number on either side (2 * v, v - 1, 1 / v, ...); also unary -v and the methods relu(),
    tanh() and exp(). backward(), called on the output, sets .grad of every node in the graph
    to d(output)/d(node): the output's own to 1.0, then each node in reverse topological order,
    ADDING the contributions where a node is used more than once. An engine of your own: the
    grader runs it with torch's backward passes switched off.

    >>> a = Value(2.0); b = Value(-3.0)
    >>> c = a * b + a            # a is used twice
    >>> c.backward()
    >>> c.data, a.grad, b.grad   # dc/da = b + 1, dc/db = a
    (-4.0, -2.0, 2.0)
    """

    def __init__(self, data: float):
        self.data = data
        self.grad = 0.0
        # TODO: remember the Values this one was computed from and how to pass a gradient back

    def __add__(self, other):
        # TODO
        raise NotImplementedError("Value.__add__")

    def __radd__(self, other):  # other + self, when other is a plain number
        # TODO
        raise NotImplementedError("Value.__radd__")

    def __sub__(self, other):
        # TODO
        raise NotImplementedError("Value.__sub__")

    def __rsub__(self, other):  # other - self
        # TODO
        raise NotImplementedError("Value.__rsub__")

    def __mul__(self, other):
        # TODO
        raise NotImplementedError("Value.__mul__")

    def __rmul__(self, other):  # other * self
        # TODO
        raise NotImplementedError("Value.__rmul__")

    def __truediv__(self, other):
        # TODO
        raise NotImplementedError("Value.__truediv__")

    def __rtruediv__(self, other):  # other / self
        # TODO
        raise NotImplementedError("Value.__rtruediv__")

    def __pow__(self, exponent):  # exponent is a plain int or float
        # TODO
        raise NotImplementedError("Value.__pow__")

    def __neg__(self):
        # TODO
        raise NotImplementedError("Value.__neg__")

    def relu(self):
        # TODO
        raise NotImplementedError("Value.relu")

    def tanh(self):
        # TODO
        raise NotImplementedError("Value.tanh")

    def exp(self):
        # TODO
        raise NotImplementedError("Value.exp")

    def backward(self) -> None:
        # TODO
        raise NotImplementedError("Value.backward")

    def __repr__(self) -> str:
        return f"Value(data={self.data}, grad={self.grad})"
