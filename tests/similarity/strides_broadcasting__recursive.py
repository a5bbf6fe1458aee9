"""strides_broadcasting written for tests/test_similarity.py by someone else again: recursion,
functools, and NumPy's own constructors where they exist (an independent solution)."""
from functools import reduce
from itertools import zip_longest

import numpy as np
import torch


def c_strides(shape, itemsize):
    if not shape:
        return ()
    rest = c_strides(shape[1:], itemsize)
    inner = rest[0] * shape[1] if rest else itemsize
    return (inner,) + rest


def is_c_contiguous(shape, strides, itemsize):
    if 0 in shape:
        return True
    kept = [(n, s) for n, s in zip(shape, strides) if n != 1]
    expected = c_strides(tuple(n for n, _ in kept), itemsize)
    return all(s == e for (_, s), e in zip(kept, expected))


def transpose_view(a):
    return np.lib.stride_tricks.as_strided(a, shape=a.shape[::-1], strides=a.strides[::-1],
                                           writeable=a.flags.writeable)


def _merge(p, q):
    if p == q or q == 1:
        return p
    if p == 1:
        return q
    raise ValueError(f"sizes {p} and {q} do not broadcast")


def broadcast_shape(*shapes):
    axes = zip_longest(*(reversed(s) for s in shapes), fillvalue=1)
    return tuple(reversed([reduce(_merge, sizes, 1) for sizes in axes]))


def broadcast_strides(shape, strides, target_shape):
    extra = len(target_shape) - len(shape)
    if extra < 0:
        raise ValueError("the target has fewer axes")
    padded = [(1, 0)] * extra + list(zip(shape, strides))
    out = []
    for (n, s), t in zip(padded, target_shape):
        if n not in (1, t):
            raise ValueError(f"{n} cannot stretch to {t}")
        out.append(s if n == t and n != 1 else 0)
    return tuple(out)


def sliding_windows(x, window, step=1):
    if min(window, step) < 1 or window > x.shape[0]:
        raise ValueError("bad window or step")
    views = np.lib.stride_tricks.sliding_window_view(x, window)[::step]
    views.flags.writeable = False
    return views


def center_columns(x):
    means = np.mean(x, axis=0)
    return np.subtract(x, means[np.newaxis, :])


def pairwise_sq_dists(a, b):
    cross = np.einsum("nd,md->nm", a, b)
    norms_a = np.einsum("nd,nd->n", a, a)
    norms_b = np.einsum("md,md->m", b, b)
    return np.clip(norms_a[:, np.newaxis] - 2 * cross + norms_b[np.newaxis, :], 0, None)


def to_tensor(arr, share):
    if share:
        return torch.as_tensor(arr)
    return torch.tensor(np.array(arr, copy=True))
