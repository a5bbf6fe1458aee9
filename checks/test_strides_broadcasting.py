"""Visible checks for `strides_broadcasting` (CURRICULUM.md section 1).

numpy and torch in the grader are the answer key; arrays whose memory matters are placed in
memory shared with the worker (`sub.shared`) so that views and copies are told apart here.
Expected values come from the private arrays a check shared (`sub.call` fails the check if the
call wrote into a shared copy).
"""

import numpy as np
import torch

from strides_broadcasting_cases import DTYPES_BY_ITEMSIZE, random_shape, strided_views
from strides_broadcasting_verify import (BROADCAST_HINT, CENTER_HINT, CONTIGUOUS_HINT,
                                                       PAIRWISE_HINT, STRIDE_HINT, TENSOR_HINT,
                                                       VIEW_HINT, WINDOW_HINT, record_shapes)
from grader import (as_bool, as_int_tuple, check, expect_array, expect_equal, expect_no_view,
                    expect_type, expect_view, fail)


@check(points=2, targets="c_strides", visibility="visible")
def test_c_strides_matches_numpy(sub):
    """c_strides equals numpy's strides for C-ordered arrays"""
    rng = np.random.default_rng(101)
    cases = [((2, 3), 8), ((3, 4, 5), 4), ((5,), 2), ((2, 1, 3), 8)]
    cases += [(random_shape(rng), int(rng.choice([1, 2, 4, 8, 16]))) for _ in range(40)]
    for shape, itemsize in cases:
        call = f"c_strides({shape}, {itemsize})"
        got = as_int_tuple(sub.call("c_strides", shape, itemsize), call=call)
        expected = np.empty(shape, dtype=DTYPES_BY_ITEMSIZE[itemsize]).strides
        expect_equal(got, expected, call=call, hint=STRIDE_HINT)


@check(points=2, targets="is_c_contiguous", visibility="visible")
def test_is_c_contiguous_real_arrays(sub):
    """is_c_contiguous agrees with numpy's C_CONTIGUOUS flag on real array layouts"""
    rng = np.random.default_rng(102)
    for dtype in (np.float64, np.int16):
        for label, arr in strided_views(rng, dtype)[:13]:
            args = (arr.shape, arr.strides, arr.itemsize)
            call = f"is_c_contiguous{args}  # {label}"
            got = as_bool(sub.call("is_c_contiguous", *args), call=call)
            expect_equal(got, bool(arr.flags.c_contiguous), call=call, hint=CONTIGUOUS_HINT)


@check(points=2, targets="transpose_view", visibility="visible")
def test_transpose_view_values_and_layout(sub):
    """transpose_view reverses the axes of C-ordered arrays without copying"""
    rng = np.random.default_rng(103)
    for shape in [(3, 4), (2, 3, 5), (1, 6), (4, 1, 2)]:
        original = rng.standard_normal(shape)
        a = sub.shared(original, name="a")
        call = f"transpose_view(a)  # a of shape {a.shape}, strides {a.strides}"
        got = sub.call("transpose_view", a)
        expect_array(got, original.T, call=call, rtol=0, hint=VIEW_HINT)
        expect_view(got, a, call=call, what="a view of a", hint=VIEW_HINT)
        expect_equal(tuple(got.strides), a.strides[::-1], call=call,
                     what="returned an array with strides", hint=VIEW_HINT)


@check(points=2, targets="broadcast_shape", visibility="visible")
def test_broadcast_shape_compatible(sub, evidence):
    """broadcast_shape agrees with np.broadcast_shapes on compatible shapes"""
    rng = np.random.default_rng(104)
    cases = [((3, 1), (1, 4)), ((5, 4), (4,)), ((2, 1, 3), (4, 1)), ((1,), (7,))]
    for _ in range(30):
        target = random_shape(rng, (1, 4), (1, 5))
        shapes = []
        for _ in range(int(rng.integers(2, 4, endpoint=True))):
            keep = int(rng.integers(0, len(target), endpoint=True))
            shape = tuple(n if rng.random() < 0.6 else 1 for n in target[len(target) - keep:])
            shapes.append(shape)
        cases.append(tuple(shapes))
    for shapes in cases:
        call = f"broadcast_shape{shapes}"
        record_shapes(evidence, shapes, np.broadcast_shapes(*shapes))
        got = as_int_tuple(sub.call("broadcast_shape", *shapes), call=call)
        evidence["got_shape"] = list(got)
        expect_equal(got, np.broadcast_shapes(*shapes), call=call, hint=BROADCAST_HINT)


@check(points=2, targets="broadcast_strides", visibility="visible")
def test_broadcast_strides_matches_numpy(sub, evidence):
    """broadcast_strides equals the strides of np.broadcast_to for C-ordered arrays"""
    rng = np.random.default_rng(105)
    cases = [((3,), (4, 3)), ((2, 1), (2, 5)), ((1, 3), (4, 2, 3)), ((5,), (5,))]
    for _ in range(25):
        target = random_shape(rng, (1, 4), (2, 5))
        keep = int(rng.integers(1, len(target), endpoint=True))
        shape = tuple(n if rng.random() < 0.6 else 1 for n in target[len(target) - keep:])
        cases.append((shape, target))
    for shape, target in cases:
        arr = np.empty(shape, dtype=np.float64)
        args = (shape, arr.strides, target)
        call = f"broadcast_strides{args}"
        record_shapes(evidence, [shape, target], target, labels=["shape", "target"],
                      expected_strides=np.broadcast_to(arr, target).strides)
        got = as_int_tuple(sub.call("broadcast_strides", *args), call=call)
        evidence["got_strides"] = list(got)
        expect_equal(got, np.broadcast_to(arr, target).strides, call=call,
                     hint="a broadcast axis repeats the same elements, so its stride is 0.")


