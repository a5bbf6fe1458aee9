"""Hidden checks for the bug hunt `bughunt_regression` (bughunt/regression.py).

One check per behaviour a seeded fault breaks (faults.toml says which check scores which
fault); checks of faults the student's copy does not hold still run and count only if they
fail (`grader.course.bughunt.select_scored`). See `bughunt_common.py` for how each is judged.
"""

from __future__ import annotations

import math

import torch

from bughunt_common import (REVEAL, TIMEOUT, fail, probe, reference, require,
                                          setup_record, verify_evaluate_over_samples,
                                          verify_fresh_gradients, verify_history, verify_log,
                                          verify_lr_trains, verify_registration,
                                          verify_standardized, verify_training_mode,
                                          verify_validation_graph, verify_validation_mode)
from bughunt_regression_cases_hidden import (EVAL_BATCHES, EVAL_CALL, LR_THRESHOLD,
                                                           SETUP, SETUP_CALL, TRAIN)
from bughunt_regression_verify_hidden import reference_curve
from grader import check, expect_array
from grader.checking.student import StudentRaised
from bughunt_regression_cases_hidden import END_TO_END
from grader.checking.bughunt_e2e import (verify_outcome, verify_pairing, verify_parameters_learn,
                                         verify_split)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_steps_use_fresh_gradients(sub, evidence):
    """Every update uses the gradient of its own batch"""
    verify_fresh_gradients(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_without_graph(sub, evidence):
    """Validation runs without building autograd graphs"""
    verify_validation_graph(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_in_eval_mode(sub, evidence):
    """Validation runs with the model in eval mode"""
    verify_validation_mode(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_training_mode_restored(sub, evidence):
    """Every training batch runs with the model in training mode"""
    verify_training_mode(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_history_holds_floats(sub, evidence):
    """train returns its history as Python floats, each loss the mean of its batches'"""
    verify_history(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_log_prints_numbers(sub, evidence):
    """The log prints one line of numbers per epoch"""
    verify_log(sub, TRAIN, evidence)


@check(points=2, targets="sgd_step", timeout=TIMEOUT, reveal=REVEAL)
def test_sgd_step_updates_parameters(sub, evidence):
    """sgd_step moves every parameter by -lr * p.grad, in place"""
    g = torch.Generator().manual_seed(21)
    values = [torch.randn(4, 3, generator=g), torch.randn(3, generator=g)]
    grads = [torch.randn(4, 3, generator=g), torch.randn(3, generator=g)]
    lr = 0.1
    call = "sgd_step(model.parameters(), lr=0.1)  # two parameters with gradients"
    require(sub, "sgd_step", call=call)
    try:
        rec = probe(sub, "update_call", call, name="sgd_step", values=values, grads=grads, lr=lr)
    except StudentRaised as exc:
        evidence["error"] = f"{exc.type}: {exc.raw_message}"[:300]
        fail(f"{call} raised {exc.type}: {exc.raw_message}", call=call, got=exc.type,
             evidence=evidence)
    changed = any(not torch.equal(a, v) for a, v in zip(rec["after"], values))
    evidence["params_changed"] = changed
    if not changed:
        fail(f"{call}: the parameters after the call are exactly the ones before it; nothing "
             "was updated.", call=call, expected="p - lr * p.grad", got="p unchanged",
             evidence=evidence)
    for i, (after, v, grad) in enumerate(zip(rec["after"], values, grads)):
        # float32 p - lr * g: exact up to one rounding (measured: 0.0 difference).
        expect_array(after, v - lr * grad, call=f"{call}: parameter {i} afterwards",
                     rtol=1e-6, atol=1e-7, check_dtype=False)
    if not all(rec["leaf"]):
        fail(f"{call}: afterwards a parameter is no longer a leaf tensor (it carries a "
             "grad_fn): the update was recorded in the autograd graph.", call=call,
             expected="leaf parameters", got="a graph")


@check(points=2, targets="PriceNet", timeout=TIMEOUT, reveal=REVEAL)
def test_parameters_registered(sub, evidence):
    """PriceNet registers every weight it uses"""
    expected = sum(p.numel() for p in reference("regression").PriceNet(4, 32).parameters())
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(31))
    verify_registration(sub, "PriceNet", [4, 32], x, expected, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_learning_rate_trains(sub, evidence):
    """The script's learning rate trains the network without diverging"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    lr = record["lr"]
    if lr is None or not math.isfinite(lr) or lr <= 0:
        fail(f"{SETUP_CALL}: run() passes train lr={lr!r}; expected a positive number.",
             call=SETUP_CALL)
    verify_lr_trains(lambda: list(reference_curve(lr)), f"lr={lr:g}", SETUP_CALL, evidence,
                     LR_THRESHOLD, lr=lr, reference_lr=reference("regression").LR)


@check(points=2, targets="mse_loss", timeout=TIMEOUT, reveal=REVEAL)
def test_loss_matches_mse(sub, evidence):
    """mse_loss compares each prediction with its own target"""
    g = torch.Generator().manual_seed(41)
    pred, target = torch.randn(16, 1, generator=g), torch.randn(16, generator=g)
    call = "mse_loss(pred, target)  # pred of shape (16, 1), target of shape (16,)"
    require(sub, "mse_loss", call=call)
    rec = probe(sub, "loss_call", call, name="mse_loss", pred=pred, target=target)
    evidence["broadcast_shapes"] = [op for op in rec["ops"] if op[2] == [16, 16]][:5]
    want = ((pred.squeeze(1).double() - target.double()) ** 2).mean()
    if rec["value"] is None:
        fail(f"{call} returned a {rec['type']}; expected a 0-dim tensor.", call=call,
             evidence=evidence)
    value = rec["value"]
    if value.numel() != 1:
        fail(f"{call} returned a tensor of shape {tuple(value.shape)}; expected a single "
             "number.", call=call, evidence=evidence)
    if not math.isclose(float(value), float(want), rel_tol=1e-5):
        # Broadcasting inside a library loss (F.mse_loss(pred, target)) builds no (16, 16)
        # tensor the probe sees; its value gives it away: the mean over all 16 x 16 pairs.
        every_pair = ((pred.double() - target.double()) ** 2).mean()
        evidence["matches_broadcast_loss"] = math.isclose(float(value), float(every_pair),
                                                          rel_tol=1e-5)
        blown = (f" On the way it built a (16, 16) tensor: {evidence['broadcast_shapes'][0]}"
                 if evidence["broadcast_shapes"] else "")
        fail(f"{call} returned {float(value):.6g}; the mean squared error of each prediction "
             f"against its own target is {float(want):.6g}.{blown}", call=call,
             expected=f"{float(want):.6g}", got=f"{float(value):.6g}", evidence=evidence)
    if rec["grad"] is None:
        fail(f"{call}: the result does not depend on pred through autograd (no gradient).",
             call=call, evidence=evidence)
    want_grad = 2 * (pred.squeeze(1).double() - target.double()) / len(target)
    expect_array(rec["grad"].reshape(-1).double(), want_grad,
                 call=f"{call}: the gradient with respect to pred", rtol=1e-5, atol=1e-7)


@check(points=2, targets=["run", "Standardizer"], timeout=TIMEOUT, reveal=REVEAL)
def test_features_standardized(sub, evidence):
    """The model trains and validates on features standardised with the training split's statistics"""  # noqa: E501 - a check's title is its docstring
    record = setup_record(sub, SETUP_CALL, **SETUP)
    ref = reference("regression")
    X, y = ref.make_data(0)
    X_train, _, X_val, _ = ref.split_by_date(X, y)
    verify_standardized(record, X_train, X_val, SETUP_CALL, evidence)


@check(points=2, targets="evaluate", timeout=TIMEOUT, reveal=REVEAL)
def test_evaluate_averages_over_samples(sub, evidence):
    """evaluate averages over the samples, not over the batches"""
    verify_evaluate_over_samples(sub, TRAIN, EVAL_BATCHES, "column_mse", EVAL_CALL, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_every_parameter_learns(sub, evidence):
    """Every parameter of the network run() trains gets a gradient and moves (frozen ones stay)"""
    verify_parameters_learn(sub, END_TO_END, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_splits_are_the_contracts(sub, evidence):
    """run() trains on the training samples and validates on the validation samples, never on both"""  # noqa: E501 - a check's title is its docstring
    verify_split(sub, END_TO_END, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_samples_keep_their_labels(sub, evidence):
    """Every sample run() trains and validates on comes with its own label"""
    verify_pairing(sub, END_TO_END, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_run_learns_like_the_fixed_script(sub, evidence):
    """run() learns as well as the fixed script does on the same seed and data"""
    verify_outcome(sub, END_TO_END, evidence)
