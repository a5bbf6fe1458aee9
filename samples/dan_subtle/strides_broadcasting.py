"""Almost there: each bug below survives a quick test in the REPL."""
import math

import numpy as np
import torch


def c_strides(shape, itemsize):
    return tuple(itemsize * math.prod(shape[i + 1:]) for i in range(len(shape)))


def is_c_contiguous(shape, strides, itemsize):
    if 0 in shape:
        return True
    return all(s == c for n, s, c in zip(shape, strides, c_strides(shape, itemsize)) if n != 1)


def transpose_view(a):
    return a.T


def broadcast_shape(*shapes):
    return np.broadcast_shapes(*shapes)


def broadcast_strides(shape, strides, target_shape):
    return np.broadcast_to(np.lib.stride_tricks.as_strided(np.zeros(1), shape, strides),
                           target_shape).strides


def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("bad window")
    rows = (len(x) - window) // step + 1
    # forgot writeable=False: students can scribble over overlapping windows
    return np.lib.stride_tricks.as_strided(x, (rows, window), (step * x.strides[0], x.strides[0]))


def center_columns(x):
    x -= x.mean(axis=0)  # in place: the caller's array changes too
    return x


def pairwise_sq_dists(a, b):
    # no clip: rounding leaves tiny negative numbers
    return (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T


def to_tensor(arr, share):
    return torch.from_numpy(arr) if share else torch.from_numpy(arr.copy())
