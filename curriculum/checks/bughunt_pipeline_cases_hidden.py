"""The hidden checks' cases of the bug hunt `bughunt_pipeline` (bughunt/pipeline.py): the harness
the grader trains with and what it asks `run(seed=0)` to record. Never shipped (a `_hidden`
module: `curriculum/README.md`)."""

from __future__ import annotations

import torch

from bughunt_common import TrainCase, batches


TRAIN = TrainCase(
    own_model=["SensorNet", [6, 3, 8]],
    model="tabular", sizes=[6, 8, 3], seed=71,
    train_batches=batches(72, [8, 8, 8, 8], (6,), 3),
    val_batches=batches(73, [8, 8], (6,), 3),
    arguments={"model": "$model", "train_loader": "$train_loader", "val_loader": "$val_loader",
               "optimizer": "$optimizer", "loss_fn": "$loss_fn", "epochs": 3},
    epochs=3, optimizer={"name": "adam", "lr": 0.01}, loss="cross_entropy",
    history_keys=("train_loss", "val_loss", "val_accuracy"),
    call="train(model, train_loader, val_loader, optimizer, loss_fn, epochs=3)  # a small "
         "network with BatchNorm and dropout, 4 training and 2 validation batches of 8, "
         "Adam(lr=0.01), nn.CrossEntropyLoss()")
PROBE_X = torch.randn(16, 6, generator=torch.Generator().manual_seed(74))
PROBE_LABELS = torch.arange(16) % 3
SETUP = dict(seed=0, first_layer=True, first_loss=True, logits_batch=[PROBE_X, PROBE_LABELS])
SETUP_CALL = "run(seed=0)  # what run() hands to train(...)"


EVAL_BATCHES = batches(75, [8, 8, 3], (6,), 3)
EVAL_CALL = ("evaluate(model, loader, loss_fn)  # a small network with BatchNorm and dropout, "
             "a loader of 3 batches of 8, 8 and 3 samples")
