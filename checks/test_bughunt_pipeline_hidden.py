"""Hidden checks for the bug hunt `bughunt_pipeline` (bughunt/pipeline.py).

One check per behaviour a seeded fault breaks (faults.toml says which check scores which
fault); checks of faults the student's copy does not hold still run and count only if they
fail. See `bughunt_common.py` for how each is judged.
"""

from __future__ import annotations

import numpy as np
import torch

from bughunt_common import (REVEAL, TIMEOUT, fail, reference, require, setup_record,
                                          verify_dropout, verify_evaluate_over_samples,
                                          verify_fresh_gradients, verify_history,
                                          verify_labels, verify_log, verify_logits,
                                          verify_loss_input, verify_mixed_batches,
                                          verify_no_batch_of_one, verify_registration,
                                          verify_standardized, verify_training_mode,
                                          verify_validation_graph, verify_validation_mode)
from bughunt_pipeline_cases_hidden import (EVAL_BATCHES, EVAL_CALL, PROBE_LABELS, PROBE_X,
                                                         SETUP, SETUP_CALL, TRAIN)
from grader import check, expect_array
from bughunt_pipeline_cases_hidden import END_TO_END
from grader.checking.bughunt_e2e import (verify_outcome, verify_pairing, verify_parameters_learn,
                                         verify_split)


@check(points=2, targets=["run", "fit_normalizer", "standardize"], timeout=TIMEOUT,
       reveal=REVEAL)
def test_features_standardized(sub, evidence):
    """The model trains and validates on features standardised with the training split's \
statistics"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    ref = reference("pipeline")
    X, y = ref.load_readings(0)
    X_train, _, X_val, _ = ref.split(X, y)
    verify_standardized(record, torch.from_numpy(X_train), torch.from_numpy(X_val), SETUP_CALL,
                        evidence)


@check(points=2, targets="standardize", timeout=TIMEOUT, reveal=REVEAL)
def test_standardize_leaves_input_alone(sub, evidence):
    """standardize returns (X - mean) / std and leaves X as it was"""
    rng = np.random.default_rng(75)
    original = (rng.standard_normal((10, 6)) * [6, 2, 12, 0.4, 0.4, 0.4]
                + [300, 100, 45, 1, 1, 1]).astype(np.float32)
    mean, std = original.mean(axis=0), original.std(axis=0)
    X = sub.shared(original, name="X", may_change=True)  # judged below, with evidence
    call = "standardize(X, mean, std)  # X float32 of shape (10, 6), mean and std per feature"
    require(sub, "standardize", call=call)
    got = sub.call("standardize", X, mean, std)
    modified = not np.array_equal(X, original)
    evidence["input_modified"] = modified
    if modified:
        fail(f"{call} changed X itself: after the call the caller's array holds other values "
             f"(its first row went from {np.round(original[0, :3], 2).tolist()} to "
             f"{np.round(np.asarray(X)[0, :3], 2).tolist()}...).", call=call,
             expected="X unchanged", got="X modified", evidence=evidence)
    want = torch.from_numpy((original.astype(np.float64) - mean) / std)
    # float32 arithmetic: within 1e-6 of the float64 reference (measured 2.4e-7).
    expect_array(got, want, call=call, rtol=1e-5, atol=1e-5, check_dtype=False,
                 kind="a torch.Tensor")


@check(points=2, targets="make_loaders", timeout=TIMEOUT, reveal=REVEAL)
def test_training_batches_mixed(sub, evidence):
    """Training batches mix the machine states"""
    verify_mixed_batches(setup_record(sub, SETUP_CALL, **SETUP), SETUP_CALL, evidence)


@check(points=2, targets="make_loaders", timeout=TIMEOUT, reveal=REVEAL)
def test_no_batch_of_one(sub, evidence):
    """No training batch is too small for BatchNorm"""
    verify_no_batch_of_one(setup_record(sub, SETUP_CALL, **SETUP), SETUP_CALL, evidence)


@check(points=2, targets=["to_labels", "train"], timeout=TIMEOUT, reveal=REVEAL)
def test_labels_are_class_indices(sub, evidence):
    """The loss receives the states as class indices"""
    verify_labels(setup_record(sub, SETUP_CALL, **SETUP), SETUP_CALL, evidence)


@check(points=2, targets="SensorNet", timeout=TIMEOUT, reveal=REVEAL)
def test_parameters_registered(sub, evidence):
    """SensorNet registers every layer it uses"""
    expected = sum(p.numel() for p in reference("pipeline").SensorNet().parameters())
    verify_registration(sub, "SensorNet", [], PROBE_X, expected, evidence)


@check(points=2, targets="SensorNet", timeout=TIMEOUT, reveal=REVEAL)
def test_dropout_off_in_eval(sub, evidence):
    """SensorNet drops units in training mode only"""
    verify_dropout(sub, "SensorNet", [], PROBE_X, evidence)


@check(points=2, targets=["SensorNet", "train"], timeout=TIMEOUT, reveal=REVEAL)
def test_outputs_are_logits(sub, evidence):
    """The loss gets raw scores (logits), as nn.CrossEntropyLoss expects"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    verify_logits(record, PROBE_LABELS, SETUP_CALL, evidence)
    verify_loss_input(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_steps_use_fresh_gradients(sub, evidence):
    """Every update uses the gradient of its own batch"""
    verify_fresh_gradients(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_in_eval_mode(sub, evidence):
    """Validation runs with the model in eval mode"""
    verify_validation_mode(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_without_graph(sub, evidence):
    """Validation runs without building autograd graphs"""
    verify_validation_graph(sub, TRAIN, evidence)


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


@check(points=2, targets="evaluate", timeout=TIMEOUT, reveal=REVEAL)
def test_evaluate_averages_over_samples(sub, evidence):
    """evaluate returns the loss and the accuracy averaged over the samples"""
    verify_evaluate_over_samples(sub, TRAIN, EVAL_BATCHES, "cross_entropy", EVAL_CALL, evidence)


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
