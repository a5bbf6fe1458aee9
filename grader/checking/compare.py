"""Verdicts on values: every comparison a check makes goes through here.

On failure each helper raises `CheckFailure` with a message a student can act on: the call, what
came back and what was expected (abridged), where the values differ and by how much, and one line
on the concept. A check's source code never appears in a message.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import numpy as np
import torch

MAX_INLINE = 16  # arrays with at most this many elements are printed in full


class CheckFailure(AssertionError):
    """The submission's behaviour is wrong. `str()` is the message shown to the student."""

    def __init__(self, message: str, *, call: str | None = None, expected: str | None = None,
                 got: str | None = None, hint: str | None = None,
                 evidence: dict[str, Any] | None = None, fault: str | None = None):
        text = message if not hint else f"{message}\nHint: {hint}"
        super().__init__(text)
        self.call, self.expected, self.got, self.hint = call, expected, got, hint
        # A catalogued fault (the course's faults.toml) this failure is known to mean: the
        # report shows its symptom, cause and fix, as far as the check's `reveal` allows.
        self.fault = fault
        # Plain facts the check measured (JSON-able): what diagnoses and report plots read.
        self.evidence = dict(evidence or {})


def fail(message: str, *, call: str | None = None, expected: str | None = None,
         got: str | None = None, hint: str | None = None,
         evidence: dict[str, Any] | None = None, fault: str | None = None) -> NoReturn:
    """Fail the check: `message` (then "Hint: `hint`") is what the student reads; `call`,
    `expected` and `got` are short texts a report shows beside it; `evidence` see
    `CheckFailure`; `fault` the id of a catalogued fault (the course's faults.toml) this
    failure means, shown with its symptom, cause and fix as far as the check reveals."""
    raise CheckFailure(message, call=call, expected=expected, got=got, hint=hint,
                       evidence=evidence, fault=fault)


# --------------------------------------------------------------------------- formatting


def short(value: Any, limit: int = 200) -> str:
    """A one-line description of a value, at most about `limit` characters."""
    if isinstance(value, torch.Tensor):
        return _short_array("tensor", value.detach().cpu().numpy() if value.dtype != torch.bfloat16
                            else value.detach().float().numpy(),
                            str(value.dtype).removeprefix("torch."), limit)
    if isinstance(value, np.ndarray):
        return _short_array("array", value, value.dtype.name, limit)
    if isinstance(value, np.generic):
        return f"np.{value.dtype.name}({value.item()!r})"
    if isinstance(value, (list, tuple)) and len(value) > 12:
        inner = ", ".join(short(v, 40) for v in value[:12])
        text = f"[{inner}, ... ({len(value)} items)]"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + " ...)"


def _short_array(kind: str, a: np.ndarray, dtype: str, limit: int) -> str:
    if a.size <= MAX_INLINE:
        body = np.array2string(a, separator=", ", threshold=MAX_INLINE,
                               max_line_width=10_000).replace("\n", "")
        text = f"{kind}({body}, dtype={dtype})"
        if len(text) <= limit:
            return text
    return f"<{dtype} {kind} of shape {tuple(a.shape)}>"


