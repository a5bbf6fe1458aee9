"""Hidden checks for `training_loops`: other optimizers and loaders, short batches, both
starting modes, patience counted from the best epoch, remainders, Adam checkpoints, and a
held-out classification task."""

import torch

from grader.checks.test_training_loops import (SEED_HINT, classifier_check, fit_case,
                                               seeded_runs, verify_accumulated,
                                               verify_checkpoint, verify_evaluate_modes,
                                               verify_evaluate_values, verify_fit,
                                               verify_train_epoch_loss, verify_train_epoch_steps)
from grader.checks.training_loops_cases import (AccumulatedCase, CheckpointCase, EvaluateCase,
                                                TrainEpochCase, batches_with_a_hard_tail,
                                                initial_state, toy_batches)
from grader.checking.compare import fail
from grader.course.registry import check

# Adam through a DataLoader (batch size 8 over 27 samples: a short last batch of 3), a model
# handed over in eval mode, a label-smoothed loss.
EPOCH_CASE = TrainEpochCase(model="mlp_bn", sizes=[5, 12, 4], seed=111,
                            batches=toy_batches(112, [8, 8, 8, 3], 5, 4), loader="dataloader",
                            optimizer={"name": "adam", "lr": 0.01},
                            loss="cross_entropy_smoothed", start_mode="eval")

EVAL_MODE_CASES = [
    EvaluateCase(model="mlp_bn_dropout", sizes=[5, 12, 4], seed=121, start_mode=mode,
                 batches=toy_batches(122, [7, 7, 7, 2], 5, 4), loader="dataloader")
    for mode in ("eval", "train")]
_EVAL_STATE = initial_state("mlp", [5, 12, 4], 123)
EVAL_LOSS_CASE = EvaluateCase(model="mlp", sizes=[5, 12, 4], seed=123, loader="dataloader",
                              loss="cross_entropy_smoothed", start_mode="eval",
                              batches=batches_with_a_hard_tail("mlp", [5, 12, 4], _EVAL_STATE,
                                                               124, [9, 9, 9, 4]))

# A one-epoch dip after the best: validation loss (measured) 0.684 0.650 0.632 0.650 0.695
# 0.672 0.724 ...: best at epoch 3; epoch 6 runs at -0.5x the learning rate (gradient ascent
# for one epoch), so its loss falls below epoch 5's but stays 6 % above the best. Counting from
# the best, patience 3 stops after epoch 6; counting rises from the previous epoch would not.
FIT_PATIENCE_CASE = fit_case(6, epochs=10, patience=3,
                             scheduler={"name": "factors", "factors": [1, 1, 1, 1, 1, -0.5]})
# Epochs at learning rate 0 (factor 0) repeat the previous val_loss exactly: 0.6967 0.6967
# 0.5151 0.5151 0.5151 0.5151: a tie is not a new best, and the count restarts at the new best
# of epoch 3, so patience 3 stops after epoch 6. Counting a tie as a best runs all 10 epochs;
# never resetting the count stops after epoch 5.
FIT_TIES_CASE = fit_case(12, flip=0.0, lr=0.4, epochs=10, patience=3,
                         scheduler={"name": "factors", "factors": [1, 0, 1, 0, 0, 0]})
# No patience, defaults for scheduler and patience: all 7 epochs run, the best (epoch 4 of
# 0.653 0.611 0.576 0.562 0.577 0.611 0.652, 2.4 % margin) is restored at the end.
FIT_NO_PATIENCE_CASE = fit_case(9, epochs=7, pass_scheduler=False, pass_patience=False)
# The same with BatchNorm: the best epoch's state includes its running statistics (val loss
# 0.652 0.616 0.603 0.622 0.709 0.687 0.810, best epoch 3, 2.2 % margin); restoring the
# parameters alone leaves the last epoch's statistics in place.
FIT_BATCHNORM_CASE = fit_case(9, model="mlp_bn", epochs=7, pass_scheduler=False,
                              pass_patience=False)

ACCUM_CASES = [
    AccumulatedCase(model="mlp", sizes=[5, 10, 3], seed=131, loader="dataloader",
                    batches=toy_batches(132, [6] * 6, 5, 3), accum_steps=2,
                    optimizer={"name": "sgd", "lr": 0.2, "momentum": 0.9}),
    AccumulatedCase(model="mlp", sizes=[5, 10, 3], seed=133,
                    batches=toy_batches(134, [4] * 5, 5, 3), accum_steps=5,
                    optimizer={"name": "sgd", "lr": 0.3}),
    AccumulatedCase(model="mlp", sizes=[5, 10, 3], seed=135,
                    batches=toy_batches(136, [4] * 5, 5, 3), accum_steps=4,
                    optimizer={"name": "sgd", "lr": 0.3}),
    AccumulatedCase(model="mlp", sizes=[5, 10, 3], seed=137,
                    batches=toy_batches(138, [4] * 3, 5, 3), accum_steps=1,
                    optimizer={"name": "sgd", "lr": 0.3}),
]

CHECKPOINT_CASE = CheckpointCase(model="mlp_bn", sizes=[5, 12, 3], seed=141, fresh_seed=142,
                                 batches=toy_batches(143, [8] * 4, 5, 3), epoch=12,
                                 optimizer={"name": "adam", "lr": 0.02}, decayed_lr=0.005)


@check(points=2, targets="train_epoch")
def test_train_epoch_adam_dataloader_short_batch(sub, evidence):
    """train_epoch works with Adam, a DataLoader with a short last batch, any starting mode"""
    verify_train_epoch_steps(sub, EPOCH_CASE, evidence)
    verify_train_epoch_loss(sub, EPOCH_CASE, evidence)


@check(points=2, targets="evaluate")
def test_evaluate_restores_mode_and_leaves_model_unchanged(sub, evidence):
    """evaluate leaves the model as it found it: same mode, same weights and buffers"""
    for case in EVAL_MODE_CASES:
        verify_evaluate_modes(sub, case, evidence, check_forwards=False, check_values=False,
                              check_state=True)


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
