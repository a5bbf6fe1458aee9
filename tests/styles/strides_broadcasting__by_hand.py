"""A correct submission in another style: plain Python loops over axes (never over rows)."""
import math

import numpy as np
import torch


def c_strides(shape, itemsize):
    return tuple(int(itemsize * np.prod(shape[i + 1:])) for i in range(len(shape)))


def is_c_contiguous(shape, strides, itemsize):
    if any(n == 0 for n in shape):
        return True
    want = itemsize
    for n, s in reversed(list(zip(shape, strides))):
        if n > 1 and s != want:
            return False
        want *= n
    return True


def transpose_view(a):
    return a.transpose(*range(a.ndim - 1, -1, -1))


def broadcast_shape(*shapes):
    out = []
    for i in range(1, max(map(len, shapes), default=0) + 1):
        size = 1
        for s in shapes:
            if i <= len(s) and s[-i] != 1:
                if size not in (1, s[-i]):
                    raise ValueError(f"cannot broadcast {shapes}")
                size = s[-i]
        out.append(size)
    return tuple(reversed(out))


def broadcast_strides(shape, strides, target_shape):
    if len(shape) > len(target_shape):
        raise ValueError("shape has more axes than the target")
    result = [0] * len(target_shape)
    for i in range(1, len(shape) + 1):
        n, t = shape[-i], target_shape[-i]
        if n == t and n != 1:
            result[-i] = strides[-i]
        elif n != 1:
            raise ValueError(f"{shape} does not broadcast to {target_shape}")
    return tuple(result)


def sliding_windows(x, window, step=1):
    if not (1 <= window <= len(x)) or step < 1:
        raise ValueError("bad window or step")
    rows = math.floor((len(x) - window) / step) + 1
    view = np.lib.stride_tricks.as_strided(x, shape=(rows, window),
                                           strides=(x.strides[0] * step, x.strides[0]))
    view.flags.writeable = False
    return view


def center_columns(x):
    means = x.sum(axis=0) / x.shape[0]
    return x - means[np.newaxis, :]


def pairwise_sq_dists(a, b):
    return np.clip(((a[:, np.newaxis, :] - b[np.newaxis, :, :]) ** 2).sum(axis=2), 0, None)


def to_tensor(arr, share):
    if share:
        return torch.from_numpy(arr)
    return torch.tensor(arr.copy())
