"""Memory layout, views and broadcasting: reference solution.

Its contract: CURRICULUM.md, `strides_broadcasting`.
"""

from __future__ import annotations

import numpy as np
import torch


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def is_c_contiguous(shape, strides, itemsize) -> bool:
    if any(n == 0 for n in shape):
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


def transpose_view(a: np.ndarray) -> np.ndarray:
    # Spelled out to show the idea; `a.T` is the same view.
    return np.lib.stride_tricks.as_strided(a, shape=a.shape[::-1], strides=a.strides[::-1],
                                           writeable=a.flags.writeable)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast: sizes {sorted(sizes)} on axis {axis}")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def broadcast_strides(shape, strides, target_shape) -> tuple[int, ...]:
    if len(shape) > len(target_shape):
        raise ValueError(f"{shape} has more axes than {target_shape}")
    offset = len(target_shape) - len(shape)
    out = [0] * offset
    for n, s, t in zip(shape, strides, target_shape[offset:]):
        if n == t and n != 1:
            out.append(s)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError(f"{shape} does not broadcast to {target_shape}")
    return tuple(out)


def sliding_windows(x: np.ndarray, window: int, step: int = 1) -> np.ndarray:
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("need 1 <= window <= len(x) and step >= 1")
    count = (len(x) - window) // step + 1
    (s,) = x.strides
    return np.lib.stride_tricks.as_strided(x, shape=(count, window), strides=(step * s, s),
                                           writeable=False)


def center_columns(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0, keepdims=True)


def pairwise_sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    sq = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(sq, 0.0)


def to_tensor(arr: np.ndarray, share: bool) -> torch.Tensor:
    return torch.from_numpy(arr) if share else torch.tensor(arr)

