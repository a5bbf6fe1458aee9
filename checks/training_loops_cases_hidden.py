"""The hidden `training_loops` checks' cases: other optimizers and loaders, short batches, both
starting modes, patience counted from the best epoch, remainders, Adam checkpoints. Never
shipped (a `_hidden` module: `checks/README.md`)."""

from __future__ import annotations

from training_loops_cases import (AccumulatedCase, CheckpointCase, EvaluateCase,
                                                TrainEpochCase, batches_with_a_hard_tail,
                                                fit_case, initial_state, toy_batches)


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
                    optimizer={"name": "sgd", "lr": 0.3}, start_mode="eval"),
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
