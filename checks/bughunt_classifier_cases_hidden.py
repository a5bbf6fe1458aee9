"""The hidden checks' cases of the bug hunt `bughunt_classifier` (bughunt/classifier.py): the
harness the grader trains with and what it asks `run(seed=0)` to record. Never shipped (a
`_hidden` module: `checks/README.md`)."""

from __future__ import annotations

from typing import Any

import torch

from bughunt_common import reference, TrainCase, batches
from bughunt_classifier_cases import CONTRACT
from bughunt_visible import run_record
from grader.checking.bughunt_e2e import EndToEnd


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


# --------------------------------------------------------------------------- end to end
# The student's own run(seed=0), watched in the same run the visible checks make
# (`grader.checking.bughunt_e2e`).
# Every fifth image validates (split: arange(n) % 5 == 0).
# Tolerance (measured 2026-12-07, validation accuracy of the model run(seed=0) returns, 96
# images, one image = 0.0104): the fixed script 0.979; its 13 correct styles at seed 0 all
# 0.979, over seeds 0-4 at most 0.021 below the reference of the same seed. Wrong runs:
# chance 0.25, grad not zeroed 0.365, unshuffled sorted data 0.271, scheduler per batch 0.760,
# layers in a plain list 0.688, no BatchNorm 0.865. Allowed: 0.08 below (about 4x the spread).
END_TO_END = EndToEnd(
    exercise="bughunt_classifier", record=lambda sub: run_record(sub, CONTRACT),
    data=lambda: reference("classifier").make_images(seed=0), val=tuple(range(0, 480, 5)),
    metric="accuracy", reference=0.9791666666666666, tolerance=0.08, parameters=1556,
    frozen=0, slack=0,
    call="run(seed=0)  # the whole script, with the grader watching its train(...) and loaders")
