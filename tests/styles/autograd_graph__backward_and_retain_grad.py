"""autograd_graph written with backward(), retain_grad() and .grad throughout; the node names
read from each node's class; a breadth-first walk."""

from collections import deque

import torch


def grad_fn_chain(y):
    out = []
    node = y.grad_fn
    while node is not None:
        # The contract names type(node).__name__: node.name() would give
        # 'torch::autograd::AccumulateGrad' for the leaf's node.
        out.append(node.__class__.__name__)
        node = next((fn for fn, _ in node.next_functions if fn is not None), None)
    return out


def leaves_reached(y, tensors):
    queue, visited, found = deque([y.grad_fn]), [], []
    while queue:
        node = queue.popleft()
        if node is None or any(node is v for v in visited):
            continue
        visited.append(node)
        if hasattr(node, "variable"):
            found.append(node.variable)
        queue.extend(fn for fn, _ in node.next_functions)
    return sorted(k for k, t in tensors.items() if any(t is f for f in found))


def grad_status(tensors):
    result = {}
    for name, t in tensors.items():
        keeps = t.requires_grad and (t.grad_fn is None or t.retains_grad)
        result[name] = (t.grad_fn is None, keeps)
    return result


def hidden_grad(x, w):
    w = w.clone().requires_grad_()
    h = torch.tanh(x @ w)
    h.retain_grad()
    loss = h.pow(2).sum() / len(x)
    loss.backward()
    return h.grad.detach(), w.grad.detach()


def two_gradients(f, x):
    h = f(x)
    h.sum().backward(retain_graph=True)
    first = x.grad.detach().clone()
    x.grad.zero_()
    (h * h).sum().backward()
    return first, x.grad.detach().clone()


def weighted_gradient(f, x, wa, wb):
    h = f(x)
    (wa * h.sum() + wb * (h * h).sum()).backward()
    return x.grad.detach().clone()


def backward_with_gradient(f, x, v):
    f(x).backward(gradient=v)


def inplace_case(case, x):
    xl = x.detach().clone().requires_grad_(True)
    try:
        if case == "sin_add_":
            y = xl.sin(); y.add_(1.0); L = (y * y).sum()
        elif case == "exp_add_":
            y = xl.exp(); y.add_(1.0); L = y.sum()
        elif case == "saved_mul_add_":
            a = xl * 2; b = a * a; a.add_(1.0); L = b.sum()
        elif case == "unsaved_add_add_":
            a = xl * 2; b = a + 3; a.add_(1.0); L = (b * a).sum()
        elif case == "leaf_mul_":
            xl.mul_(2.0); L = xl.sum()
        elif case == "relu_":
            a = xl * 3; a.relu_(); L = (a ** 2).sum()
        elif case == "sigmoid_mul_":
            s = xl.sigmoid(); s.mul_(2.0); L = s.sum()
        elif case == "sigmoid_clone_mul_":
            s = xl.sigmoid().clone(); s.mul_(2.0); L = s.sum()
        elif case == "sigmoid_data_mul_":
            s = xl.sigmoid(); s.data.mul_(2.0); L = s.sum()
        elif case == "leaf_no_grad_mul_":
            with torch.no_grad():
                xl.mul_(2.0)
            L = (xl ** 2).sum()
        else:
            raise ValueError(case)
        L.backward()
    except RuntimeError:
        return "error"
    return xl.grad


def frozen_encoder_grads(x, We, Wh, t):
    x = x.clone().requires_grad_()
    Wh = Wh.detach().clone().requires_grad_()
    We = We.detach().clone()  # frozen: a copy that does not require grad
    out = torch.tanh(x @ We) @ Wh
    F = torch.nn.functional
    F.mse_loss(out, t).backward()
    return x.grad, Wh.grad


def clipped_backward(f, g, x, c):
    record = {}

    def hook(grad):
        record["seen"] = grad.clone()
        return torch.clamp(grad, min=-c, max=c)

    h = f(x)
    h.register_hook(hook)
    g(h).backward()
    return x.grad.clone(), record["seen"]