def format_call(name: str, args: tuple = (), kwargs: dict | None = None) -> str:
    parts = [short(a, 80) for a in args]
    parts += [f"{k}={short(v, 80)}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


# --------------------------------------------------------------------------- expectations


def expect_type(got: Any, types: type | tuple[type, ...], *, call: str, what: str,
                hint: str | None = None) -> None:
    """`got` is an instance of `types` (exactly the kinds of value the contract names)."""
    if not isinstance(got, types):
        fail(f"{call} returned {short(got)} (a {_type_name(got)}); expected {what}.",
             call=call, expected=what, got=short(got), hint=hint)


def _type_name(x: Any) -> str:
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def as_int_tuple(got: Any, *, call: str, what: str = "a tuple of ints") -> tuple[int, ...]:
    """Normalise a list/tuple of integers (Python or numpy; integral floats accepted as the
    numbers they are) to a tuple of ints, or fail saying what came back."""
    if not isinstance(got, (tuple, list, torch.Size)):
        fail(f"{call} returned {short(got)} (a {_type_name(got)}); expected {what}.",
             call=call, expected=what, got=short(got))
    out = []
    for i, v in enumerate(got):
        if isinstance(v, (bool, np.bool_)):
            ok = False
        elif isinstance(v, (int, np.integer)):
            ok = True
        elif isinstance(v, (float, np.floating)):
            ok = math.isfinite(v) and float(v).is_integer()
        else:
            ok = False
        if not ok:
            fail(f"{call} returned {short(got)}; element {i} is {short(v)}, not an integer.",
                 call=call, expected=what, got=short(got))
        out.append(int(v))
    return tuple(out)


def as_bool(got: Any, *, call: str) -> bool:
    """A Python or numpy bool as a bool, or fail saying what came back."""
    if isinstance(got, (bool, np.bool_)):
        return bool(got)
    fail(f"{call} returned {short(got)} (a {_type_name(got)}); expected True or False.",
         call=call, expected="a bool", got=short(got))


def expect_equal(got: Any, expected: Any, *, call: str, hint: str | None = None,
                 what: str = "returned") -> None:
    """Exact equality of plain values of the same type (ints, bools, tuples of them)."""
    if type(got) is type(expected) and not isinstance(got, (np.ndarray, torch.Tensor)) \
            and got == expected:
        return
    detail = ""
    if isinstance(got, tuple) and isinstance(expected, tuple):
        if len(got) != len(expected):
            detail = f"\n  length {len(got)}, expected {len(expected)}"
        else:
            i = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
            detail = (f"\n  first difference at index {i}: got {short(got[i])}, "
                      f"expected {short(expected[i])}")
    fail(f"{call} {what} {short(got)}; expected {short(expected)}.{detail}",
         call=call, expected=short(expected), got=short(got), hint=hint)


def expect_array(got: Any, expected: np.ndarray | torch.Tensor, *, call: str,
                 rtol: float = 1e-7, atol: float = 0.0, hint: str | None = None,
                 check_dtype: bool = True, kind: str | None = None) -> None:
    """`got` is an array (numpy, or a tensor when `expected` is one) of the expected shape and
    dtype whose values are close to `expected`: |got - expected| <= atol + rtol * |expected|,
    NaN where expected has NaN."""
    is_tensor = isinstance(expected, torch.Tensor)
    want_type = torch.Tensor if is_tensor else np.ndarray
    kind = kind or ("a torch.Tensor" if is_tensor else "a numpy array")
    expect_type(got, want_type, call=call, what=kind, hint=hint)
    # isinstance rather than is_tensor: the same test (expect_type passed), which mypy can follow.
    g = got.detach().cpu().numpy() if isinstance(got, torch.Tensor) else got
    e = (expected.detach().cpu().numpy() if isinstance(expected, torch.Tensor)
         else np.asarray(expected))
    g_dtype = str(got.dtype).removeprefix("torch.") if is_tensor else got.dtype.name
    e_dtype = str(expected.dtype).removeprefix("torch.") if is_tensor else e.dtype.name
    if tuple(g.shape) != tuple(e.shape):
        fail(f"{call} returned an array of shape {tuple(g.shape)}; "
             f"expected shape {tuple(e.shape)}.",
             call=call, expected=f"shape {tuple(e.shape)}", got=f"shape {tuple(g.shape)}",
             hint=hint)
    if check_dtype and g_dtype != e_dtype:
        fail(f"{call} returned dtype {g_dtype}; expected {e_dtype}.",
             call=call, expected=f"dtype {e_dtype}", got=f"dtype {g_dtype}", hint=hint)
    report = mismatch_report(g, e, rtol=rtol, atol=atol)
    if report:
        fail(f"{call} returned values that differ from the expected ones.\n{report}",
             call=call, expected=short(expected), got=short(got), hint=hint)


def mismatch_report(got: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float) -> str:
    """Empty when close; else where and by how much the arrays differ (same shapes)."""
    if expected.dtype == np.bool_ or got.dtype == np.bool_:
        bad = got.astype(bool) != expected.astype(bool)
        if not bad.any():
            return ""
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"  {int(bad.sum())} of {bad.size} elements differ; first at {list(idx)}: "
                f"got {got[idx]!r}, expected {expected[idx]!r}")
    g = got.astype(np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(expected)
                   else np.float64)
    e = expected.astype(g.dtype)
    both_nan = np.isnan(g) & np.isnan(e)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
        close = diff <= atol + rtol * np.abs(e)
        # An infinite expectation is met by that same infinity only: its tolerance
        # rtol * |inf| would otherwise let any value, or the other infinity, pass.
        close = np.where(np.isinf(e), g == e, close)
        bad = ~close & ~both_nan
    if not bad.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    lines = [f"  {int(bad.sum())} of {bad.size} elements differ (rtol={rtol:g}, atol={atol:g})"]
    finite = np.where(bad & np.isfinite(diff), diff, -1.0)
    if finite.max() >= 0:
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(finite)), finite.shape))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = finite[worst] / abs(e[worst]) if e[worst] != 0 else math.inf
        lines.append(f"  largest absolute error {finite[worst]:.3g} at {list(worst)} "
                     f"(got {_num(got[worst])}, expected {_num(expected[worst])}; "
                     f"relative error {rel:.3g})")
    lines.append(f"  first mismatch at {list(first)}: got {_num(got[first])}, "
                 f"expected {_num(expected[first])}")
    return "\n".join(lines)


