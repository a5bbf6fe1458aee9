"""The hidden checks' cases of the bug hunt `bughunt_classifier` (bughunt/classifier.py): the
harness the grader trains with and what it asks `run(seed=0)` to record. Never shipped (a
`_hidden` module: `curriculum/README.md`)."""

from __future__ import annotations

from typing import Any

import torch

from bughunt_common import TrainCase, batches


TRAIN = TrainCase(
    own_model=["ShapeNet", [4]],
    model="image_mlp", sizes=[64, 16, 4], seed=51,
    train_batches=batches(52, [8, 8, 8, 8], (1, 8, 8), 4),
    val_batches=batches(53, [8, 8], (1, 8, 8), 4),
    arguments={"model": "$model", "train_loader": "$train_loader", "val_loader": "$val_loader",
               "optimizer": "$optimizer", "scheduler": "$scheduler", "loss_fn": "$loss_fn",
               "epochs": 3},
    epochs=3, optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9},
    scheduler={"name": "step", "step_size": 1, "gamma": 0.5}, loss="cross_entropy",
    history_keys=("train_loss", "val_loss", "val_accuracy", "lr"),
    call="train(model, train_loader, val_loader, optimizer, scheduler, loss_fn, epochs=3)  # a "
         "small network with BatchNorm and dropout, 4 training and 2 validation batches of 8 "
         "images, SGD(lr=0.05, momentum=0.9), StepLR(step_size=1, gamma=0.5), "
         "nn.CrossEntropyLoss()")
PROBE_IMAGES = torch.randn(16, 1, 8, 8, generator=torch.Generator().manual_seed(54))
PROBE_LABELS = torch.arange(16) % 4
SETUP: dict[str, Any] = dict(seed=0, first_loss=True,
                             logits_batch=[PROBE_IMAGES, PROBE_LABELS], schedule_epochs=8)
SETUP_CALL = "run(seed=0)  # what run() hands to train(...)"


EVAL_BATCHES = batches(55, [8, 8, 3], (1, 8, 8), 4)
EVAL_CALL = ("evaluate(model, loader, loss_fn)  # a small network, a loader of 3 batches of 8, 8 "
             "and 3 samples")
