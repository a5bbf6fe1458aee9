"""Hidden checks for `strides_broadcasting`: edge cases, every layout, invalid arguments.

Expected values come from private copies taken before each call (`sub.call` fails the check if
the call wrote into a shared array)."""

import math

import numpy as np
import torch

from strides_broadcasting_cases import numpy_c_contiguous, strided_views
from strides_broadcasting_verify import (BROADCAST_HINT, CENTER_HINT, CONTIGUOUS_HINT,
                                                       PAIRWISE_HINT, STRIDE_HINT, TENSOR_HINT,
                                                       VIEW_HINT, WINDOW_HINT, record_shapes)
from strides_broadcasting_verify_hidden import STEP_LIMIT, expect_no_loop_run_by_c_code
from grader import (as_bool, as_int_tuple, check, expect_array, expect_equal, expect_no_view,
                    expect_view, fail)


@check(points=1, targets="c_strides")
def test_c_strides_edge_cases(sub):
    """c_strides handles 0-d shapes, length-1 and zero-length axes and unusual itemsizes"""
    for shape, itemsize in [((), 8), ((1, 1, 1), 4), ((1000, 1, 3), 2), ((7,), 1),
                            ((1, 5), 8), ((5, 1), 8), ((2, 3), 3), ((2, 2, 2, 2, 2, 2), 16),
                            ((3, 0), 8), ((0, 3), 8), ((2, 0, 4), 4), ((0,), 2)]:
        # itemsize by keyword, as the contract names it (the visible checks pass it by position)
        call = f"c_strides({shape}, itemsize={itemsize})"
        got = as_int_tuple(sub.call("c_strides", shape, itemsize=itemsize), call=call)
        # The contract's formula; numpy agrees except on zero-length axes, where its strides
        # are its own choice (np.empty((3, 0)).strides is (8, 8) or (0, 0) by version).
        expected = tuple(itemsize * math.prod(shape[i + 1:]) for i in range(len(shape)))
        expect_equal(got, expected, call=call, hint=STRIDE_HINT)


@check(points=1, targets="is_c_contiguous")
def test_is_c_contiguous_length_one_and_empty(sub):
    """is_c_contiguous ignores length-1 axes and calls arrays with a zero-length axis contiguous"""
    cases = [
        ((), (), 8), ((3, 1, 4), (32, 999, 8), 8), ((1, 4), (-5, 8), 8), ((4, 1), (8, 0), 8),
        ((1,), (-8,), 8), ((2, 0, 3), (1, 2, 3), 8), ((0,), (-16,), 4), ((3, 4), (32, -8), 8),
        ((3, 4), (-32, 8), 8), ((2, 3), (12, 4), 4), ((2, 3), (12, 4), 8), ((1, 1), (0, 0), 2),
        ((6,), (16,), 8), ((6,), (8,), 8),
    ]
    for shape, strides, itemsize in cases:
        call = f"is_c_contiguous({shape}, {strides}, {itemsize})"
        got = as_bool(sub.call("is_c_contiguous", shape, strides, itemsize), call=call)
        expect_equal(got, numpy_c_contiguous(shape, strides, itemsize), call=call,
                     hint=CONTIGUOUS_HINT)


@check(points=2, targets="transpose_view")
def test_transpose_view_any_layout(sub):
    """transpose_view works without copying on every layout and dtype"""
    rng = np.random.default_rng(201)
    four = sub.shared(rng.standard_normal((2, 3, 4, 5)))  # swapaxes(a, 0, -1) is not enough
    more = [("4-d (2, 3, 4, 5)", four), ("4-d sliced [:, ::2, :, 1:]", four[:, ::2, :, 1:])]
    for dtype in (np.float64, np.int8, np.float32, np.complex128, np.bool_):
        for label, a in strided_views(rng, dtype, place=sub.shared) + (
                more if dtype == np.float64 else []):
            call = f"transpose_view(a)  # a = {label}, dtype {np.dtype(dtype).name}"
            before = a.copy()
            got = sub.call("transpose_view", a)
            expect_array(got, before.T, call=call, rtol=0, hint=VIEW_HINT)
            if a.size:
                expect_view(got, a, call=call, what="a view of a", hint=VIEW_HINT)
                expect_equal(tuple(got.strides), a.strides[::-1], call=call,
                             what="returned an array with strides", hint=VIEW_HINT)


