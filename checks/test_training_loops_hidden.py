"""Hidden checks for `training_loops`: other optimizers and loaders, short batches, both
starting modes, patience counted from the best epoch, remainders, Adam checkpoints, and a
held-out classification task."""

import torch

from training_loops_cases_hidden import (ACCUM_CASES, CHECKPOINT_CASE, EPOCH_CASE,
                                                       EVAL_LOSS_CASE, EVAL_MODE_CASES,
                                                       FIT_BATCHNORM_CASE, FIT_NO_PATIENCE_CASE,
                                                       FIT_PATIENCE_CASE, FIT_TIES_CASE)
from training_loops_verify import (SEED_HINT, classifier_check, seeded_runs,
                                                 verify_accumulated, verify_checkpoint,
                                                 verify_evaluate_modes, verify_evaluate_values,
                                                 verify_fit, verify_train_epoch_loss,
                                                 verify_train_epoch_steps)
from grader import check, fail


@check(points=2, targets="train_epoch")
def test_train_epoch_adam_dataloader_short_batch(sub, evidence):
    """train_epoch works with Adam, a DataLoader with a short last batch, any starting mode"""
    verify_train_epoch_steps(sub, EPOCH_CASE, evidence)
    verify_train_epoch_loss(sub, EPOCH_CASE, evidence)


@check(points=2, targets="evaluate")
def test_evaluate_restores_mode_and_leaves_model_unchanged(sub, evidence):
    """evaluate leaves the model as it found it: same mode, same weights and buffers"""
    # And that its metrics come from the model: one that runs the model once, restores its
    # mode and returns made-up numbers leaves it alone as well.
    for case in EVAL_MODE_CASES:
        verify_evaluate_modes(sub, case, evidence, check_forwards=False, check_values=False,
                              check_state=True, check_made=True)


@check(points=1, targets="evaluate")
def test_evaluate_uses_the_given_loss(sub, evidence):
    """evaluate uses the loss_fn it is given (label smoothing here) and weighs samples"""
    verify_evaluate_values(sub, EVAL_LOSS_CASE, evidence)


@check(points=2, targets="fit")
def test_fit_patience_counts_from_the_best_epoch(sub, evidence):
    """fit counts epochs without a new best val_loss (a tie is none), from the latest best"""
    verify_fit(sub, FIT_PATIENCE_CASE, evidence)
    verify_fit(sub, FIT_TIES_CASE, evidence)


@check(points=2, targets="fit")
def test_fit_without_patience_restores_best(sub, evidence):
    """fit with the default scheduler and patience runs every epoch and restores the best"""
    verify_fit(sub, FIT_NO_PATIENCE_CASE, evidence)
    verify_fit(sub, FIT_BATCHNORM_CASE, evidence)


@check(points=2, targets="train_accumulated")
def test_train_accumulated_remainders_and_momentum(sub, evidence):
    """train_accumulated with momentum, a DataLoader, accum_steps 1, a single step, remainders"""
    for case in ACCUM_CASES:
        verify_accumulated(sub, case, evidence)


@check(points=2, targets=["save_checkpoint", "load_checkpoint"])
def test_checkpoint_resumes_adam_and_batchnorm(sub, evidence):
    """checkpoints keep Adam's moments and learning rate, and BatchNorm's running statistics"""
    verify_checkpoint(sub, CHECKPOINT_CASE, evidence)


@check(points=1, targets="set_seed")
def test_set_seed_different_seeds_differ(sub, evidence):
    """different seeds give different runs, the same seed the same run"""
    runs, draws, call = seeded_runs(sub, [7, 8, 7])
    # Each generator on its own: a constant seed for one of them (torch.manual_seed(42)) hides
    # behind the others in the runs' weights.
    names = {"random": "Python's random", "numpy": "numpy's", "torch": "torch's"}
    for name, label in names.items():
        if draws[0][name] == draws[1][name]:
            fail(f"{call}: after set_seed(7) and after set_seed(8), {label} generator gave the "
                 f"same numbers {draws[0][name]}: set_seed must pass its seed to every "
                 "generator.", call=call, expected="different numbers", got="the same numbers",
                 hint=SEED_HINT)
    differ = not all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    again = all(torch.equal(runs[0][k], runs[2][k]) for k in runs[0])
    evidence["seeds_differ"], evidence["seed_repeats"] = differ, again
    if not differ:
        fail(f"{call}: set_seed(7) and set_seed(8) gave bit-identical runs: the seed argument "
             "must be passed on to every generator.", call=call,
             expected="different weights", got="identical weights", hint=SEED_HINT)
    if not again:
        fail(f"{call}: set_seed(7) twice gave different runs.", call=call,
             expected="identical weights", got="different weights", hint=SEED_HINT)


@check(points=5, targets="train_classifier", timeout=60)
def test_train_classifier_heldout_accuracy(sub, evidence):
    """train_classifier reaches 95 % on a held-out task of the same kind"""
    classifier_check(sub, 2002, evidence)
