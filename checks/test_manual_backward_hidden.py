"""Hidden checks for `manual_backward`: edge shapes, the types the contract names, extreme
inputs, side effects (inputs and `x.grad` left alone, `x` restored), the order of accuracy of
the finite difference, a vector-Jacobian product too large for a Jacobian, and random `Value`
graphs with shared nodes."""

import numpy as np
import torch

from manual_backward_cases import (linear_problem, mlp_case, random_program,
                                                 vector_output_shape)
from manual_backward_cases_hidden import VJP_DEADLINE, VJP_SIZE
from manual_backward_reference import scalar_gradient_reference, vjp_reference
from manual_backward_verify import (ATOL, GD_HINT, NUMGRAD_ATOL, NUMGRAD_HINT,
                                                  NUMGRAD_RTOL, RTOL, VJP_HINT, as_tuple,
                                                  check_cross_entropy, check_mlp, check_mse,
                                                  check_value_program, compare_trajectory,
                                                  expect_python_float, expect_values,
                                                  numerical_gradient_call, softplus_call, vjp_call)
from grader import StudentError, check, expect_type, fail, short
from probes.manual_backward import SCALAR_FUNCTIONS
from grader.checking.student import StudentRaised

# --------------------------------------------------------------------------- mse_linear_grads


@check(points=1, targets="mse_linear_grads", autograd=False)
def test_mse_linear_grads_shapes_and_types(sub, evidence):
    """mse_linear_grads handles one sample or one feature and returns (array (D,), float)"""
    rng = np.random.default_rng(401)
    for n, d in [(1, 1), (1, 4), (50, 1), (3, 6)]:
        X, y = linear_problem(rng, n, d, scale=2.0)
        w, b = rng.standard_normal(d), float(rng.standard_normal())
        where = f"  # X {X.shape}, y ({n},), w ({d},), b = {b:.4g}"
        got = sub.call("mse_linear_grads", X, y, w, b)
        check_mse(got, X, y, w, b, where=where, evidence=evidence)
        expect_python_float(got[1], call="mse_linear_grads(X, y, w, b)[1]" + where,
                            what="dL/db")


# --------------------------------------------------------------------------- fit_linear_gd


@check(points=2, targets="fit_linear_gd", autograd=False)
def test_fit_linear_gd_long_run(sub):
    """fit_linear_gd matches the reference over hundreds of steps, one step, and other scales"""
    rng = np.random.default_rng(402)
    X, y = linear_problem(rng, 60, 5)
    X = X + rng.standard_normal(5)  # off-centre features: w and b have to move together
    cases = [(X, y, 0.1, 300), (X, y, 0.05, 1)]
    X2, y2 = linear_problem(rng, 12, 1, scale=3.0)
    cases.append((X2, y2 * 10, 0.02, 40))
    for Xc, yc, lr, steps in cases:
        compare_trajectory(sub.call("fit_linear_gd", Xc, yc, lr, steps), Xc, yc, lr, steps)


