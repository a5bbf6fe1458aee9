"""Code that misbehaves: an endless loop, a hard exit, a flood of output, a fake result."""
import os

import numpy as np
import torch


def c_strides(shape, itemsize):
    class AlwaysEqual(tuple):
        def __eq__(self, other):
            return True
    return AlwaysEqual((0,) * len(shape))  # tries to fool an == comparison


def is_c_contiguous(shape, strides, itemsize):
    while True:  # never returns
        pass


def transpose_view(a):
    os._exit(0)  # kills its own process


def broadcast_shape(*shapes):
    return np.broadcast_shapes(*shapes)


def broadcast_strides(shape, strides, target_shape):
    return np.broadcast_to(np.lib.stride_tricks.as_strided(np.zeros(1), shape, strides),
                           target_shape).strides


def sliding_windows(x, window, step=1):
    big = np.ones(10 ** 10)  # 80 GB
    return big


def center_columns(x):
    print("debug " * 100000)
    return x - x.mean(axis=0)


def pairwise_sq_dists(a, b):
    np.allclose = lambda *args, **kwargs: True  # monkeypatching here changes nothing
    return np.zeros((len(a), len(b)))


def to_tensor(arr, share):
    return torch.from_numpy(arr) if share else torch.tensor(arr)
