"""The autograd graph: what backward() walks, what it keeps, and what it refuses.

Every tensor that an operation computes from a tensor that requires grad carries a `grad_fn`: the
node of the operation that made it, whose `next_functions` point to the nodes of its inputs. The
graph is that chain of nodes, built during the forward pass; `backward()` starts at the output's
`grad_fn` and walks it back to the leaves, where each `AccumulateGrad` node ADDS the gradient
into its leaf's `.grad`. Here you walk the graph yourself, tell leaves from the rest, run a second
backward pass, combine losses, backpropagate a non-scalar output, find which in-place operations
autograd accepts, cut the graph in the right place, and change a gradient on its way with a hook.

Every tensor below is float64. Where a function returns "a tensor that does not require grad",
return values, not a piece of the graph: `.detach()` a result that requires grad, `.clone()` a
`.grad` you return. Fill in every function; each docstring is the contract the grader checks.
Run `torchgrade check autograd_graph.py` to see how you are doing.
"""

from __future__ import annotations

import torch


def grad_fn_chain(y: torch.Tensor) -> list[str]:
    """The names of the autograd nodes from `y` back to its leaf.

    `y` was computed from ONE leaf tensor that requires grad by a chain of operations, each
    applied to the previous result and possibly to constants (numbers, or tensors that do not
    require grad). Start at `y.grad_fn` and follow `node.next_functions` (a tuple of
    `(node, index)` pairs; the node is None for a constant input) from node to node until the
    leaf's node, which has no next functions. Return the class name of every node met,
    `type(node).__name__`, in that order, the leaf's 'AccumulateGrad' included. When `y` has no
    `grad_fn` (a leaf, or a tensor that does not require grad), return []. Do not run backward:
    every `.grad` stays as it was.

    >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    >>> grad_fn_chain(((x * 2).exp() + 1).sum())
    ['SumBackward0', 'AddBackward0', 'ExpBackward0', 'MulBackward0', 'AccumulateGrad']
    >>> grad_fn_chain(x), grad_fn_chain(x.detach() * 2)
    ([], [])
    """
    # TODO
    raise NotImplementedError("grad_fn_chain")


def leaves_reached(y: torch.Tensor, tensors: dict[str, torch.Tensor]) -> list[str]:
    """The names, sorted, of the tensors in `tensors` that `y.backward()` would give a gradient.

    `y` is the result of operations (`y.grad_fn` is not None); `tensors` maps names to tensors.
    Walk the graph back from `y.grad_fn` through `next_functions`, every branch, visiting each
    node once (graphs may share nodes heavily: in y = h + h, repeated 40 times, a walk that goes
    down every path meets the first node 2**40 times). The leaves it reaches are those of its
    `AccumulateGrad` nodes, each of which holds its leaf in `node.variable`. List the name of every tensor of `tensors` that is one of
    those leaves (compare with `is`). A tensor that does not require grad, a non-leaf, and a
    leaf that `y` does not reach through the graph (it was used through `.detach()` or under
    `torch.no_grad()`, or not used at all) are not listed. Do not run backward (the grader
    switches backward passes off for it): every `.grad` stays as it was.

    >>> a = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    >>> b = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    >>> c = torch.tensor([5.0, 6.0], dtype=torch.float64)          # does not require grad
    >>> h = a * c
    >>> y = (h + b.detach() + a.tanh()).sum()
    >>> leaves_reached(y, {"b": b, "a": a, "c": c, "h": h})        # h is not a leaf
    ['a']
    """
    # TODO
    raise NotImplementedError("leaves_reached")


def grad_status(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[bool, bool]]:
    """For each named tensor, (is it a leaf, does backward() store its gradient in its .grad).

    Returns a dict with the keys of `tensors`, each value a pair of Python bools
    `(leaf, keeps_grad)`:

    - leaf: a tensor that does not require grad is a leaf, whatever made it (a result of
      `.detach()` or of an operation under `torch.no_grad()` too); a tensor that requires grad
      is a leaf when no recorded operation made it (`grad_fn` is None: created with
      `requires_grad=True`, an `nn.Parameter`, `t.detach().requires_grad_()`).
    - keeps_grad: a backward pass that reaches the tensor stores its gradient in `.grad` only
      for a leaf that requires grad, and for a non-leaf on which `retain_grad()` was called.
      Any other tensor's `.grad` stays None (reading `.grad` of a non-leaf gives None, with a
      warning): it does not keep its gradient.

    >>> w = torch.tensor([1.0, -1.0], dtype=torch.float64, requires_grad=True)
    >>> h = w * 3
    >>> frozen = w.detach()
    >>> with torch.no_grad():
    ...     quiet = w * 2
    >>> grad_status({"w": w, "h": h, "frozen": frozen, "quiet": quiet})
    {'w': (True, True), 'h': (False, False), 'frozen': (True, False), 'quiet': (True, False)}
    >>> h.retain_grad(); grad_status({"h": h})
    {'h': (False, True)}
    """
    # TODO
    raise NotImplementedError("grad_status")


