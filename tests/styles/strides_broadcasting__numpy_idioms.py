"""A correct submission in another style: lean on numpy wherever the contract allows."""
import numpy as np
import torch


def c_strides(shape, itemsize):
    # Not np.empty(shape, ...).strides: on a zero-length axis numpy picks strides of its own.
    if not shape:
        return ()
    return tuple(int(s) for s in itemsize * np.cumprod((1,) + tuple(shape[:0:-1]))[::-1])


def is_c_contiguous(shape, strides, itemsize):
    if 0 in shape:
        return True
    arr = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.dtype((np.void, itemsize))),
                                          shape, strides)
    return arr.flags["C_CONTIGUOUS"]


def transpose_view(a):
    return np.transpose(a)


def broadcast_shape(*shapes):
    return np.broadcast_shapes(*shapes)


def broadcast_strides(shape, strides, target_shape):
    base = np.lib.stride_tricks.as_strided(np.zeros(1), shape, strides)
    return np.broadcast_to(base, target_shape).strides


def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("1 <= window <= len(x) and step >= 1 required")
    return np.lib.stride_tricks.sliding_window_view(x, window)[::step]


def center_columns(x):
    return x - np.mean(x, axis=0, keepdims=True)


def pairwise_sq_dists(a, b):
    d = np.einsum("ij,ij->i", a, a)[:, None] + np.einsum("ij,ij->i", b, b)[None, :] - 2 * a @ b.T
    d[d < 0] = 0
    return d


def to_tensor(arr, share):
    return torch.as_tensor(arr) if share else torch.from_numpy(arr).clone()