@check(points=1, targets="fit_linear_gd", autograd=False)
def test_fit_linear_gd_types(sub):
    """fit_linear_gd(X, y, lr=..., steps=...) returns (w: array (D,), b: float, losses: list)"""
    rng = np.random.default_rng(403)
    X, y = linear_problem(rng, 20, 3)
    call = "fit_linear_gd(X, y, lr=0.1, steps=5)  # X of shape (20, 3)"
    w, b, losses = as_tuple(sub.call("fit_linear_gd", X, y, lr=0.1, steps=5), 3, call=call,
                            what="a triple (w, b, losses)")
    expect_type(w, np.ndarray, call=call + ", w", what="a numpy array of shape (3,)",
                hint=GD_HINT)
    if w.shape != (3,):
        fail(f"{call}: w has shape {w.shape}; expected (3,), one weight per feature.",
             call=call, expected="shape (3,)", got=f"shape {w.shape}",
             hint="w = np.zeros(D) keeps w one-dimensional; np.zeros((D, 1)) makes X @ w a "
                  "column that broadcasts against y into an (N, N) matrix.")
    expect_python_float(b, call=call, what="b")
    if type(losses) is not list:
        fail(f"{call} returned losses as {short(losses)} (a {type(losses).__name__}); the "
             "contract asks for a list of Python floats.", call=call, expected="a list",
             got=type(losses).__name__, hint="losses = [] and losses.append(float(loss)).")
    for k, loss in enumerate(losses):
        expect_python_float(loss, call=call, what=f"losses[{k}]",
                            hint="append float(loss): a Python float, not an array or tensor.")
    # The types of a fit, not of any triple: w moved from its start and the loss changed as
    # it did (whether rightly is the trajectory checks' to say).
    if not np.any(w != 0) or len(set(losses)) < 2:
        fail(f"{call} returned w = {short(w)} and losses {short(losses)}: nothing was fitted "
             "(w did not move, or every loss is the same).", call=call,
             expected="a w that moved and losses that change", got=short(losses), hint=GD_HINT)


# --------------------------------------------------------------------------- softmax_cross_entropy


@check(points=2, targets="softmax_cross_entropy", autograd=False)
def test_softmax_cross_entropy_large_logits(sub, evidence):
    """softmax_cross_entropy is finite and correct for logits as large as +-1e4"""
    rng = np.random.default_rng(404)
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 5e3], [1e4, 1e4, -1e4],
                       [-1e4, -1e4, -1e4 + 3], [2e3, -3e3, 7e3]])
    labels = np.array([1, 2, 0, 2, 0])  # mostly not the largest logit: a loss in the thousands
    where = "  # logits up to +-1e4, labels mostly not at the largest logit"
    check_cross_entropy(sub, logits, labels, where, evidence)
    wide = rng.uniform(-1e4, 1e4, (8, 6))
    labels = rng.integers(0, 6, 8)
    check_cross_entropy(sub, wide, labels, "  # logits uniform in [-1e4, 1e4], shape (8, 6)",
                        evidence)


@check(points=1, targets="softmax_cross_entropy", autograd=False)
def test_softmax_cross_entropy_shapes_and_types(sub, evidence):
    """softmax_cross_entropy handles one sample, one or many classes, and returns (float, array)"""
    rng = np.random.default_rng(405)
    for n, c in [(1, 5), (4, 1), (7, 2), (3, 60)]:
        logits = rng.standard_normal((n, c)) * 2
        labels = rng.integers(0, c, n)
        where = f"  # logits of shape {logits.shape}, labels {short(labels, 60)}"
        check_cross_entropy(sub, logits, labels, where, evidence)
        got = sub.call("softmax_cross_entropy", logits, labels)
        expect_python_float(got[0], call="softmax_cross_entropy(logits, labels)[0]" + where,
                            what="the loss")


# --------------------------------------------------------------------------- mlp_loss_and_grads


@check(points=2, targets="mlp_loss_and_grads", autograd=False)
def test_mlp_loss_and_grads_shapes_and_dead_units(sub, evidence):
    """mlp_loss_and_grads is right for other shapes and with many inactive relu units"""
    rng = np.random.default_rng(406)
    for n, d, h, c, shift in [(1, 4, 5, 3, 0.0), (12, 3, 1, 2, 0.0), (10, 6, 16, 5, -0.6),
                              (20, 2, 8, 2, -1.0)]:
        X, labels, params = mlp_case(rng, n, d, h, c, b1_shift=shift)
        dead = float(np.mean(X @ params["W1"] + params["b1"] < 0))
        where = f"  # N={n}, D={d}, H={h}, C={c}, {dead:.0%} of the relu inputs negative"
        check_mlp(sub.call("mlp_loss_and_grads", X, labels, params), X, labels, params,
                  where=where, evidence=evidence)


