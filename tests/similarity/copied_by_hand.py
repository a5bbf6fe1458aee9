"""Homework 1: strides and broadcasting (my solution).

A copy of strides_broadcasting__recursive.py disguised by hand, as a student would: every name
changed, the functions in another order, comments and docstrings of its own, another layout
and `numpy` imported without an alias. Used by
tests/test_similarity.py, which expects it flagged with its source.
"""
import numpy
import torch
from functools import reduce
from itertools import zip_longest


def to_tensor(array, share):
    # share memory or make a copy
    if share:
        return torch.as_tensor(array)
    return torch.tensor(numpy.array(array, copy=True))


def pairwise_sq_dists(first, second):
    """Distances between all rows, via the expansion |a-b|^2 = |a|^2 - 2ab + |b|^2."""
    dot = numpy.einsum("nd,md->nm", first, second)
    sq_first = numpy.einsum("nd,nd->n", first, first)
    sq_second = numpy.einsum("md,md->m", second, second)
    return numpy.clip(sq_first[:, numpy.newaxis] - 2 * dot + sq_second[numpy.newaxis, :],
                      0, None)


def center_columns(data):
    avg = numpy.mean(data, axis=0)  # column means
    return numpy.subtract(data, avg[numpy.newaxis, :])


def sliding_windows(seq, size, hop=1):
    if min(size, hop) < 1 or size > seq.shape[0]:
        raise ValueError("bad window or step")
    result = numpy.lib.stride_tricks.sliding_window_view(seq, size)[::hop]
    result.flags.writeable = False   # read only!
    return result


def combine(left, right):
    # two sizes on one axis
    if left == right or right == 1:
        return left
    if left == 1:
        return right
    raise ValueError(f"sizes {left} and {right} do not broadcast")


def broadcast_shape(*all_shapes):
    columns = zip_longest(*(reversed(shp) for shp in all_shapes), fillvalue=1)
    return tuple(reversed([reduce(combine, col, 1) for col in columns]))


def broadcast_strides(shp, strd, target):
    missing = len(target) - len(shp)
    if missing < 0:
        raise ValueError("the target has fewer axes")
    pairs = [(1, 0)] * missing + list(zip(shp, strd))
    answer = []
    for (size, stride), goal in zip(pairs, target):
        if size not in (1, goal):
            raise ValueError(f"{size} cannot stretch to {goal}")
        answer.append(stride if size == goal and size != 1 else 0)
    return tuple(answer)


def c_strides(shape, itemsize):
    """Recursive: the last axis has stride itemsize."""
    if not shape:
        return ()
    tail = c_strides(shape[1:], itemsize)
    step = tail[0] * shape[1] if tail else itemsize
    return (step,) + tail


def is_c_contiguous(shape, strides, itemsize):
    if 0 in shape:
        return True
    nontrivial = [(dim, st) for dim, st in zip(shape, strides) if dim != 1]
    want = c_strides(tuple(dim for dim, _ in nontrivial), itemsize)
    return all(st == w for (_, st), w in zip(nontrivial, want))


def transpose_view(arr):
    return numpy.lib.stride_tricks.as_strided(
        arr,
        shape=arr.shape[::-1],
        strides=arr.strides[::-1],
        writeable=arr.flags.writeable,
    )