def hidden_grad(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of a loss with respect to an intermediate tensor and to a weight.

    x (N, D) and w (D, H) are tensors that do not require grad. With h = torch.tanh(x @ w) and
    L = (h ** 2).sum() / N, return (dL/dh of shape (N, H), dL/dw of shape (D, H)): tensors that
    do not require grad. h is not a leaf, so after a backward pass its `.grad` is None unless
    you asked autograd to keep it (or compute both with `torch.autograd.grad`). `x` and `w`
    themselves are left as they were.

    >>> x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> w = torch.tensor([[0.5], [2.0]], dtype=torch.float64)   # h = tanh(0.5) = 0.4621
    >>> dh, dw = hidden_grad(x, w)            # dL/dh = 2h / N; dL/dw = x.T @ (dL/dh * (1 - h**2))
    >>> dh.round(decimals=4), dw.round(decimals=4)
    (tensor([[0.9242]], dtype=torch.float64), tensor([[0.7269],
            [0.0000]], dtype=torch.float64))
    """
    # TODO
    raise NotImplementedError("hidden_grad")


def two_gradients(f, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of two losses that share a trunk, each on its own.

    `x` is a leaf that requires grad (x.grad is None); `f` maps a tensor to a tensor of the same
    shape. Compute h = f(x) ONCE (f may be expensive: call it exactly once), then
    L_a = h.sum() and L_b = (h ** 2).sum(), and return (dL_a/dx, dL_b/dx): two tensors of x's
    shape that do not require grad, each the gradient of its own loss alone. Both backward
    passes go through the graph of h, which a backward pass frees unless told to keep it
    (`retain_graph=True`); and backward ADDS into x.grad, so what x.grad holds after the second
    pass is not dL_b/dx alone (a reference to x.grad taken earlier changes with it). x.grad
    afterwards may hold anything.

    >>> x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    >>> two_gradients(lambda t: 3 * t, x)     # dL_a/dx = 3, dL_b/dx = 2 * (3x) * 3 = 18x
    (tensor([3., 3.], dtype=torch.float64), tensor([ 18., -36.], dtype=torch.float64))
    """
    # TODO
    raise NotImplementedError("two_gradients")


def weighted_gradient(f, x: torch.Tensor, wa: float, wb: float) -> torch.Tensor:
    """The gradient of a weighted sum of the two losses of `two_gradients`, in ONE pass.

    With h = f(x) (f called exactly once), L_a = h.sum() and L_b = (h ** 2).sum(), return the
    gradient of L = wa * L_a + wb * L_b with respect to x: a tensor of x's shape that does not
    require grad. Run a single backward pass (one `backward()` or `torch.autograd.grad` on L):
    the graph is walked once, and every contribution arrives weighted. `x` is a leaf that
    requires grad (x.grad is None); x.grad afterwards may hold anything.

    >>> x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    >>> weighted_gradient(lambda t: 3 * t, x, 1.0, 0.5)     # 3 + 0.5 * 18x
    tensor([ 12., -15.], dtype=torch.float64)
    """
    # TODO
    raise NotImplementedError("weighted_gradient")


def backward_with_gradient(f, x: torch.Tensor, v: torch.Tensor) -> None:
    """Backpropagate a non-scalar output with an upstream gradient, into x.grad.

    `x` is a leaf that requires grad; its `.grad` is None or already holds a gradient. y = f(x)
    is a tensor of v's shape, usually not a scalar (then `y.backward()` alone fails: "grad can
    be implicitly created only for scalar outputs"). Run one backward pass from y with `v` as
    the gradient of y (call f once), so that x.grad receives the vector-Jacobian product
    v^T J (element j: sum over i of v[i] * dy[i]/dx[j]) ADDED to what it held, exactly as
    autograd accumulates: x.grad becomes old + v^T J, or v^T J when it was None. Returns None.

    >>> x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    >>> backward_with_gradient(lambda t: t ** 2, x, torch.tensor([1.0, 10.0], dtype=torch.float64))
    >>> x.grad                                    # 2 * x * v
    tensor([ 2., 40.], dtype=torch.float64)
    >>> backward_with_gradient(lambda t: t ** 2, x, torch.tensor([1.0, 0.0], dtype=torch.float64))
    >>> x.grad                                    # added to the gradient already there
    tensor([ 4., 40.], dtype=torch.float64)
    """
    # TODO
    raise NotImplementedError("backward_with_gradient")


INPLACE_CASES = ("sin_add_", "exp_add_", "saved_mul_add_", "unsaved_add_add_", "leaf_mul_",
                 "relu_", "sigmoid_mul_", "sigmoid_clone_mul_", "sigmoid_data_mul_",
                 "leaf_no_grad_mul_")


def inplace_case(case: str, x: torch.Tensor):
    """What autograd does with an in-place operation: x's gradient, or "error" when it refuses.

    `x` is a 1-D tensor that does not require grad; `case` is one of INPLACE_CASES. Start from
    xl = x.detach().clone().requires_grad_(True), run the case's code below, then L.backward().
    Return xl.grad (a tensor that does not require grad) when every step runs, or the string
    "error" when a step raises RuntimeError (autograd refusing the in-place operation: an
    operation's backward needs a tensor that was changed in place since, which it tells by the
    tensor's version counter; or an in-place change of a leaf that requires grad).

    - "sin_add_":            y = xl.sin(); y.add_(1.0); L = (y * y).sum()
    - "exp_add_":            y = xl.exp(); y.add_(1.0); L = y.sum()
    - "saved_mul_add_":      a = xl * 2; b = a * a; a.add_(1.0); L = b.sum()
    - "unsaved_add_add_":    a = xl * 2; b = a + 3; a.add_(1.0); L = (b * a).sum()
    - "leaf_mul_":           xl.mul_(2.0); L = xl.sum()
    - "relu_":               a = xl * 3; a.relu_(); L = (a ** 2).sum()
    - "sigmoid_mul_":        s = xl.sigmoid(); s.mul_(2.0); L = s.sum()
    - "sigmoid_clone_mul_":  s = xl.sigmoid().clone(); s.mul_(2.0); L = s.sum()
    - "sigmoid_data_mul_":   s = xl.sigmoid(); s.data.mul_(2.0); L = s.sum()
    - "leaf_no_grad_mul_":   with torch.no_grad(): xl.mul_(2.0)
                             then L = (xl ** 2).sum()

    (The clone is how to write an in-place change of a tensor a backward needs so that it
    works; `.data` hides the change from the version counter, and the gradient comes out
    silently wrong.) An unknown case raises ValueError. `x` is left as it was.

    >>> x = torch.tensor([0.0, 1.0], dtype=torch.float64)
    >>> inplace_case("sin_add_", x)           # sin's backward needs xl, not y: 2 y cos(x)
    tensor([2.0000, 1.9899], dtype=torch.float64)
    >>> inplace_case("exp_add_", x)           # exp's backward needs its output y
    'error'
    """
    # TODO
    raise NotImplementedError("inplace_case")


def frozen_encoder_grads(x: torch.Tensor, We: torch.Tensor, Wh: torch.Tensor, t: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Input and head gradients through a frozen encoder.

    x (N, D), We (D, H), Wh (H, K), t (N, K). The encoder h = torch.tanh(x @ We) is frozen (its
    weight We gets no gradient and is not changed), the head is out = h @ Wh, and
    L = ((out - t) ** 2).mean(). Return (dL/dx, dL/dWh), tensors of the shapes of x and Wh that
    do not require grad. Freezing We must not cut the graph between L and x: the gradient
    reaches x through the encoder. `x`, `We`, `Wh` and `t` are left as they were (We may arrive
    requiring grad: leave that as it was too).

    >>> x = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    >>> We = torch.tensor([[0.5], [0.0]], dtype=torch.float64)
    >>> Wh = torch.ones(1, 1, dtype=torch.float64)
    >>> dx, dWh = frozen_encoder_grads(x, We, Wh, torch.tensor([[1.0]], dtype=torch.float64))
    >>> dx.round(decimals=4), dWh.round(decimals=4)   # dx is not zero: x's path is intact
    (tensor([[-0.4230,  0.0000]], dtype=torch.float64), tensor([[-0.4971]], dtype=torch.float64))
    """
    # TODO
    raise NotImplementedError("frozen_encoder_grads")


def clipped_backward(f, g, x: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Clip a gradient on its way back with a hook, and record what the hook saw.

    `x` is a leaf that requires grad (x.grad is None); h = f(x) (call f once) and L = g(h), a
    scalar. Register a hook on h (`h.register_hook(fn)`): autograd calls fn with the gradient
    arriving at h, dL/dh, and uses what fn RETURNS in its place (a hook that returns None leaves
    the gradient unchanged). Make fn record a copy of that gradient and return it clamped to
    [-c, c]; then backpropagate L once. Return (x.grad, seen): the gradient that reached x with
    h's gradient clipped, and the unclipped dL/dh the hook recorded, tensors of the shapes of x
    and h that do not require grad. Do not change the hook's argument in place.

    >>> x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    >>> clipped_backward(lambda t: 2 * t, lambda h: (h ** 2).sum(), x, 3.0)   # dL/dh = 2h
    (tensor([ 4., -6.,  6.], dtype=torch.float64), tensor([ 2., -4.,  8.], dtype=torch.float64))
    """
    # TODO
    raise NotImplementedError("clipped_backward")
