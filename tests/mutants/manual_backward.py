"""Wrong implementations of `manual_backward`: the classic mistakes, each with the checks it
must fail (see mutants/__init__.py). Where the solution's `fit_linear_gd` or
`mlp_loss_and_grads` call a mutated helper, their checks fail too, as they would for a
student."""

from mutants import mutant_factory

M = mutant_factory("manual_backward")

MSE_ALL = ("mse_linear_grads_values", "mse_linear_grads_shapes_and_types")
FIT_VALUES = ("fit_linear_gd_trajectory", "fit_linear_gd_long_run")
CE_VALUES = ("softmax_cross_entropy_values", "softmax_cross_entropy_large_logits",
             "softmax_cross_entropy_shapes_and_types")
# The side-effect checks also require a right result, so every wrong value fails them too.
MLP_VALUES = ("mlp_loss_and_grads_values", "mlp_loss_and_grads_shapes_and_dead_units",
              "mlp_loss_and_grads_leaves_inputs_alone")
VALUE_ALL = ("value_simple_expression", "value_plain_numbers_on_either_side",
             "value_random_graphs")

MUTANTS = [
    # ------------------------------------------------------------------ mse_linear_grads
    M("mse_missing_factor_2", """
def mse_linear_grads(X, y, w, b):
    r = X @ w + b - y
    return X.T @ r / len(y), float(r.mean())
""", *MSE_ALL, *FIT_VALUES),
    M("mse_sum_instead_of_mean", """
def mse_linear_grads(X, y, w, b):
    r = X @ w + b - y
    return 2 * X.T @ r, float(2 * r.sum())
""", *MSE_ALL, *FIT_VALUES),
    M("mse_residual_sign_flipped", """
def mse_linear_grads(X, y, w, b):
    r = y - (X @ w + b)
    return 2 * X.T @ r / len(y), float(2 * r.mean())
""", *MSE_ALL, *FIT_VALUES),
    M("mse_db_as_0d_array", """
def mse_linear_grads(X, y, w, b):
    r = X @ w + b - y
    return 2 * X.T @ r / len(y), np.asarray(2 * r.mean())
""", "mse_linear_grads_shapes_and_types"),  # b - lr * db is then np.float64: a float
    M("mse_bias_gradient_forgets_the_mean", """
def mse_linear_grads(X, y, w, b):
    r = X @ w + b - y
    return 2 * X.T @ r / len(y), float(2 * r.sum())
""", *MSE_ALL, *FIT_VALUES),
    # ------------------------------------------------------------------ fit_linear_gd
    M("fit_loss_recorded_after_update", """
def fit_linear_gd(X, y, lr, steps):
    w, b, losses = np.zeros(X.shape[1]), 0.0, []
    for _ in range(steps):
        dw, db = mse_linear_grads(X, y, w, b)
        w, b = w - lr * dw, b - lr * db
        losses.append(mse_loss(X, y, w, b))
    return w, b, losses
""", *FIT_VALUES),
    M("fit_records_one_loss_too_many", """
def fit_linear_gd(X, y, lr, steps):
    w, b, losses = np.zeros(X.shape[1]), 0.0, []
    for _ in range(steps):
        losses.append(mse_loss(X, y, w, b))
        dw, db = mse_linear_grads(X, y, w, b)
        w, b = w - lr * dw, b - lr * db
    losses.append(mse_loss(X, y, w, b))
    return w, b, losses
""", *FIT_VALUES),
    M("fit_bias_never_updated", """
def fit_linear_gd(X, y, lr, steps):
    w, b, losses = np.zeros(X.shape[1]), 0.0, []
    for _ in range(steps):
        losses.append(mse_loss(X, y, w, b))
        dw, db = mse_linear_grads(X, y, w, b)
        w = w - lr * dw
    return w, b, losses
""", *FIT_VALUES),
    M("fit_stops_once_converged", """
def fit_linear_gd(X, y, lr, steps):
    w, b, losses = np.zeros(X.shape[1]), 0.0, []
    for _ in range(steps):
        losses.append(mse_loss(X, y, w, b))
        if len(losses) > 1 and abs(losses[-2] - losses[-1]) < 1e-9:
            break  # "converged": but the contract asks for exactly `steps` updates
        dw, db = mse_linear_grads(X, y, w, b)
        w, b = w - lr * dw, b - lr * db
    return w, b, losses
""", "fit_linear_gd_long_run"),
    M("fit_losses_as_numpy_array", """
def fit_linear_gd(X, y, lr, steps):
    w, b, losses = np.zeros(X.shape[1]), 0.0, []
    for _ in range(steps):
        losses.append(mse_loss(X, y, w, b))
        dw, db = mse_linear_grads(X, y, w, b)
        w, b = w - lr * dw, b - lr * db
    return w, b, np.array(losses)
""", "fit_linear_gd_types"),
    M("fit_bias_as_one_element_array", """
def fit_linear_gd(X, y, lr, steps):
    w, b, losses = np.zeros(X.shape[1]), np.zeros(1), []
    for _ in range(steps):
        losses.append(mse_loss(X, y, w, b))
        dw, db = mse_linear_grads(X, y, w, b)
        w, b = w - lr * dw, b - lr * db
    return w, b, losses
""", *FIT_VALUES, "fit_linear_gd_types"),
    # ------------------------------------------------------------------ softmax_cross_entropy
    M("ce_unstable_softmax", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    e = np.exp(logits)
    probs = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(probs[np.arange(n), labels]).mean()
    grad = probs.copy()
    grad[np.arange(n), labels] -= 1
    return float(loss), grad / n
""", "softmax_cross_entropy_large_logits"),
    M("ce_log_of_stable_softmax", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(probs[np.arange(n), labels]).mean()  # log(0) = -inf for a hopeless label
    grad = probs.copy()
    grad[np.arange(n), labels] -= 1
    return float(loss), grad / n
""", "softmax_cross_entropy_large_logits"),
    M("ce_sum_instead_of_mean", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    log_probs = log_softmax(logits)
    grad = np.exp(log_probs)
    grad[np.arange(n), labels] -= 1.0
    return float(-log_probs[np.arange(n), labels].sum()), grad
""", *CE_VALUES, *MLP_VALUES),
    M("ce_gradient_not_divided_by_n", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    log_probs = log_softmax(logits)
    grad = np.exp(log_probs)
    grad[np.arange(n), labels] -= 1.0
    return float(-log_probs[np.arange(n), labels].mean()), grad
""", *CE_VALUES, *MLP_VALUES),
    M("ce_gradient_without_one_hot", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    log_probs = log_softmax(logits)
    return float(-log_probs[np.arange(n), labels].mean()), np.exp(log_probs) / n
""", *CE_VALUES, *MLP_VALUES),
    M("ce_loss_as_0d_array", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    log_probs = log_softmax(logits)
    grad = np.exp(log_probs)
    grad[np.arange(n), labels] -= 1.0
    return np.array(-log_probs[np.arange(n), labels].mean()), grad / n
""", "softmax_cross_entropy_shapes_and_types"),
    M("ce_shift_by_the_global_maximum", "", "softmax_cross_entropy_large_logits",
      replace=(("shifted = logits - logits.max(axis=1, keepdims=True)",
                "shifted = logits - logits.max()  # one maximum for all rows"),)),
    # ------------------------------------------------------------------ mlp_loss_and_grads
    M("mlp_missing_relu_mask", "", *MLP_VALUES,
      replace=(("d_pre = d_hidden * (pre > 0)", "d_pre = d_hidden"),)),
    M("mlp_bias_gradients_averaged", "", *MLP_VALUES,
      replace=(("d_b2 = d_logits.sum(axis=0)", "d_b2 = d_logits.mean(axis=0)"),
               ("d_b1 = d_pre.sum(axis=0)", "d_b1 = d_pre.mean(axis=0)"))),
    M("mlp_W2_gradient_transposed", "", *MLP_VALUES,
      replace=(("d_W2 = hidden.T @ d_logits", "d_W2 = d_logits.T @ hidden"),)),
    M("mlp_takes_an_sgd_step_in_place", "", "mlp_loss_and_grads_leaves_inputs_alone",
      replace=(('    return loss, {"W1": d_W1, "b1": d_b1, "W2": d_W2, "b2": d_b2}',
                '    grads = {"W1": d_W1, "b1": d_b1, "W2": d_W2, "b2": d_b2}\n'
                '    for key in params:\n'
                '        params[key] -= 0.1 * grads[key]  # "training" inside the function\n'
                '    return loss, grads'),)),
    M("mlp_grads_written_into_params", "", "mlp_loss_and_grads_leaves_inputs_alone",
      replace=(('    return loss, {"W1": d_W1, "b1": d_b1, "W2": d_W2, "b2": d_b2}',
                '    grads = params  # the same dict: each gradient replaces a weight\n'
                '    grads.update({"W1": d_W1, "b1": d_b1, "W2": d_W2, "b2": d_b2})\n'
                '    return loss, grads'),)),
    # ------------------------------------------------------------------ numerical_gradient
    M("ng_default_eps_ten_times_too_big", "", "numerical_gradient_central_difference_order",
      replace=(("def numerical_gradient(f, x: np.ndarray, eps: float = 1e-6)",
                "def numerical_gradient(f, x: np.ndarray, eps: float = 1e-5)"),)),
    M("ng_eps_argument_renamed", """
def numerical_gradient(f, x, h=1e-6):
    grad = np.zeros_like(x, dtype=np.float64)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + h
        f_plus = f(x)
        x[index] = original - h
        f_minus = f(x)
        x[index] = original
        grad[index] = (f_plus - f_minus) / (2.0 * h)
    return grad
""", "numerical_gradient_central_difference_order"),
    M("fit_linear_gd_lr_argument_renamed", "", "fit_linear_gd_types",
      replace=(("def fit_linear_gd(X: np.ndarray, y: np.ndarray, lr: float, steps: int",
                "def fit_linear_gd(X: np.ndarray, y: np.ndarray, learning_rate: float, steps: int"),
               ("        w = w - lr * dw\n        b = b - lr * db\n",
                "        w = w - learning_rate * dw\n        b = b - learning_rate * db\n"))),
    M("ng_perturbs_a_reshaped_copy", """
def numerical_gradient(f, x, eps=1e-6):
    flat = x.reshape(-1)  # a view only when x is C-contiguous
    grad = np.zeros(flat.size)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        f_plus = f(x)
        flat[i] = old - eps
        f_minus = f(x)
        flat[i] = old
        grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad.reshape(x.shape)
""", "numerical_gradient_any_shape"),
    M("ng_forward_difference", """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    base = f(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + eps
        grad[index] = (f(x) - base) / eps
        x[index] = old
    return grad
""", "numerical_gradient_values", "numerical_gradient_central_difference_order",
       "numerical_gradient_any_shape", "numerical_gradient_restores_x"),
    M("ng_x_not_restored", """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        x[index] += eps
        f_plus = f(x)
        x[index] -= 2 * eps
        grad[index] = (f_plus - f(x)) / (2 * eps)
    return grad
""", "numerical_gradient_values", "numerical_gradient_restores_x",
       "numerical_gradient_any_shape"),
    M("ng_ignores_eps", """
def numerical_gradient(f, x, eps=1e-6):
    h = 1e-6
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + h
        f_plus = f(x)
        x[index] = old - h
        f_minus = f(x)
        x[index] = old
        grad[index] = (f_plus - f_minus) / (2 * h)
    return grad
""", "numerical_gradient_central_difference_order"),
    M("ng_first_axis_only", """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in range(x.shape[0]):
        old = np.copy(x[i])
        x[i] = old + eps
        f_plus = f(x)
        x[i] = old - eps
        f_minus = f(x)
        x[i] = old
        grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad
""", "numerical_gradient_values", "numerical_gradient_any_shape",
       "numerical_gradient_restores_x"),
    M("ng_0d_becomes_1d", """
def numerical_gradient(f, x, eps=1e-6):
    x = np.atleast_1d(x)  # a view: perturbing it still perturbs the caller's x
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + eps
        f_plus = f(x)
        x[index] = old - eps
        f_minus = f(x)
        x[index] = old
        grad[index] = (f_plus - f_minus) / (2 * eps)
    return grad
""", "numerical_gradient_any_shape"),
    M("ng_rebinds_x_instead_of_restoring", """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        saved = x.copy()
        x[index] += eps
        f_plus = f(x)
        x[index] -= 2 * eps
        f_minus = f(x)
        x = saved  # rebinds the local name; the caller's array keeps x - eps
        grad[index] = (f_plus - f_minus) / (2 * eps)
    return grad
""", "numerical_gradient_restores_x"),
    # ------------------------------------------------------------------ Softplus
    M("softplus_naive_forward", "", "softplus_extreme_inputs",
      replace=(("return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))",
                "return torch.log(1 + torch.exp(x))"),)),
    M("softplus_cut_off_at_10", "", "softplus_extreme_inputs",
      replace=(("return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))",
                "return torch.where(x > 10, x, torch.log1p(torch.exp(x.clamp(max=10))))"),)),
    M("softplus_backward_ignores_grad_output", "", "softplus_values_and_gradients",
      "softplus_extreme_inputs",
      replace=(("return grad_output * torch.sigmoid(x)", "return torch.sigmoid(x)"),)),
    M("softplus_backward_unstable_sigmoid", "", "softplus_extreme_inputs",
      replace=(("return grad_output * torch.sigmoid(x)",
                "return grad_output * torch.exp(x) / (1 + torch.exp(x))"),)),
    M("softplus_backward_sign_flipped", "", "softplus_values_and_gradients",
      "softplus_extreme_inputs",
      replace=(("return grad_output * torch.sigmoid(x)",
                "return grad_output * torch.sigmoid(-x)"),)),
    M("softplus_backward_returns_nothing", "", "softplus_values_and_gradients",
      "softplus_extreme_inputs",
      replace=(("return grad_output * torch.sigmoid(x)", "return None"),)),
    M("softplus_backward_uses_the_output", "", "softplus_values_and_gradients",
      "softplus_extreme_inputs",
      replace=(("        ctx.save_for_backward(x)\n", ""),
               ("return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))",
                "y = torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))\n"
                "        ctx.save_for_backward(y)\n        return y"))),
    # ------------------------------------------------------------------ vector_jacobian_product
    M("vjp_ignores_v", """
def vector_jacobian_product(f, x, v):
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x).sum(), x)
    return g
""", "vector_jacobian_product_values", "vector_jacobian_product_shapes",
       "vector_jacobian_product_leaves_x_grad", "vector_jacobian_product_without_jacobian"),
    M("vjp_backward_into_callers_x", """
def vector_jacobian_product(f, x, v):
    x.requires_grad_(True)
    f(x).backward(v)
    return x.grad
""", "vector_jacobian_product_leaves_x_grad"),
    M("vjp_forms_the_jacobian", """
def vector_jacobian_product(f, x, v):
    jac = torch.autograd.functional.jacobian(f, x.detach())  # shape y.shape + x.shape
    return torch.tensordot(v, jac, dims=v.dim())
""", "vector_jacobian_product_without_jacobian"),
    M("vjp_flattened_result", """
def vector_jacobian_product(f, x, v):
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x), x, grad_outputs=v)
    return g.reshape(-1)
""", "vector_jacobian_product_shapes"),
    M("vjp_zeroes_x_grad_afterwards", """
def vector_jacobian_product(f, x, v):
    x.requires_grad_(True)
    (g,) = torch.autograd.grad(f(x), x, grad_outputs=v)
    if x.grad is not None:
        x.grad.zero_()
    else:
        x.grad = torch.zeros_like(x)  # "clean up" -- but None was the state to keep
    return g
""", "vector_jacobian_product_leaves_x_grad"),
    # ------------------------------------------------------------------ Value
    M("value_grad_assigned_not_accumulated", "", *VALUE_ALL,
      replace=((".grad += ", ".grad = "),)),
    M("value_backward_without_topological_order", """
def _naive_backward(self):
    # each node passes its gradient on as soon as it is reached: a node used twice passes on
    # a partial gradient, and again later
    self.grad = 1.0
    def propagate(node):
        node._backward()
        for child in node._prev:
            propagate(child)
    propagate(self)
Value.backward = _naive_backward
""", *VALUE_ALL),
    M("value_rsub_sign_flipped", "", "value_plain_numbers_on_either_side",
      "value_random_graphs",
      replace=(("return (-self) + other", "return self - other"),)),
    M("value_no_rtruediv", """
del Value.__rtruediv__
""", "value_plain_numbers_on_either_side", "value_random_graphs"),
    M("value_relu_passes_every_gradient", "", "value_random_graphs",
      replace=(("self.grad += (out.data > 0) * out.grad", "self.grad += out.grad"),)),
    M("value_pow_derivative_forgets_minus_one", "", "value_plain_numbers_on_either_side",
      "value_random_graphs",
      replace=(("exponent * self.data ** (exponent - 1) * out.grad",
                "exponent * self.data ** exponent * out.grad"),)),
    M("value_tanh_derivative_wrong", "", "value_simple_expression", "value_random_graphs",
      replace=(("self.grad += (1.0 - t * t) * out.grad", "self.grad += (1.0 - t) * out.grad"),)),
    M("value_output_grad_not_seeded", "", *VALUE_ALL,
      replace=(("        self.grad = 1.0\n", ""),)),
    M("value_grad_starts_as_none", """
_original_init = Value.__init__
def _init_with_none(self, data, _children=()):
    _original_init(self, data, _children)
    self.grad = None
Value.__init__ = _init_with_none
""", *VALUE_ALL),
    M("value_no_radd", """
del Value.__radd__
""", "value_plain_numbers_on_either_side", "value_random_graphs"),
    M("value_topological_order_not_reversed", "", *VALUE_ALL,
      replace=(("for node in reversed(order):", "for node in order:"),)),
    M("value_exp_derivative_uses_the_input", "", "value_simple_expression",
      "value_random_graphs",
      replace=(("self.grad += e * out.grad", "self.grad += self.data * out.grad"),)),
]

