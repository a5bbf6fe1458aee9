# Typical first attempts: right idea, wrong detail, in almost every function.
import numpy as np
import torch


def c_strides(shape, itemsize):
    # walks the axes from the left: that is Fortran order
    strides = []
    step = itemsize
    for n in shape:
        strides.append(step)
        step *= n
    return tuple(strides)


def is_c_contiguous(shape, strides, itemsize):
    # forgets that axes of length 1 do not matter
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if s != expected:
            return False
        expected *= n
    return True


def transpose_view(a):
    return np.ascontiguousarray(a.T)  # right values, but a copy


def broadcast_shape(*shapes):
    # takes the largest size per axis and never checks compatibility
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    return tuple(max(sizes) for sizes in zip(*padded))


def broadcast_strides(shape, strides, target_shape):
    offset = len(target_shape) - len(shape)
    out = [0] * offset
    for n, s, t in zip(shape, strides, target_shape[offset:]):
        out.append(s if n == t else 0)
    return tuple(out)


def sliding_windows(x, window, step=1):
    rows = (len(x) - window) // step + 1
    return np.array([x[i * step:i * step + window] for i in range(rows)])


def center_columns(x):
    return x - x.mean()  # the mean of everything, not of each column


def pairwise_sq_dists(a, b):
    return (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T


def to_tensor(arr, share):
    return torch.tensor(arr)