@check(points=1, targets="mlp_loss_and_grads", autograd=False)
def test_mlp_loss_and_grads_leaves_inputs_alone(sub, evidence):
    """mlp_loss_and_grads leaves X and params (its arrays and entries) unchanged, and is right"""
    rng = np.random.default_rng(407)
    X, labels, params = mlp_case(rng, 9, 4, 6, 3, b1_shift=-0.3)
    # sub.probe fails the check if the call wrote into X or an array of params (hint: compute
    # new arrays, h = np.maximum(pre, 0) or W - lr * g, instead of h[h < 0] = 0 on a view or
    # W -= ...: this function only measures the gradient, it takes no step).
    shared = {k: sub.shared(v, name=f"params[{k!r}]") for k, v in params.items()}
    call = "mlp_loss_and_grads(X, labels, params)  # N=9, D=4, H=6, C=3"
    record = sub.probe("manual_backward:mlp_params_after_call", sub.shared(X, name="X"), labels,
                       shared, label=call)
    got = record["result"]
    changes = [f"{verb} {', '.join(map(repr, keys))}" for verb, keys in
               [("replaced", record["rebound"]), ("added", record["added"]),
                ("removed", record["removed"])] if keys]
    if changes:
        fail(f"{call} changed the caller's params dict: {'; '.join(changes)}. The caller "
             "must get back the dict it passed in, holding the same arrays.",
             call=call, expected="params unchanged", got="params " + "; ".join(changes),
             hint="build a new dict for the gradients (grads = {}); `grads = params` makes "
                  "both names one dict, so writing a gradient overwrites a weight.")
    # Leaving the inputs alone earns nothing on its own: the result must be right too.
    check_mlp(got, X, labels, params, where="  # N=9, D=4, H=6, C=3", evidence=evidence)


# --------------------------------------------------------------------------- numerical_gradient


@check(points=1, targets="numerical_gradient")
def test_numerical_gradient_restores_x(sub):
    """numerical_gradient leaves x with its original values (and is still right)"""
    rng = np.random.default_rng(408)
    for function, shape in [("coupled_tanh", (3, 4)), ("sin_times_square", (5,))]:
        original = rng.uniform(-2, 2, shape)
        # May change: x[i] += eps ... x[i] -= eps may leave rounding residue, judged below.
        x = sub.shared(original, name="x", may_change=True)
        label, got = numerical_gradient_call(sub, function, x)
        # Perturbing in place with x[i] += eps ... x[i] -= eps may leave a rounding residue of a
        # few ulp (|x| <= 2: below 1e-15); a value not put back is off by eps = 1e-6.
        if not np.allclose(x, original, rtol=1e-12, atol=1e-14):
            i = tuple(int(k) for k in np.argwhere(~np.isclose(x, original, rtol=1e-12,
                                                               atol=1e-14))[0])
            fail(f"{label}: afterwards x{list(i)} is {float(x[i])!r}, but it was "
                 f"{float(original[i])!r} (changed by {x[i] - original[i]:.3g}); x must hold "
                 "its original values.",
                 call=label, expected="x unchanged", got="x modified",
                 hint="remember old = x[i] before perturbing it and set x[i] = old when "
                      "done (or perturb a copy of x).")
        # Leaving x alone earns nothing on its own: the gradient must be right too.
        expect_values(got, scalar_gradient_reference(function, original), call=label,
                      rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL, hint=NUMGRAD_HINT)


