"""Array layouts the memory-layout checks feed to submissions, and numpy as their answer key.

Generic generators only (no expected values of any check live here).
"""

from __future__ import annotations

import numpy as np

DTYPES_BY_ITEMSIZE = {1: np.int8, 2: np.int16, 4: np.float32, 8: np.float64, 16: np.complex128}


def random_shape(rng: np.random.Generator, ndim_range: tuple[int, int] = (1, 5),
                 size_range: tuple[int, int] = (1, 7)) -> tuple[int, ...]:
    ndim = int(rng.integers(*ndim_range, endpoint=True))
    return tuple(int(n) for n in rng.integers(*size_range, size=ndim, endpoint=True))


def strided_views(rng: np.random.Generator, dtype=np.float64, place=None
                  ) -> list[tuple[str, np.ndarray]]:
    """(description, array) pairs covering the layouts students meet: C and F order, transposes,
    slices with steps, negative strides, length-1 axes, broadcast (stride-0) views, 0-d and empty.

    `place` puts each base array where the caller wants it (e.g. shared memory); every other
    array is a view of a placed one.
    """
    place = place or (lambda x: x)
    a = place(rng.standard_normal((4, 6)).astype(dtype))
    b = place(rng.standard_normal((3, 4, 5)).astype(dtype))
    return [
        ("a C-ordered 4x6 array", a),
        ("a C-ordered 3x4x5 array", b),
        ("a.T (transposed)", a.T),
        ("a Fortran-ordered 6x4 array", place(np.ascontiguousarray(a)).T),
        ("a[:, ::2] (every second column)", a[:, ::2]),
        ("a[::2] (every second row)", a[::2]),
        ("a[1:3] (a block of rows)", a[1:3]),
        ("a[::-1] (rows reversed)", a[::-1]),
        ("a[:, ::-1] (columns reversed)", a[:, ::-1]),
        ("b.transpose(1, 0, 2)", b.transpose(1, 0, 2)),
        ("b[:, 1:2, :] (a length-1 axis)", b[:, 1:2, :]),
        ("a[None] (a new leading axis)", a[None]),
        ("a 1-d array", a[0]),
        ("np.broadcast_to(a[0], (3, 6)) (stride 0)", np.broadcast_to(a[0], (3, 6))),
        ("a 0-d array", place(np.asarray(1.5).astype(dtype))),
        ("an empty 0x3 array", place(np.zeros((0, 3), dtype=dtype))),
    ]


def numpy_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """numpy's own verdict for an arbitrary (shape, strides) layout, built over a scratch buffer."""
    low = sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0 and n > 0)
    high = sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0 and n > 0)
    buffer = bytearray(high - low + itemsize)
    arr = np.ndarray(shape, dtype=np.dtype((np.void, itemsize)), buffer=buffer, offset=-low,
                     strides=strides)
    return bool(arr.flags.c_contiguous)