def _num(x: Any) -> str:
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.6g}" if isinstance(x, float) else repr(x)


def expect_unchanged(before: np.ndarray, after: np.ndarray, *, name: str, call: str,
                     hint: str | None = None) -> None:
    """`after`, the caller's array read after the call, still holds `before`. (`sub.call`
    already fails a check whose call wrote into a shared array; this is for arrays a check
    shared with `may_change=True` and judges itself.)"""
    if not np.array_equal(before, after):
        fail(f"{call} modified {name}: after the call it differs from what was passed in.",
             call=call, expected=f"{name} unchanged", got=f"{name} modified", hint=hint)


def expect_view(got: Any, base: np.ndarray | torch.Tensor, *, call: str, what: str = "a view",
                hint: str | None = None) -> None:
    """`got` shares memory with `base`. Both live in memory the grader owns (see
    `StudentModule.shared`), so this is measured here, not reported by the worker."""
    g = got.detach().numpy() if isinstance(got, torch.Tensor) else got
    b = base.detach().numpy() if isinstance(base, torch.Tensor) else base
    if not np.shares_memory(g, b):
        fail(f"{call} returned a copy: the result shares no memory with its input, but the "
             f"contract asks for {what}.", call=call, expected=what, got="a copy", hint=hint)


def expect_no_view(got: Any, base: np.ndarray | torch.Tensor, *, call: str,
                   what: str = "an independent copy", hint: str | None = None) -> None:
    g = got.detach().numpy() if isinstance(got, torch.Tensor) else got
    b = base.detach().numpy() if isinstance(base, torch.Tensor) else base
    if np.shares_memory(g, b):
        fail(f"{call} returned an object that shares memory with its input, but the contract "
             f"asks for {what}: a write to one would change the other.", call=call,
             expected=what, got="shared memory", hint=hint,
             evidence={"shares_memory_with_input": True})


# --------------------------------------------------------------------------- evidence for reports