@check(points=2, targets="numerical_gradient")
def test_numerical_gradient_central_difference_order(sub, evidence):
    """numerical_gradient: central difference (halving eps cuts the error 4x), default eps 1e-6"""
    rng = np.random.default_rng(409)
    x = rng.uniform(-1.5, 1.5, (4,))
    true = scalar_gradient_reference("exp_cubic", x)
    steps = [1e-2, 5e-3, 2.5e-3]
    errors = []
    for eps in steps:
        label, got = numerical_gradient_call(sub, "exp_cubic", x, eps=eps)
        expect_type(got, np.ndarray, call=label, what="a numpy array of x's shape")
        if got.shape != x.shape:
            fail(f"{label} returned shape {got.shape}; expected {x.shape}.", call=label,
                 expected=f"shape {x.shape}", got=f"shape {got.shape}", hint=NUMGRAD_HINT)
        errors.append(float(np.abs(got.astype(np.float64) - true).max()))
    evidence["eps"] = steps
    evidence["max_error"] = errors
    # The error of a central difference is eps**2 / 6 * f''' (ratio 4.0 per halving, measured
    # 4.00 here); a forward difference's is eps / 2 * f'' (ratio 2.0). Rounding stays below
    # 1e-13 at these eps, far under the ~1e-5 truncation errors being compared.
    ratios = [errors[i] / errors[i + 1] if errors[i + 1] > 0 else float("inf")
              for i in range(len(errors) - 1)]
    evidence["error_ratios"] = ratios
    if not all(r > 3.0 for r in ratios):
        table = ", ".join(f"eps={e:g}: {err:.3g}" for e, err in zip(steps, errors))
        kind = ("this looks like a forward (one-sided) difference" if all(1.6 < r < 2.5
                                                                         for r in ratios)
                else "the error does not shrink like eps**2 (is the eps argument used?)")
        fail(f"numerical_gradient(f, x, eps)  # f(x) = {SCALAR_FUNCTIONS['exp_cubic'].__doc__}, "
             f"x of shape (4,): largest error "
             f"against the true gradient: {table}; halving eps divided the error by "
             f"{', '.join(f'{r:.2f}' for r in ratios)}, expected about 4: {kind}.",
             call="numerical_gradient(f, x, eps)", expected="error ratio ~4",
             got=f"ratios {', '.join(f'{r:.2f}' for r in ratios)}",
             hint="(f(x + eps) - f(x - eps)) / (2 * eps) is exact for quadratics and its error "
                  "falls like eps**2; (f(x + eps) - f(x)) / eps only like eps.")
    # The default: f is called at x moved by eps = 1e-6 (or eps / 2 for a centred step of
    # width eps); a default of 1e-5 or 1e-7 is 10x off. Rounding moves the measured step by
    # ~1e-16.
    label = (f"numerical_gradient(f, x)  # eps left to its default, f(x) = "
             f"{SCALAR_FUNCTIONS['sin_times_square'].__doc__}, x of shape (3,)")
    record = sub.probe("manual_backward:numerical_gradient_step", "sin_times_square",
                       rng.uniform(-1.5, 1.5, (3,)), label=label)
    step = max(record["steps"], default=0.0)
    evidence["default_step"] = step
    if not 4e-7 <= step <= 2.5e-6:
        fail(f"{label}: f was called at points up to {step:.3g} away from x; the contract's "
             "default eps = 1e-6 moves one element by 1e-6.", call=label,
             expected="steps of 1e-6", got=f"steps of {step:.3g}",
             hint="keep the signature numerical_gradient(f, x, eps=1e-6) and perturb by eps.")


@check(points=1, targets="numerical_gradient")
def test_numerical_gradient_any_shape(sub):
    """numerical_gradient works for x of any shape and layout, 0-d included"""
    rng = np.random.default_rng(410)
    a = rng.standard_normal((6, 6))
    cases = [("sin_times_square", (), ()), ("log_sum_exp", (1,), ()),
             ("coupled_tanh", (2, 3, 4), ()), ("quadratic_form", (3, 2), ((a + a.T) / 2,)),
             ("sin_times_square", (5, 1), ())]
    for function, shape, consts in cases:
        x = rng.uniform(-2, 2, shape)
        label, got = numerical_gradient_call(sub, function, x, consts)
        expect_values(got, scalar_gradient_reference(function, x, consts), call=label,
                      rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL, hint=NUMGRAD_HINT)
    # Views that are not C-contiguous reach the worker as such (shared memory): x.reshape(-1)
    # or x.ravel() is then a copy, and perturbing it leaves x, and f(x), unchanged.
    # May change: perturbing x in place is allowed (the check above judges restoring it).
    wide = sub.shared(rng.uniform(-2, 2, (4, 6)), may_change=True)
    for function, x, layout in [("coupled_tanh", wide[:, ::2], "every second column"),
                                ("sin_times_square", wide.T, "transposed")]:
        values = x.copy()
        label, got = numerical_gradient_call(sub, function, x)
        expect_values(got, scalar_gradient_reference(function, values),
                      call=f"{label}, x {layout}, strides {x.strides}",
                      rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL, hint=NUMGRAD_HINT)