@check(points=1, targets="broadcast_shape")
def test_broadcast_shape_edge_cases(sub, evidence):
    """broadcast_shape handles no shapes, 0-d shapes, zero-length axes and many shapes"""
    cases = [(), ((),), ((), (3,)), ((4, 2),), ((0, 3), (1, 3)), ((0,), (1,)), ((1, 0), (5, 1)),
             ((2, 1, 1), (1, 3, 1), (1, 1, 4), (4,), ()), ((1, 1), (1,)), ((6, 1, 2), (7, 1))]
    for shapes in cases:
        call = f"broadcast_shape{shapes}" if len(shapes) != 1 else f"broadcast_shape({shapes[0]})"
        record_shapes(evidence, shapes, np.broadcast_shapes(*shapes))
        got = as_int_tuple(sub.call("broadcast_shape", *shapes), call=call)
        evidence["got_shape"] = list(got)
        expect_equal(got, np.broadcast_shapes(*shapes), call=call, hint=BROADCAST_HINT)


@check(points=1, targets="broadcast_shape")
def test_broadcast_shape_incompatible(sub, evidence):
    """broadcast_shape raises ValueError for shapes that do not broadcast"""
    for shapes in [((2,), (3,)), ((3, 4), (4, 3)), ((0,), (5,)), ((2, 1), (1, 3), (4, 3)),
                   ((5, 2), (2, 1, 5))]:
        record_shapes(evidence, shapes, None)
        sub.raises(ValueError, "broadcast_shape", *shapes, hint=BROADCAST_HINT)
    # Only those: a function that always raises broadcasts nothing.
    for shapes in [((3, 1), (1, 4)), ((2, 1, 5), (2, 4, 1))]:
        call = f"broadcast_shape{shapes}"
        record_shapes(evidence, shapes, np.broadcast_shapes(*shapes))
        got = as_int_tuple(sub.call("broadcast_shape", *shapes), call=call)
        expect_equal(got, np.broadcast_shapes(*shapes), call=call, hint=BROADCAST_HINT)


@check(points=1, targets="broadcast_strides")
def test_broadcast_strides_any_layout(sub, evidence):
    """broadcast_strides keeps each array's own strides, 0 where it is broadcast"""
    rng = np.random.default_rng(202)
    cases = []
    for _, arr in strided_views(rng):
        target = (2,) + tuple(n if n != 1 else 3 for n in arr.shape)
        cases.append((arr, target))
        cases.append((arr, arr.shape))
    base = np.zeros((3, 1, 4))
    cases += [(base, (3, 1, 4)), (base[:, :, ::-1], (2, 3, 5, 4)), (np.zeros((1, 0)), (3, 0))]
    for arr, target in cases:
        args = (arr.shape, arr.strides, target)
        call = f"broadcast_strides{args}"
        record_shapes(evidence, [arr.shape, target], target, labels=["shape", "target"],
                      expected_strides=np.broadcast_to(arr, target).strides)
        got = as_int_tuple(sub.call("broadcast_strides", *args), call=call)
        evidence["got_strides"] = list(got)
        expect_equal(got, np.broadcast_to(arr, target).strides, call=call,
                     hint="a broadcast axis (added, stretched, or of length 1) has stride 0; "
                          "every other axis keeps the array's own stride.")


@check(points=1, targets="broadcast_strides")
def test_broadcast_strides_incompatible(sub, evidence):
    """broadcast_strides raises ValueError when the shape does not broadcast to the target"""
    # An array never loses axes by broadcasting, not even axes of length 1.
    for args in [((3,), (8,), (4,)), ((2, 3), (24, 8), (3,)), ((2, 1), (8, 8), (3, 1)),
                 ((4,), (8,), (4, 2)), ((0,), (8,), (5,)), ((1, 3), (24, 8), (3,)),
                 ((1,), (8,), ())]:
        record_shapes(evidence, [args[0], args[2]], None, labels=["shape", "target"])
        sub.raises(ValueError, "broadcast_strides", *args, hint=BROADCAST_HINT)
    # Only those: a function that always raises broadcasts nothing.
    for shape, target in [((3, 1), (3, 4)), ((2, 1, 5), (2, 4, 5))]:
        arr = np.zeros(shape)
        args = (arr.shape, arr.strides, target)
        call = f"broadcast_strides{args}"
        expected = np.broadcast_to(arr, target).strides
        record_shapes(evidence, [shape, target], target, labels=["shape", "target"],
                      expected_strides=expected)
        got = as_int_tuple(sub.call("broadcast_strides", *args), call=call)
        expect_equal(got, expected, call=call, hint=BROADCAST_HINT)