def error_evidence(name: str, got: Any, expected: Any, *, rtol: float, atol: float
                   ) -> dict[str, Any] | None:
    """How far `got` is from `expected` under the tolerance `expect_array` applies, as plain
    evidence (the report draws one bar per entry): `error` = |got - expected| and `allowed` =
    atol + rtol * |expected| at the element where their ratio is worst (so error <= allowed
    passes), plus `ratio` when `got` is a constant multiple of `expected`. None when the two
    are not numeric arrays of one shape (the check says so in its own words). Never raises."""
    try:
        g = got.detach().cpu().double().numpy() if isinstance(got, torch.Tensor) else got
        e = expected.detach().cpu().double().numpy() if isinstance(expected, torch.Tensor) \
            else np.asarray(expected)
        if not isinstance(g, np.ndarray) or g.shape != e.shape or g.dtype.kind not in "fiu" \
                or e.dtype.kind not in "fiu" or e.size == 0:
            return None
        g, e = g.astype(np.float64).ravel(), e.astype(np.float64).ravel()
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(g - e)
            allowed = atol + rtol * np.abs(e)
            units = np.where(np.isfinite(error), error / np.where(allowed > 0, allowed, np.inf),
                             np.inf)
        i = int(np.argmax(units))
        out: dict[str, Any] = {"name": name,
                               "error": float(error[i]) if np.isfinite(error[i]) else None,
                               "allowed": float(allowed[i])}
        if np.isfinite(g).all() and np.any(e != 0):
            k = float(g @ e / (e @ e))
            if k != 0 and abs(k - 1) > 1e-6 and np.abs(g - k * e).max() <= 1e-9 * np.abs(g).max():
                out["ratio"] = round(k, 6)
        return out
    except Exception:  # noqa: BLE001 - evidence must never change a verdict
        return None


# Gradient histograms for the report (`E.grad_histograms`): log10|g| in one-decade bins from
# 1e-12 to 1e4 (16 bins; smaller non-zero values count in the first, larger in the last), with
# exact zeros and non-finite entries counted apart. At most GRAD_HIST_LAYERS parameter tensors.
GRAD_HIST_LO, GRAD_HIST_HI, GRAD_HIST_LAYERS = -12, 4, 8


def grad_histogram(grad: Any) -> dict[str, Any] | None:
    """The distribution of log10|g| over the elements of one gradient, as plain evidence:
    `counts` (one per decade from GRAD_HIST_LO to GRAD_HIST_HI), `zero`, `nonfinite` and
    `median` (log10 of the median |g| over the finite elements, zeros included; None when all
    are zero or there are none). None when `grad` is no numeric array. Never raises."""
    try:
        g = grad.detach().cpu().double().numpy() if isinstance(grad, torch.Tensor) \
            else np.asarray(grad, dtype=np.float64)
        g = np.abs(g.ravel())
        finite = g[np.isfinite(g)]
        nonzero = finite[finite > 0]
        logs = np.clip(np.log10(nonzero), GRAD_HIST_LO, GRAD_HIST_HI - 1e-9)
        counts, _ = np.histogram(logs, bins=GRAD_HIST_HI - GRAD_HIST_LO,
                                 range=(GRAD_HIST_LO, GRAD_HIST_HI))
        median = float(np.median(finite)) if finite.size else 0.0
        return {"counts": [int(c) for c in counts], "zero": int(finite.size - nonzero.size),
                "nonfinite": int(g.size - finite.size),
                "median": round(math.log10(median), 3) if median > 0 else None}
    except Exception:  # noqa: BLE001 - evidence must never change a verdict
        return None


def grad_histogram_evidence(names: list[str], sizes: list[int], steps: dict[str, Any]
                            ) -> list[dict[str, Any]]:
    """Per parameter tensor (the first GRAD_HIST_LAYERS of `names`, whose flattened sizes are
    `sizes`), the `grad_histogram` of each flat gradient in `steps`: {"name", and for each key
    of `steps` (e.g. "yours_first", "reference_last") a histogram or None}. A flat gradient
    (all parameters concatenated in `names` order, as an optimizer-step audit records it) of
    another length than `sum(sizes)` gives None for every layer. Never raises."""
    try:
        total = sum(int(n) for n in sizes)
        flats = {}
        for key, flat in steps.items():
            if isinstance(flat, torch.Tensor):
                flat = flat.detach().reshape(-1)
            elif flat is not None:
                flat = np.asarray(flat, dtype=np.float64).reshape(-1)
            flats[key] = flat if flat is not None and len(flat) == total else None
        out, start = [], 0
        for name, size in list(zip(names, sizes))[:GRAD_HIST_LAYERS]:
            size = int(size)
            row: dict[str, Any] = {"name": str(name)[:60]}
            for key, flat in flats.items():
                row[key] = None if flat is None else grad_histogram(flat[start:start + size])
            out.append(row)
            start += size
        return out
    except Exception:  # noqa: BLE001 - evidence must never change a verdict
        return []