# --------------------------------------------------------------------------- Softplus


@check(points=2, targets="Softplus")
def test_softplus_extreme_inputs(sub):
    """Softplus is finite and exact from -1e3 to 1e3, forward and backward"""
    x = torch.tensor([-1e3, -700.0, -50.0, -36.0, -20.5, -1e-3, 0.0, 1e-3, 15.0, 20.5, 36.0,
                      50.0, 700.0, 1e3], dtype=torch.float64)
    grad_output = torch.linspace(-2.0, 3.0, len(x), dtype=torch.float64)
    softplus_call(sub, x, grad_output, "  # x from -1e3 to 1e3")
    x0 = torch.tensor(1e3, dtype=torch.float64)  # a 0-d tensor
    softplus_call(sub, x0, torch.tensor(0.5, dtype=torch.float64),
                  "  # x = tensor(1000.), a 0-d tensor")


# ----------------------------------------------------------------------- vector_jacobian_product


@check(points=1, targets="vector_jacobian_product")
def test_vector_jacobian_product_shapes(sub):
    """vector_jacobian_product returns x's shape when y has another shape (or is a scalar)"""
    gen = torch.Generator().manual_seed(411)
    cases = [("outer", torch.randn(4, generator=gen, dtype=torch.float64)),
             ("column_sums", torch.randn(3, 5, generator=gen, dtype=torch.float64)),
             ("scalar_norm", torch.randn(2, 3, generator=gen, dtype=torch.float64)),
             ("softmax_rows", torch.randn(3, 4, generator=gen, dtype=torch.float64)),
             ("elementwise", torch.randn(2, 2, 3, generator=gen, dtype=torch.float64))]
    for function, x in cases:
        v = torch.randn(vector_output_shape(function, x), generator=gen, dtype=torch.float64)
        label, record = vjp_call(sub, function, x, v)
        expect_values(record["value"], vjp_reference(function, x, v), call=label, rtol=RTOL,
                      atol=ATOL, hint=VJP_HINT)


@check(points=1, targets="vector_jacobian_product")
def test_vector_jacobian_product_leaves_x_grad(sub):
    """vector_jacobian_product leaves x.grad as it was (None, or a gradient already there)"""
    gen = torch.Generator().manual_seed(412)
    x = torch.randn(5, generator=gen, dtype=torch.float64)
    v = torch.randn(5, generator=gen, dtype=torch.float64)
    held = torch.randn(5, generator=gen, dtype=torch.float64)
    expected = vjp_reference("elementwise", x, v)
    for setup, kwargs in [("x requires grad, x.grad is None", {"x_requires_grad": True}),
                          ("x.grad already holds a gradient", {"x_grad": held})]:
        label, record = vjp_call(sub, "elementwise", x, v, **kwargs)
        label = f"{label}; {setup}"
        expect_values(record["value"], expected, call=label, rtol=RTOL, atol=ATOL,
                     hint=VJP_HINT)
        before, after = record["x_grad_before"], record["x_grad_after"]
        if (before is None) != (after is None) or (
                before is not None and not torch.equal(before, after)):
            fail(f"{label}: x.grad was {short(before)} before the call and {short(after)} "
                 "after it; the contract leaves x.grad as it was.", call=label,
                 expected=f"x.grad = {short(before)}", got=f"x.grad = {short(after)}",
                 hint="y.backward() accumulates into x.grad; work on x.detach()"
                      ".requires_grad_() and use torch.autograd.grad, which returns the "
                      "gradient instead of storing it.")


