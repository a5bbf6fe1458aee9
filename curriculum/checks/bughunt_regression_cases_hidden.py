"""The hidden checks' cases of the bug hunt `bughunt_regression` (bughunt/regression.py): the
harness the grader trains with and what it asks `run(seed=0)` to record. Never shipped (a
`_hidden` module: `curriculum/README.md`)."""

from __future__ import annotations

from bughunt_common import TrainCase, batches


TRAIN = TrainCase(
    own_model=["PriceNet", [4, 8]],
    model="mlp", sizes=[4, 8, 1], seed=11,
    train_batches=batches(12, [8, 8, 8, 8], (4,), None),
    val_batches=batches(13, [8, 8], (4,), None),
    arguments={"model": "$model", "train_loader": "$train_loader", "val_loader": "$val_loader",
               "loss_fn": "$column_mse", "lr": 0.05, "epochs": 3},
    epochs=3, update="sgd_step",
    call="train(model, train_loader, val_loader, loss_fn, lr=0.05, epochs=3)  # a small "
         "network, 4 training and 2 validation batches of 8, the grader's mean squared error")
SETUP = dict(seed=0, first_layer=True)
SETUP_CALL = "run(seed=0)  # what run() hands to train(...)"
LR_THRESHOLD = 0.25  # the reference ends near 0.028; lr 0.005 at 0.21, lr >= 0.2 diverges


EVAL_BATCHES = batches(14, [8, 8, 3], (4,), None)
EVAL_CALL = ("evaluate(model, loader, loss_fn)  # a small network, a loader of 3 batches of 8, 8 "
             "and 3 samples")
