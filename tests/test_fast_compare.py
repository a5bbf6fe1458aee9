"""Verdicts on values (grader/checking/compare.py) without a worker: what passes, what fails, and
what the failure tells the student. The fast tier."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grader.checking.compare import (
    CheckFailure,
    as_bool,
    as_int_tuple,
    error_evidence,
    expect_array,
    expect_equal,
    expect_no_view,
    expect_type,
    expect_unchanged,
    expect_view,
    format_call,
    mismatch_report,
    short,
)

pytestmark = pytest.mark.fast

CALL = "f(x)"


def failure(fn, *args, **kwargs) -> CheckFailure:
    with pytest.raises(CheckFailure) as info:
        fn(*args, **kwargs)
    return info.value


# --------------------------------------------------------------------------- expect_equal


@pytest.mark.parametrize("value", [3, True, (1, 2, 3), (), "a", None])
def test_equal_plain_values_pass(value):
    expect_equal(value, value, call=CALL)


def test_equal_needs_the_same_type():
    """1 == True and 1 == 1.0 in Python, but a contract that says int means int."""
    assert "expected True" in str(failure(expect_equal, 1, True, call=CALL))
    failure(expect_equal, 1.0, 1, call=CALL)
    failure(expect_equal, [1, 2], (1, 2), call=CALL)
    failure(expect_equal, np.int64(3), 3, call=CALL)


def test_equal_says_where_tuples_differ():
    err = failure(expect_equal, (8, 4, 2), (8, 4, 1), call="strides(a)", hint="bytes per step")
    text = str(err)
    assert text.startswith("strides(a) returned (8, 4, 2); expected (8, 4, 1).")
    assert "first difference at index 2: got 2, expected 1" in text
    assert text.endswith("Hint: bytes per step")
    assert (err.call, err.got, err.expected, err.hint) == ("strides(a)", "(8, 4, 2)",
                                                           "(8, 4, 1)", "bytes per step")
    assert "length 2, expected 3" in str(failure(expect_equal, (8, 4), (8, 4, 1), call=CALL))


def test_equal_refuses_arrays_even_when_equal():
    """Arrays are judged by expect_array (shape, dtype, tolerance), never by ==."""
    a = np.arange(3)
    failure(expect_equal, a, a, call=CALL)
    failure(expect_equal, torch.ones(2), torch.ones(2), call=CALL)


# --------------------------------------------------------------------------- expect_array


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_close_arrays_pass_within_tolerance(kind):
    e = np.array([[1.0, 2.0], [3.0, np.nan]])
    g = e * (1 + 1e-9)
    if kind == "torch":
        e, g = torch.from_numpy(e), torch.from_numpy(g)
    expect_array(g, e, call=CALL, rtol=1e-7)  # NaN where NaN is expected: equal


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_wrong_values_say_how_many_where_and_how_far(kind):
    e = np.zeros((2, 3))
    g = e.copy()
    g[0, 1], g[1, 2] = 0.5, -3.0
    if kind == "torch":
        e, g = torch.from_numpy(e), torch.from_numpy(g)
    text = str(failure(expect_array, g, e, call=CALL, atol=1e-6))
    assert "returned values that differ" in text
    assert "2 of 6 elements differ" in text
    assert "largest absolute error 3 at [1, 2]" in text
    assert "first mismatch at [0, 1]: got 0.5, expected 0" in text


def test_array_kind_shape_and_dtype_are_part_of_the_contract():
    e = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert "expected a numpy array" in str(failure(expect_array, e.tolist(), e, call=CALL))
    assert "expected a torch.Tensor" in str(
        failure(expect_array, e, torch.from_numpy(e), call=CALL))
    assert "shape (3, 2); expected shape (2, 3)" in str(
        failure(expect_array, e.T.copy(), e, call=CALL))
    assert "dtype float32; expected float64" in str(
        failure(expect_array, e.astype(np.float32), e, call=CALL))
    expect_array(e.astype(np.float32), e, call=CALL, check_dtype=False, rtol=1e-6)
    t = torch.arange(6.0).reshape(2, 3)
    assert "dtype float64; expected float32" in str(
        failure(expect_array, t.double(), t, call=CALL))


def test_nan_and_infinity_must_match_exactly():
    e = np.array([1.0, np.inf, -np.inf])
    expect_array(e.copy(), e, call=CALL)
    # any tolerance times |inf| is inf: the wrong infinity, or a finite number, must still fail
    failure(expect_array, np.array([1.0, np.inf, np.inf]), e, call=CALL)
    failure(expect_array, np.array([1.0, 0.0, -np.inf]), e, call=CALL, rtol=1e-3)
    assert "got 0, expected inf" in mismatch_report(np.array([0.0]), np.array([np.inf]),
                                                     rtol=0.5, atol=1.0)
    failure(expect_array, np.array([np.nan, np.inf, -np.inf]), e, call=CALL, atol=1e9)
    failure(expect_array, np.array([1.0, np.nan]), np.array([1.0, 2.0]), call=CALL, atol=1e9)


def test_mismatch_report_of_booleans_and_complex_numbers():
    assert mismatch_report(np.array([True, False]), np.array([True, False]), rtol=0, atol=0) == ""
    text = mismatch_report(np.array([True, True, False]), np.array([True, False, True]),
                           rtol=0, atol=0)
    assert "2 of 3 elements differ; first at [1]" in text
    assert mismatch_report(np.array([1 + 1j]), np.array([1 + 1j]), rtol=0, atol=0) == ""
    assert "1 of 1 elements differ" in mismatch_report(np.array([1 + 2j]), np.array([1 + 1j]),
                                                       rtol=1e-3, atol=0)


def test_mismatch_report_applies_atol_plus_rtol_times_expected():
    e = np.array([100.0])
    assert mismatch_report(np.array([100.9]), e, rtol=0.01, atol=0.0) == ""  # 0.9 <= 1.0
    assert mismatch_report(np.array([101.1]), e, rtol=0.01, atol=0.0) != ""  # 1.1 > 1.0
    assert mismatch_report(np.array([101.1]), e, rtol=0.01, atol=0.2) == ""  # 1.1 <= 1.2


# --------------------------------------------------------------------------- views and copies


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_view_passes_and_a_copy_fails(kind):
    base = np.arange(12.0).reshape(3, 4)
    if kind == "torch":
        base = torch.from_numpy(base)
    expect_view(base.T if kind == "numpy" else base.t(), base, call=CALL)
    expect_view(base[1:, ::2], base, call=CALL)
    err = failure(expect_view, base.T.copy() if kind == "numpy" else base.t().clone(), base,
                  call=CALL, what="a transposed view")
    assert "returned a copy" in str(err) and err.expected == "a transposed view"
    expect_no_view(base.copy() if kind == "numpy" else base.clone(), base, call=CALL)
    shared = failure(expect_no_view, base[0], base, call=CALL)
    assert shared.evidence == {"shares_memory_with_input": True}


def test_unchanged_input():
    before = np.arange(4.0)
    expect_unchanged(before, before.copy(), name="x", call=CALL)
    after = before.copy()
    after[2] = -1
    assert "f(x) modified x" in str(failure(expect_unchanged, before, after, name="x", call=CALL))


# --------------------------------------------------------------------------- normalising answers


def test_as_int_tuple_takes_integral_numbers_only():
    assert as_int_tuple([np.int64(2), 3, 4.0], call=CALL) == (2, 3, 4)
    assert as_int_tuple(torch.Size([2, 3]), call=CALL) == (2, 3)
    for bad in ([1, True], [1.5], [float("nan")], ["1"], 12, np.array([1, 2])):
        failure(as_int_tuple, bad, call=CALL)


def test_as_bool_and_expect_type():
    assert as_bool(np.bool_(True), call=CALL) is True and as_bool(False, call=CALL) is False
    failure(as_bool, 1, call=CALL)
    expect_type(np.zeros(1), np.ndarray, call=CALL, what="an array")
    assert "(a list); expected an array" in str(
        failure(expect_type, [0.0], np.ndarray, call=CALL, what="an array"))


# --------------------------------------------------------------------------- what is shown


def test_short_abridges_big_values_and_keeps_small_ones_whole():
    assert short(np.array([1, 2])) == "array([1, 2], dtype=int64)"
    assert short(torch.tensor([0.5])) == "tensor([0.5], dtype=float32)"
    assert short(np.zeros((100, 100))) == "<float64 array of shape (100, 100)>"
    assert short(torch.zeros(3, dtype=torch.bfloat16)).startswith("tensor([0., 0., 0.]")
    assert short(list(range(50))).endswith("... (50 items)]")
    assert len(short("x" * 10_000)) <= 200
    assert format_call("f", (np.zeros(2),), {"axis": 1}) == \
        "f(array([0., 0.], dtype=float64), axis=1)"


def test_error_evidence_measures_the_worst_element_and_a_constant_factor():
    e = torch.tensor([1.0, -2.0, 4.0])
    ev = error_evidence("grad W", e * 2, e, rtol=1e-5, atol=1e-8)
    assert ev["name"] == "grad W" and ev["ratio"] == 2.0
    assert ev["error"] == pytest.approx(4.0) and ev["allowed"] == pytest.approx(1e-8 + 4e-5)
    close = error_evidence("b", np.array([1.0, 2.0]), np.array([1.0, 2.0]), rtol=1e-5, atol=0)
    assert close["error"] == 0.0 and "ratio" not in close
    assert error_evidence("x", np.zeros(2), np.zeros(3), rtol=0, atol=0) is None
    assert error_evidence("x", "junk", np.zeros(3), rtol=0, atol=0) is None
    assert error_evidence("x", np.array([np.nan, 1.0]), np.ones(2), rtol=0, atol=0)["error"] \
        is None