@check(points=2, targets="sliding_windows", visibility="visible")
def test_sliding_windows_values(sub):
    """sliding_windows has the right shape and rows"""
    rng = np.random.default_rng(106)
    for n, window, step in [(10, 3, 1), (12, 4, 2), (7, 7, 1), (9, 2, 3), (5, 1, 1)]:
        original = rng.standard_normal(n)
        x = sub.shared(original, name="x")
        call = f"sliding_windows(x, {window}, {step})  # len(x) == {n}"
        got = sub.call("sliding_windows", x, window, step)
        rows = (n - window) // step + 1
        expected = np.stack([original[i * step:i * step + window] for i in range(rows)])
        expect_array(got, expected, call=call, rtol=0, hint=WINDOW_HINT)


@check(points=1, targets="sliding_windows", visibility="visible")
def test_sliding_windows_is_a_read_only_view(sub):
    """sliding_windows returns a read-only view of x, not a copy"""
    rng = np.random.default_rng(107)
    x = sub.shared(rng.standard_normal(20), name="x")
    call = "sliding_windows(x, 5, 2)  # len(x) == 20"
    got = sub.call("sliding_windows", x, 5, 2)
    expect_type(got, np.ndarray, call=call, what="a numpy array")
    # The windows first: a read-only view of anything else is not the property asked for.
    expected = np.stack([x[i:i + 5] for i in range(0, 16, 2)])
    expect_array(got, expected, call=call, rtol=0, hint=WINDOW_HINT)
    expect_view(got, x, call=call, what="a view of x", hint=WINDOW_HINT)
    if got.flags.writeable:
        fail(f"{call} returned a writeable view: its rows overlap, so one write would change "
             "several windows. Return it read-only.", call=call, expected="read-only",
             got="writeable", hint="as_strided(..., writeable=False)")


@check(points=2, targets="center_columns", visibility="visible")
def test_center_columns_values(sub):
    """center_columns subtracts each column's mean"""
    rng = np.random.default_rng(108)
    for shape in [(5, 3), (10, 1), (4, 7)]:
        x = rng.standard_normal(shape) * 3 + rng.standard_normal(shape[1])
        call = f"center_columns(x)  # x of shape {shape}"
        got = sub.call("center_columns", x)
        expect_array(got, x - x.mean(axis=0), call=call, rtol=1e-9, atol=1e-12,
                     check_dtype=False, hint=CENTER_HINT)


@check(points=1, targets="center_columns", visibility="visible")
def test_center_columns_leaves_input_alone(sub):
    """center_columns does not modify x"""
    rng = np.random.default_rng(109)
    original = rng.standard_normal((6, 4)) + 5
    x = sub.shared(original, name="x")
    call = "center_columns(x)  # x of shape (6, 4)"
    # sub.call fails the check if x holds other values once the call returned. The centred
    # copy must come back too: doing nothing at all leaves x alone as well.
    got = sub.call("center_columns", x)
    expect_array(got, original - original.mean(axis=0), call=call, rtol=1e-9, atol=1e-12,
                 check_dtype=False, hint=CENTER_HINT)


@check(points=2, targets="pairwise_sq_dists", visibility="visible")
def test_pairwise_sq_dists_values(sub):
    """pairwise_sq_dists matches the squared distances row by row"""
    rng = np.random.default_rng(110)
    for n, m, d in [(4, 5, 3), (1, 6, 2), (7, 1, 4), (20, 30, 8)]:
        a, b = rng.standard_normal((n, d)), rng.standard_normal((m, d))
        call = f"pairwise_sq_dists(a, b)  # a {a.shape}, b {b.shape}"
        got = sub.call("pairwise_sq_dists", a, b)
        expected = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        expect_array(got, expected, call=call, rtol=1e-9, atol=1e-12, check_dtype=False,
                     hint=PAIRWISE_HINT)


@check(points=2, targets="to_tensor", visibility="visible")
def test_to_tensor_share_true_shares_memory(sub):
    """to_tensor(arr, share=True) is a tensor over the same memory"""
    rng = np.random.default_rng(111)
    for dtype in (np.float64, np.float32, np.int64):
        original = (rng.standard_normal((3, 4)) * 10).astype(dtype)
        arr = sub.shared(original, name="arr")
        call = f"to_tensor(arr, share=True)  # arr {dtype.__name__} {arr.shape}"
        got = sub.call("to_tensor", arr, share=True)
        expect_array(got, torch.from_numpy(original), call=call, rtol=0, hint=TENSOR_HINT)
        expect_view(got, arr, call=call, what="a tensor sharing arr's memory", hint=TENSOR_HINT)


@check(points=1, targets="to_tensor", visibility="visible")
def test_to_tensor_share_false_copies(sub):
    """to_tensor(arr, share=False) is an independent copy"""
    rng = np.random.default_rng(112)
    for dtype in (np.float64, np.int32):
        original = (rng.standard_normal((4, 2)) * 10).astype(dtype)
        arr = sub.shared(original, name="arr")
        call = f"to_tensor(arr, share=False)  # arr {dtype.__name__} {arr.shape}"
        got = sub.call("to_tensor", arr, share=False)
        expect_array(got, torch.from_numpy(original), call=call, rtol=0, hint=TENSOR_HINT)
        expect_no_view(got, arr, call=call, hint=TENSOR_HINT)
