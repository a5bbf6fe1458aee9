"""Visible checks for `training_loops` (CURRICULUM.md section 4).

Every check builds its objects inside the worker through a probe (`grader/probes/
training_loops.py`), which calls the student's function and records what hooks saw; the verdict
is computed in `training_loops_verify.py` against the grader's own reference run
(`training_loops_reference.py`) on the same seeded data and initial weights. The weights after
training are verified from outside; the hook records (gradients at each step, the mode of each
forward) name the mistake.
"""

from __future__ import annotations

import torch

from training_loops_cases import (ACCUM_CASE, CHECKPOINT_CASE, EPOCH_CASE,
                                                EVAL_MODE_CASE, EVAL_VALUES_CASES,
                                                FIT_EARLY_STOP_CASE, FIT_SCHEDULER_CASE)
from training_loops_verify import (SEED_HINT, classifier_check, seeded_runs,
                                                 verify_accumulated, verify_checkpoint,
                                                 verify_evaluate_modes, verify_evaluate_values,
                                                 verify_fit, verify_train_epoch_loss,
                                                 verify_train_epoch_steps)
from grader import check, fail


@check(points=4, targets="train_epoch", visibility="visible")
def test_train_epoch_steps_like_the_reference(sub, evidence):
    """train_epoch zeroes, backpropagates and steps once per batch, in training mode"""
    verify_train_epoch_steps(sub, EPOCH_CASE, evidence)


@check(points=2, targets="train_epoch", visibility="visible")
def test_train_epoch_returns_mean_batch_loss(sub, evidence):
    """train_epoch returns the mean of the batch losses as a Python float"""
    verify_train_epoch_loss(sub, EPOCH_CASE, evidence)


@check(points=3, targets="evaluate", visibility="visible")
def test_evaluate_averages_over_samples(sub, evidence):
    """evaluate averages the loss and the accuracy over samples (a short last batch weighs less)"""
    for case in EVAL_VALUES_CASES:
        verify_evaluate_values(sub, case, evidence)


@check(points=3, targets="evaluate", visibility="visible")
def test_evaluate_eval_mode_without_grad(sub, evidence):
    """evaluate runs in eval mode without gradients and restores training mode"""
    verify_evaluate_modes(sub, EVAL_MODE_CASE, evidence)


@check(points=3, targets="fit", visibility="visible")
def test_fit_history_and_scheduler(sub, evidence):
    """fit returns one history entry per epoch and steps the scheduler once per epoch"""
    verify_fit(sub, FIT_SCHEDULER_CASE, evidence)


@check(points=3, targets="fit", visibility="visible")
def test_fit_early_stopping_restores_best(sub, evidence):
    """fit stops after `patience` epochs without a better val_loss and restores the best weights"""
    verify_fit(sub, FIT_EARLY_STOP_CASE, evidence)


@check(points=3, targets="train_accumulated", visibility="visible")
def test_train_accumulated_matches_big_batches(sub, evidence):
    """train_accumulated steps like one step per accum_steps batches, remainder included"""
    verify_accumulated(sub, ACCUM_CASE, evidence)


@check(points=3, targets=["save_checkpoint", "load_checkpoint"], visibility="visible")
def test_checkpoint_resumes_sgd_momentum(sub, evidence):
    """save, load into fresh objects, train on: same weights as uninterrupted (SGD momentum)"""
    verify_checkpoint(sub, CHECKPOINT_CASE, evidence)


@check(points=2, targets="set_seed", visibility="visible")
def test_set_seed_makes_runs_identical(sub, evidence):
    """the same seed gives bit-identical weights twice"""
    runs, draws, call = seeded_runs(sub, [5, 5])
    unseeded = [name for name in ("random", "numpy", "torch") if draws[0][name] != draws[1][name]]
    evidence["unseeded_generators"] = unseeded
    same = all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    if unseeded or not same:
        names = {"random": "Python's random", "numpy": "numpy's global generator (np.random)",
                 "torch": "torch"}
        which = (" Not seeded: " + ", ".join(names[n] for n in unseeded) + " (right after "
                 "set_seed(5) it gave different numbers in the two runs).") if unseeded else ""
        fail(f"{call}: the two runs ended with different weights.{which}", call=call,
             expected="bit-identical weights", got="different weights", hint=SEED_HINT)


@check(points=3, targets="train_classifier", visibility="visible", timeout=60)
def test_train_classifier_accuracy(sub, evidence):
    """train_classifier reaches 95 % test accuracy on ten Gaussian classes"""
    classifier_check(sub, 1001, evidence)