# Correct variants (they must fail nothing): the styles a strict check could wrongly reject.
MUTANTS += [
    M("correct_mse_returns_numpy_float64", """
def mse_linear_grads(X, y, w, b):
    r = X @ w + b - y
    return 2 * np.mean(r[:, None] * X, axis=0), 2 * np.mean(r)
"""),
    M("correct_fit_numpy_floats_and_in_place_updates", """
def fit_linear_gd(X, y, lr, steps):
    n, d = X.shape
    w, b, losses = np.zeros(d), 0.0, []
    for _ in range(steps):
        err = X.dot(w) + b - y
        losses.append(np.mean(err ** 2))
        w -= lr * (2 / n) * X.T.dot(err)
        b -= lr * 2 * np.mean(err)
    return w, b, losses
"""),
    M("correct_fit_bias_as_a_column_of_ones", """
def fit_linear_gd(X, y, lr, steps):
    Xb = np.hstack([X, np.ones((len(X), 1))])
    theta, losses = np.zeros(Xb.shape[1]), []
    for _ in range(steps):
        r = Xb @ theta - y
        losses.append(float(r @ r / len(y)))
        theta = theta - lr * 2 * Xb.T @ r / len(y)
    return theta[:-1], float(theta[-1]), losses
"""),
    M("correct_ce_logaddexp_and_numpy_float", """
def softmax_cross_entropy(logits, labels):
    n = len(labels)
    lse = np.logaddexp.reduce(logits, axis=1)
    loss = np.mean(lse - logits[np.arange(n), labels])
    probs = np.exp(logits - lse[:, None])
    onehot = np.zeros_like(logits)
    onehot[np.arange(n), labels] = 1
    return loss, (probs - onehot) / n
"""),
    M("correct_ce_modifies_its_own_logits_in_place", """
def softmax_cross_entropy(logits, labels):
    n = logits.shape[0]
    logits -= logits.max(axis=1, keepdims=True)  # the contract does not forbid it
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    loss = -np.mean(logits[np.arange(n), labels] - np.log(np.exp(logits).sum(axis=1)))
    probs[np.arange(n), labels] -= 1
    return float(loss), probs / n
"""),
    M("correct_mlp_mask_from_hidden", "",
      replace=(("d_pre = d_hidden * (pre > 0)", "d_pre = np.where(hidden > 0, d_hidden, 0.0)"),)),
    M("correct_ng_add_subtract_with_nditer", """
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"], op_flags=["readwrite"])
    while not it.finished:
        i = it.multi_index
        x[i] += eps
        f_plus = f(x)
        x[i] -= 2 * eps
        f_minus = f(x)
        x[i] += eps  # back to the original, up to rounding
        grad[i] = (f_plus - f_minus) / (2 * eps)
        it.iternext()
    return grad
"""),
    M("correct_ng_perturbs_copies", """
def numerical_gradient(f, x, eps=1e-6):
    flat = x.astype(np.float64).ravel()
    grad = np.empty(flat.size)
    for i in range(flat.size):
        step = np.zeros(flat.size)
        step[i] = eps
        f_plus = f((flat + step).reshape(x.shape))
        grad[i] = (f_plus - f((flat - step).reshape(x.shape))) / (2 * eps)
    return grad.reshape(x.shape)
"""),
    M("correct_softplus_cut_off_at_20", "",
      replace=(("return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))",
                "return torch.where(x > 20, x, torch.log1p(torch.exp(x.clamp(max=20))))"),)),
    M("correct_softplus_logaddexp_and_saved_sigmoid", """
class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.sig = torch.sigmoid(x)  # saved on ctx, not with save_for_backward
        return torch.logaddexp(x, torch.zeros_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.sig
"""),
    M("correct_softplus_sigmoid_as_one_minus_exp", """
class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.nn.functional.softplus(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * -torch.expm1(-y)  # sigmoid(x) = 1 - exp(-softplus(x))
"""),
    M("correct_vjp_backward_on_a_clone", """
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_(True)
    f(leaf).backward(v)
    return leaf.grad
"""),
    M("correct_vjp_dot_with_v", """
def vector_jacobian_product(f, x, v):
    x = x.detach().requires_grad_()
    (g,) = torch.autograd.grad((f(x) * v).sum(), x)
    return g
"""),
]

# Catalogued faults (grader/course/faults.toml) these mutants hold: their failing checks must say so.
DIAGNOSES = {
    "ce_unstable_softmax": ["unstable-softmax"],
    "ce_log_of_stable_softmax": ["unstable-softmax"],
    # one shift for the whole batch: rows far below the maximum overflow to nan all the same
    "ce_shift_by_the_global_maximum": ["unstable-softmax"],
}
