"""Memory layout, views and broadcasting.

An array is a flat buffer plus a *shape* and *strides*: `strides[i]` is how many bytes to skip to
move one step along axis `i`. Transposing, slicing with a step and broadcasting only change the
shape and strides, never the data, which is why they are free (views), while `reshape` of a
non-contiguous array and `copy()` move bytes.

Fill in every function below. Each docstring is the contract the grader checks; run
`torchgrade check strides_broadcasting.py` to see how you are doing.
"""

from __future__ import annotations

import numpy as np
import torch


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-ordered (row-major) array of this shape and item size.

    stride[i] = itemsize * prod(shape[i+1:]); the same as np.empty(shape, dtype).strides for
    every shape without a zero-length axis. An empty shape () gives ().

    >>> c_strides((2, 3), 8)     # a 2x3 float64 array: one row is 3 * 8 bytes
    (24, 8)
    """
    # TODO
    raise NotImplementedError("c_strides")


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether an array with this layout is C-contiguous by NumPy's rule.

    Axes of length 1 are ignored (their stride never matters); an array with a zero-length axis
    is contiguous. Agrees with arr.flags['C_CONTIGUOUS'].

    >>> is_c_contiguous((2, 3), (24, 8), 8)
    True
    >>> is_c_contiguous((3, 2), (8, 24), 8)   # the transpose of the array above
    False
    """
    # TODO
    raise NotImplementedError("is_c_contiguous")


def transpose_view(a: np.ndarray) -> np.ndarray:
    """The axes of `a` reversed, without copying.

    The result shares memory with `a`, has shape and strides reversed, and equals a.T.

    >>> a = np.arange(6.0).reshape(2, 3)       # strides (24, 8)
    >>> transpose_view(a).strides
    (8, 24)
    """
    # TODO
    raise NotImplementedError("transpose_view")


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that any number of shapes broadcast to, by NumPy's rule.

    Align the shapes from the right; on each axis the sizes must be equal, or one of them 1, or
    missing. Raise ValueError when they are incompatible. Agrees with np.broadcast_shapes.

    >>> broadcast_shape((8, 1, 3), (4, 1))
    (8, 4, 3)
    """
    # TODO
    raise NotImplementedError("broadcast_shape")


def broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                      target_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of np.broadcast_to(a, target_shape) for an array `a` with this layout.

    0 on every axis that is added, stretched or of length 1; the array's own stride elsewhere.
    Raise ValueError when `shape` does not broadcast to `target_shape`.

    >>> broadcast_strides((3,), (8,), (4, 3))      # a row repeated 4 times
    (0, 8)
    """
    # TODO
    raise NotImplementedError("broadcast_strides")


def sliding_windows(x: np.ndarray, window: int, step: int = 1) -> np.ndarray:
    """A read-only view (no copy) of the windows of 1-D `x`.

    Shape ((len(x) - window) // step + 1, window); row i is x[i*step : i*step + window].
    Raise ValueError if window < 1, step < 1 or window > len(x).

    >>> sliding_windows(np.arange(5), 3)
    array([[0, 1, 2],
           [1, 2, 3],
           [2, 3, 4]])
    """
    # TODO
    raise NotImplementedError("sliding_windows")


def center_columns(x: np.ndarray) -> np.ndarray:
    """`x` (N, D) minus the mean of each column, shape (N, D); `x` itself is not modified.

    >>> center_columns(np.array([[1.0, 10.0], [3.0, 30.0]]))
    array([[ -1., -10.],
           [  1.,  10.]])
    """
    # TODO
    raise NotImplementedError("center_columns")


def pairwise_sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances (N, M) between the rows of a (N, D) and b (M, D).

    Never negative, and no Python loop over rows: N = M = 1000, D = 32 must finish in well under
    a second.

    >>> pairwise_sq_dists(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0], [0.0, 1.0]]))
    array([[25.,  1.]])
    """
    # TODO
    raise NotImplementedError("pairwise_sq_dists")


def to_tensor(arr: np.ndarray, share: bool) -> torch.Tensor:
    """A tensor with the same values, dtype and shape as `arr`.

    share=True: it shares memory with `arr` (a write to one is seen in the other).
    share=False: it is an independent copy.

    >>> a = np.zeros(3)
    >>> t = to_tensor(a, share=True); a[0] = 5.0; t[0].item()
    5.0
    """
    # TODO
    raise NotImplementedError("to_tensor")