@check(points=1, targets="sliding_windows")
def test_sliding_windows_steps_and_layouts(sub):
    """sliding_windows works with a default step, remainders and strided x, and stays a view"""
    rng = np.random.default_rng(203)
    base = sub.shared(rng.standard_normal(31))
    ints = sub.shared(np.arange(17, dtype=np.int32))
    cases = [(base, 4, None, "x"), (base, 5, 3, "x"), (base[::2], 3, 2, "x[::2]"),
             (base[::-1], 6, 4, "x[::-1]"), (ints, 17, 5, "x (int32)"), (ints, 1, 1, "x (int32)"),
             (base[3:9], 6, 1, "x[3:9]")]
    for x, window, step, label in cases:
        before = x.copy()
        if step is None:
            got = sub.call("sliding_windows", x, window)
            step = 1
        else:  # by keyword, as the contract names it
            got = sub.call("sliding_windows", x, window, step=step)
        call = f"sliding_windows(x, {window}, step={step})  # x = {label}, len {len(x)}"
        rows = (len(x) - window) // step + 1
        expected = np.stack([before[i * step:i * step + window] for i in range(rows)])
        expect_array(got, expected, call=call, rtol=0, hint=WINDOW_HINT)
        expect_view(got, x, call=call, what="a view of x", hint=WINDOW_HINT)


@check(points=1, targets="sliding_windows")
def test_sliding_windows_invalid(sub):
    """sliding_windows raises ValueError for a bad window or step"""
    x = np.arange(6.0)
    for window, step in [(0, 1), (7, 1), (3, 0), (-1, 1), (2, -2)]:
        sub.raises(ValueError, "sliding_windows", x, window, step,
                   hint="the contract asks for ValueError if window < 1, step < 1 or "
                        "window > len(x).")
    # Only then: a function that always raises makes no windows.
    shared = sub.shared(x, name="x")
    for window, step in [(6, 1), (1, 6), (2, 3)]:
        call = f"sliding_windows(x, {window}, {step})  # x = np.arange(6.0)"
        got = sub.call("sliding_windows", shared, window, step)
        expected = np.stack([x[i:i + window] for i in range(0, 6 - window + 1, step)])
        expect_array(got, expected, call=call, rtol=0, hint=WINDOW_HINT)


@check(points=1, targets="center_columns")
def test_center_columns_shapes_and_layouts(sub):
    """center_columns works for one row, one column, strided, float32 and integer input"""
    rng = np.random.default_rng(204)
    wide = sub.shared(rng.standard_normal((5, 8)) + 1e3)
    cases = [(sub.shared(rng.standard_normal((1, 4))), "one row"),
             (sub.shared(rng.standard_normal((9, 1))), "one column"),
             (sub.shared(rng.standard_normal((8, 5)) - 7).T, "Fortran order"),
             (wide[:, ::3], "every third column"), (wide[::-1], "rows reversed"),
             (sub.shared(rng.standard_normal((6, 3)).astype(np.float32)), "float32"),
             (sub.shared(rng.integers(-50, 50, (7, 3))), "int64: the means are not integers")]
    for x, label in cases:
        original = x.copy()
        call = f"center_columns(x)  # x {label}, shape {x.shape}, strides {x.strides}"
        got = sub.call("center_columns", x)
        expected = original - original.mean(axis=0)
        tol = 1e-5 if x.dtype == np.float32 else 1e-9
        expect_array(got, expected, call=call, rtol=tol, atol=tol * np.abs(original).max(),
                     check_dtype=False, hint=CENTER_HINT)


@check(points=1, targets="pairwise_sq_dists")
def test_pairwise_sq_dists_never_negative(sub):
    """pairwise_sq_dists is never negative, even for identical or far-away points, and keeps a, b"""
    rng = np.random.default_rng(205)
    a = rng.standard_normal((40, 16)) * 1e-3 + 1e4
    # b's other rows 1 further in each coordinate: distances of ~16, which the tolerance
    # below (~3e-4) cannot swallow (all zeros passed when every point was within ~1e-2).
    b = np.concatenate([a[:10], rng.standard_normal((10, 16)) * 1e-3 + 1e4 + 1.0])
    call = "pairwise_sq_dists(a, b)  # points near 1e4, b repeats 10 rows of a"
    # sub.call fails the check if the call wrote into a or b: the caller still needs its points.
    got = sub.call("pairwise_sq_dists", sub.shared(a, name="a"), sub.shared(b, name="b"))
    expected = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    # The |a|^2 + |b|^2 - 2ab expansion loses ~1e-16 * |a|^2 ~ 2e-8 to cancellation.
    scale = (a * a).sum(1).max() + (b * b).sum(1).max()
    expect_array(got, expected, call=call, rtol=0, atol=1e-13 * scale, check_dtype=False,
                 hint=PAIRWISE_HINT)
    if (got < 0).any():
        i = tuple(int(k) for k in np.argwhere(got < 0)[0])
        fail(f"{call} returned negative squared distances, e.g. {got[i]:.3g} at {list(i)}.",
             call=call, expected=">= 0", got=f"{got[i]:.3g}", hint=PAIRWISE_HINT)


