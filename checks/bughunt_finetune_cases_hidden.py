"""The hidden checks' cases of the bug hunt `bughunt_finetune` (bughunt/finetune.py): the harness
the grader trains with and what it asks `run(seed=0)` to record. Never shipped (a `_hidden`
module: `checks/README.md`)."""

from __future__ import annotations

from bughunt_common import reference, TrainCase, batches
from bughunt_finetune_cases import CONTRACT
from bughunt_visible import run_record
from grader.checking.bughunt_e2e import EndToEnd


TRAIN = TrainCase(
    own_model=["PretrainedNet", [12, 3]],
    model="two_heads", sizes=[12, 8, 3], seed=61,
    train_batches=batches(62, [8, 8, 8, 8], (12,), 3, score=True),
    val_batches=batches(63, [8, 8], (12,), 3, score=True),
    arguments={"model": "$model", "train_loader": "$train_loader", "val_loader": "$val_loader",
               "optimizer": "$optimizer", "epochs": 3},
    epochs=3, optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9},
    history_keys=("train_loss", "val_loss", "val_accuracy"),
    call="train(model, train_loader, val_loader, optimizer, epochs=3)  # a small two-headed "
         "network, 4 training and 2 validation batches of 8 (x, y, s), SGD(lr=0.05, "
         "momentum=0.9)")
HARNESS = batches(64, [16, 16, 16], (12,), 3, score=True)
SETUP = dict(seed=0, harness_batches=HARNESS, harness_loss="two_heads", graph_batch=HARNESS[0])
SETUP_CALL = "run(seed=0)  # what run() hands to train(...)"
STEPS_CALL = ("run(seed=0), then 3 training steps of the model it builds, with the optimizer "
              "it builds, on the grader's batches")
LR_THRESHOLD = 0.6  # the reference ends near 0.07; lr 0.005 at 0.33, lr >= 0.2 above 1.3
FROZEN, TUNED = "encoder.0.", "encoder.2."
# Besides the new class head (test_new_head_is_trained), what the contract fine-tunes.
FINE_TUNED = ("encoder.2.", "score_head.")

# Batches of one size: the contract pins what evaluate returns (the two-head loss and the
# accuracy of the loader's samples), not how batch means are weighed (run's loader has one).
EVAL_BATCHES = batches(66, [8, 8, 8], (12,), 3, score=True)
EVAL_CALL = ("evaluate(model, loader)  # a small two-headed network, a loader of 3 batches of 8 "
             "(x, y, s)")


# --------------------------------------------------------------------------- end to end
# The student's own run(seed=0), watched in the same run the visible checks make
# (`grader.checking.bughunt_e2e`). The first 320 samples train, the last 80 validate (the
# contract of run()).
# Tolerance (measured 2026-12-07, validation accuracy of the model run(seed=0) returns, 80
# samples, one sample = 0.0125): the fixed script 0.9375; its 10 correct styles at seed 0 all
# 0.9375, over seeds 0-4 at most 0.012 away from the reference of the same seed. Wrong runs:
# most common class 0.51, grad not zeroed / lr too high 0.2625, old head in the optimizer
# 0.675, class logits detached 0.1625. Allowed: 0.08 below (over 6x the spread).
# Parameters: the adapted network has 2324 elements; the frozen first encoder layer 576 + 48.
END_TO_END = EndToEnd(
    exercise="bughunt_finetune", record=lambda sub: run_record(sub, CONTRACT),
    data=lambda: reference("finetune").make_task(0)[:2], val=tuple(range(320, 400)),
    metric="accuracy", reference=0.9375, tolerance=0.08, parameters=2324,
    frozen=624, slack=0,
    call="run(seed=0)  # the whole script, with the grader watching its train(...) and loaders")