@check(points=2, targets="vector_jacobian_product")
def test_vector_jacobian_product_without_jacobian(sub):
    """vector_jacobian_product handles 200,000 inputs in one backward pass (no Jacobian)"""
    # Measured: the reference takes 0.07 s for these sizes (warm worker); a Jacobian of
    # 200,000 x 200,000 float64 needs 320 GB (torch.autograd.functional.jacobian ran 17 s
    # before failing to allocate it under the 4 GiB worker limit) and one backward per output
    # would take over 600 s (3 ms each). A 5 s deadline separates them by 10x both ways.
    gen = torch.Generator().manual_seed(413)
    small = torch.randn(3, generator=gen, dtype=torch.float64)
    vjp_call(sub, "elementwise", small, small)  # warm-up: pays torch's one-off imports
    for function in ("elementwise", "softmax_rows"):
        x = torch.randn(VJP_SIZE, generator=gen, dtype=torch.float64)
        v = torch.randn(VJP_SIZE, generator=gen, dtype=torch.float64)
        try:
            label, record = vjp_call(sub, function, x, v, timeout=VJP_DEADLINE)
        except StudentError as exc:
            memory = isinstance(exc, StudentRaised) and "allocate" in exc.raw_message
            if exc.status not in ("timeout", "crashed") and not memory:
                raise
            fail(f"{exc}\nWith {VJP_SIZE:,} inputs and outputs the Jacobian has "
                 f"{VJP_SIZE ** 2:.1e} entries ({VJP_SIZE ** 2 * 8 / 1e9:,.0f} GB), and one "
                 "backward pass per output would take minutes; a vector-Jacobian product "
                 "needs a single backward pass.", call=exc.call,
                 expected="one backward pass", got=exc.status, hint=VJP_HINT)
        expect_values(record["value"], vjp_reference(function, x, v), call=label, rtol=RTOL,
                      atol=ATOL, hint=VJP_HINT)


# --------------------------------------------------------------------------- Value


@check(points=2, targets="Value", autograd=False)
def test_value_plain_numbers_on_either_side(sub):
    """Value works with plain numbers on either side of + - * /, with ** and unary minus"""
    cases = [("add", ("const", 2), ("node", 0)), ("add", ("node", 0), ("const", 2.5)),
             ("sub", ("const", 3), ("node", 0)), ("sub", ("node", 0), ("const", 3.5)),
             ("mul", ("const", -2), ("node", 0)), ("mul", ("node", 0), ("const", 0.5)),
             ("truediv", ("const", 4), ("node", 0)), ("truediv", ("node", 0), ("const", -4.0)),
             ("pow", ("node", 0), ("const", 2)), ("pow", ("node", 0), ("const", 3.0)),
             ("pow", ("node", 0), ("const", -1)), ("pow", ("node", 0), ("const", 0.5)),
             ("neg", ("node", 0))]
    for step in cases:
        program = [("leaf", 1.25), step]
        check_value_program(sub, program, title="a Value with a plain number")
    # The same operators between two Values, and a node combined with itself.
    for op in ("add", "sub", "mul", "truediv"):
        program = [("leaf", 1.25), ("leaf", -0.75), (op, ("node", 0), ("node", 1)),
                   (op, ("node", 2), ("node", 2))]
        check_value_program(sub, program, title="Values combined with Values")


@check(points=3, targets="Value", autograd=False)
def test_value_random_graphs(sub):
    """Value.backward is right on random graphs whose nodes are used several times"""
    for seed in range(414, 424):
        program = random_program(np.random.default_rng(seed), leaves=4, ops=22)
        check_value_program(sub, program, title=f"a random Value graph (seed {seed})")