@check(points=1, targets="pairwise_sq_dists", timeout=5.0)
def test_pairwise_sq_dists_is_vectorised(sub):
    """pairwise_sq_dists handles 1000 x 1000 points in 32-d with no Python loop over rows"""
    rng = np.random.default_rng(206)
    a, b = rng.standard_normal((1000, 32)), rng.standard_normal((1000, 32))
    call = "pairwise_sq_dists(a, b)  # a and b of shape (1000, 32)"
    # Time alone cannot tell a loop from a broadcast: a double loop (2.3 s here) is barely
    # slower than the (1000, 1000, 32) broadcast (0.6 s). Counting the Python lines the call
    # runs can: a loop over 1000 rows runs >= 1000, vectorised code a few dozen (numpy's own
    # Python, e.g. einsum(optimize=True), up to ~360), a loop over the 32 dimensions (allowed)
    # about 100.
    # A loop over the rows costs ~3,000 steps, a double loop over rows and columns ~10**6:
    # traced, that one would run into the call's deadline; stopped at STEP_LIMIT it fails here,
    # in a tenth of a second, with the reason.
    probe = sub.probe("tracing:count_steps", "pairwise_sq_dists", a, b, label=call,
                      step_limit=STEP_LIMIT)
    got, steps = probe["value"], probe["steps"]
    if probe["tampered"] or probe["threads"] or probe.get("processes"):
        what = "; ".join(probe["tampered"]) or (
            f"ran {probe['threads']} thread(s) of its own" if probe["threads"] else
            f"ran code in {probe['processes']} other process(es)")
        fail(f"{call} {what}: the grader counts the Python lines the call runs on its own thread "
             "to see that there is no loop over rows, and cannot count them there.", call=call,
             expected="a vectorised computation on the calling thread", got=what,
             hint=PAIRWISE_HINT)
    if steps > 800:
        ran = f"more than {STEP_LIMIT}" if probe.get("stopped") else str(steps)
        fail(f"{call} ran {ran} lines of Python: that is a loop over the rows. The contract "
             "asks for no Python loop over rows.", call=call, expected="a vectorised computation",
             got=f"{ran} Python lines", hint=PAIRWISE_HINT)
    rows = rng.choice(1000, size=50, replace=False)
    expected = ((a[rows, None, :] - b[None, :, :]) ** 2).sum(-1)
    if not isinstance(got, np.ndarray) or got.shape != (1000, 1000):
        expect_array(got, np.zeros((1000, 1000)), call=call, check_dtype=False)
    expect_array(got[rows], expected, call=call + f", rows {sorted(rows.tolist())[:5]}...",
                 rtol=1e-9, atol=1e-9, check_dtype=False, hint=PAIRWISE_HINT)
    expect_no_loop_run_by_c_code(sub)


@check(points=1, targets="to_tensor")
def test_to_tensor_dtypes_and_shapes(sub):
    """to_tensor keeps dtype and shape for many dtypes, 0-d, empty and strided arrays"""
    rng = np.random.default_rng(207)
    base = (rng.standard_normal((3, 4, 5)) * 10)
    arrays = [(base.astype(np.uint8), "uint8"), (base.astype(np.int32), "int32"),
              (base > 0, "bool"), (base.astype(np.float16), "float16"),
              (base.astype(np.complex64), "complex64"), (np.asarray(2.5), "0-d float64"),
              (np.zeros((0, 3)), "empty (0, 3)")]
    for arr, label in arrays:
        for share in (True, False):
            shared = sub.shared(arr)
            cases = [(shared, label)]
            if shared.ndim == 3:
                cases.append((shared[:, ::2, 1:], label + ", sliced [:, ::2, 1:]"))
            for x, text in cases:
                call = f"to_tensor(arr, share={share})  # arr {text}, shape {x.shape}"
                before = x.copy()
                got = sub.call("to_tensor", x, share=share)
                expect_array(got, torch.from_numpy(before), call=call, rtol=0, hint=TENSOR_HINT)
                if x.size and share:
                    expect_view(got, x, call=call, what="a tensor sharing arr's memory",
                                hint=TENSOR_HINT)
                elif x.size:
                    expect_no_view(got, x, call=call, hint=TENSOR_HINT)
