"""The hidden checks' cases of the bug hunt `bughunt_pipeline` (bughunt/pipeline.py): the harness
the grader trains with and what it asks `run(seed=0)` to record. Never shipped (a `_hidden`
module: `checks/README.md`)."""

from __future__ import annotations

import torch

from bughunt_common import reference, TrainCase, batches
from bughunt_pipeline_cases import CONTRACT
from bughunt_visible import run_record
from grader.checking.bughunt_e2e import EndToEnd


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


# --------------------------------------------------------------------------- end to end
# The student's own run(seed=0), watched in the same run the visible checks make
# (`grader.checking.bughunt_e2e`). Every fifth reading validates (split: arange(n) % 5 == 0).
# The training loader drops its last incomplete batch (drop_last=True): a pass may leave up
# to BATCH_SIZE - 1 samples out.
# Tolerance (measured 2026-12-07, validation accuracy of the model run(seed=0) returns, 121
# readings, one reading = 0.0083): the fixed script 0.934; its 11 correct styles at seed 0
# 0.926 .. 0.942, over seeds 0-4 at most 0.017 below the reference of the same seed. Wrong
# runs: always the most common state 0.372, labels shuffled apart from the readings 0.32,
# grad not zeroed 0.653, unshuffled sorted data 0.496, a layer created in forward 0.265.
# Allowed: 0.08 below (about 5x the spread).
END_TO_END = EndToEnd(
    exercise="bughunt_pipeline", record=lambda sub: run_record(sub, CONTRACT),
    data=lambda: reference("pipeline").load_readings(0), val=tuple(range(0, 602, 5)),
    metric="accuracy", reference=0.9338842975206612, tolerance=0.08, parameters=387,
    frozen=0, slack=31,
    call="run(seed=0)  # the whole script, with the grader watching its train(...) and loaders")
