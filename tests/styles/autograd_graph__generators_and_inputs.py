"""autograd_graph with a generator over the graph's nodes, backward(inputs=...), hooks made
with functools.partial, and grad_fn tests instead of is_leaf."""

import functools

import torch


def _nodes(root):
    """Every node reachable from root, each once (depth first)."""
    seen = {}
    todo = [root] if root is not None else []
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen[node] = True
        yield node
        todo.extend(n for n, _ in reversed(node.next_functions) if n is not None)


def grad_fn_chain(y):
    names = []
    node = y.grad_fn
    while node:
        names.append(node.__class__.__name__)
        nexts = [n for n, _ in node.next_functions if n]
        node = nexts[0] if nexts else None
    return names


def leaves_reached(y, tensors):
    leaves = [n.variable for n in _nodes(y.grad_fn) if hasattr(n, "variable")]
    return sorted(name for name in tensors if any(tensors[name] is v for v in leaves))


def grad_status(tensors):
    status = {}
    for name, t in tensors.items():
        leaf = (not t.requires_grad) or t.grad_fn is None
        status[name] = (leaf, bool(t.requires_grad and (leaf or t.retains_grad)))
    return status


def hidden_grad(x, w):
    w = torch.nn.Parameter(w.clone())
    h = torch.tanh(torch.matmul(x, w))
    h.retain_grad()
    (h.pow(2).sum() / x.size(0)).backward(inputs=[h, w])
    return h.grad.clone(), w.grad.clone()


def two_gradients(f, x):
    h = f(x)
    grads = []
    for i, loss in enumerate([h.sum(), (h ** 2).sum()]):
        x.grad = None
        loss.backward(retain_graph=(i == 0), inputs=[x])
        grads.append(x.grad.clone())
    return tuple(grads)


def weighted_gradient(f, x, wa, wb):
    h = f(x)
    total = torch.stack([h.sum(), (h ** 2).sum()]) @ torch.tensor([wa, wb], dtype=h.dtype)
    total.backward(inputs=[x])
    return x.grad.clone()


def backward_with_gradient(f, x, v):
    torch.autograd.backward(f(x), grad_tensors=v)
    return None


def inplace_case(case, x):
    xl = x.detach().clone()
    xl.requires_grad = True
    if case == "leaf_mul_":
        try:
            xl.mul_(2.0)
        except RuntimeError:
            return "error"
        xl.sum().backward()
        return xl.grad
    if case == "leaf_no_grad_mul_":
        with torch.no_grad():
            xl.mul_(2.0)
        (xl ** 2).sum().backward()
        return xl.grad
    builders = {
        "sin_add_": lambda: (xl.sin(), lambda y: y.add_(1.0), lambda y, _: (y * y).sum()),
        "exp_add_": lambda: (xl.exp(), lambda y: y.add_(1.0), lambda y, _: y.sum()),
        "relu_": lambda: (xl * 3, lambda a: a.relu_(), lambda a, _: (a ** 2).sum()),
        "sigmoid_mul_": lambda: (xl.sigmoid(), lambda s: s.mul_(2.0), lambda s, _: s.sum()),
        "sigmoid_clone_mul_": lambda: (xl.sigmoid().clone(), lambda s: s.mul_(2.0),
                                       lambda s, _: s.sum()),
        "sigmoid_data_mul_": lambda: (xl.sigmoid(), lambda s: s.data.mul_(2.0),
                                      lambda s, _: s.sum()),
    }
    try:
        if case in builders:
            t, change, loss_of = builders[case]()
            change(t)
            loss = loss_of(t, None)
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
        else:
            raise ValueError("unknown case: " + case)
        loss.backward()
    except RuntimeError:
        return "error"
    return xl.grad


def frozen_encoder_grads(x, We, Wh, t):
    x = x.clone().requires_grad_(True)
    Wh = Wh.clone().requires_grad_(True)
    we = We.detach().clone()
    h = torch.tanh(x @ we)
    loss = torch.mean((h @ Wh - t) ** 2)
    loss.backward()
    return x.grad, Wh.grad


def _clip(store, c, grad):
    store.append(grad.detach().clone())
    return grad.clamp(-c, c)


def clipped_backward(f, g, x, c):
    store = []
    h = f(x)
    handle = h.register_hook(functools.partial(_clip, store, c))
    try:
        g(h).backward()
    finally:
        handle.remove()
    return x.grad.detach().clone(), store[0]
