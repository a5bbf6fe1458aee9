"""Hidden checks for the bug hunt `bughunt_classifier` (bughunt/classifier.py).

One check per behaviour a seeded fault breaks (faults.toml says which check scores which
fault); checks of faults the student's copy does not hold still run and count only if they
fail. See `bughunt_common.py` for how each is judged.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

from grader.checks.bughunt_common import (verify_evaluate_over_samples, REVEAL, TIMEOUT, TrainCase,
                                          batches, fail, reference, rounded, setup_record,
                                          verify_dropout, verify_fresh_gradients,
                                          verify_history, verify_labels, verify_log,
                                          verify_logits, verify_loss_input,
                                          verify_mixed_batches, verify_registration,
                                          verify_schedule, verify_training_mode,
                                          verify_validation_graph, verify_validation_mode)
from grader.course.registry import check

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


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_steps_use_fresh_gradients(sub, evidence):
    """Every update uses the gradient of its own batch"""
    verify_fresh_gradients(sub, TRAIN, evidence)


@check(points=2, targets=["train", "run"], timeout=TIMEOUT, reveal=REVEAL)
def test_scheduler_per_epoch(sub, evidence):
    """The learning rate follows the schedule epoch by epoch"""
    verify_schedule(sub, TRAIN, evidence)
    verify_run_schedule(setup_record(sub, SETUP_CALL, **SETUP), evidence)


def verify_run_schedule(record: dict, evidence: dict) -> None:
    """The optimizer and scheduler run() builds give, stepped once per epoch, the fixed
    script's learning rate for every epoch (LR halved every STEP_SIZE epochs)."""
    ref = reference("classifier")
    epochs = SETUP["schedule_epochs"]
    want = [ref.LR * 0.5 ** (e // ref.STEP_SIZE) for e in range(epochs)]
    schedule = record.get("schedule") or {}
    call = (f"{SETUP_CALL}: the optimizer and scheduler it builds, the scheduler stepped once "
            "per epoch")
    if schedule.get("error"):
        fail(f"{call}: {schedule['error']}", call=call)
    got = [max(lrs) for lrs in schedule.get("lrs", [])]
    evidence.update(run_lr_per_epoch=rounded(got, 8), run_expected_lr_per_epoch=rounded(want, 8))
    if len(got) != len(want) or not all(math.isclose(a, b, rel_tol=1e-6)
                                        for a, b in zip(got, want)):
        fail(f"{call}: the learning rate per epoch is {rounded(got, 6)}; the script's schedule "
             f"(lr {ref.LR} halved every {ref.STEP_SIZE} epochs) gives {rounded(want, 6)}.",
             call=call, expected=str(rounded(want, 6)), got=str(rounded(got, 6)))


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_in_eval_mode(sub, evidence):
    """Validation runs with the model in eval mode"""
    verify_validation_mode(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_without_graph(sub, evidence):
    """Validation runs without building autograd graphs"""
    verify_validation_graph(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_training_mode_restored(sub, evidence):
    """Every training batch runs with the model in training mode"""
    verify_training_mode(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_history_holds_floats(sub, evidence):
    """train returns its history as Python floats"""
    verify_history(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_log_prints_numbers(sub, evidence):
    """The log prints one line of numbers per epoch"""
    verify_log(sub, TRAIN, evidence)


@check(points=2, targets=["ShapeNet", "train"], timeout=TIMEOUT, reveal=REVEAL)
def test_outputs_are_logits(sub, evidence):
    """The loss gets raw scores (logits), as nn.CrossEntropyLoss expects"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    verify_logits(record, PROBE_LABELS, SETUP_CALL, evidence)
    verify_loss_input(sub, TRAIN, evidence)


@check(points=2, targets="ShapeNet", timeout=TIMEOUT, reveal=REVEAL)
def test_parameters_registered(sub, evidence):
    """ShapeNet registers every layer it uses"""
    expected = sum(p.numel() for p in reference("classifier").ShapeNet().parameters())
    verify_registration(sub, "ShapeNet", [], PROBE_IMAGES, expected, evidence)


@check(points=2, targets="ShapeNet", timeout=TIMEOUT, reveal=REVEAL)
def test_dropout_off_in_eval(sub, evidence):
    """ShapeNet drops units in training mode only"""
    verify_dropout(sub, "ShapeNet", [], PROBE_IMAGES, evidence)


@check(points=2, targets=["make_loaders", "train"], timeout=TIMEOUT, reveal=REVEAL)
def test_labels_are_class_indices(sub, evidence):
    """The loss receives the labels as class indices"""
    verify_labels(setup_record(sub, SETUP_CALL, **SETUP), SETUP_CALL, evidence)


@check(points=2, targets="make_loaders", timeout=TIMEOUT, reveal=REVEAL)
def test_training_batches_mixed(sub, evidence):
    """Training batches mix the classes"""
    verify_mixed_batches(setup_record(sub, SETUP_CALL, **SETUP), SETUP_CALL, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_validates_on_the_validation_split(sub, evidence):
    """run() validates on the validation split"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    ref = reference("classifier")
    with torch.random.fork_rng(devices=[]):
        y_val = ref.split(*ref.make_images(seed=0))[3]
    want = Counter(float(v) for v in y_val.tolist())
    passes = (record.get("val_loader") or {}).get("passes") or [[]]
    got = Counter(v for b in passes[0] for v in b.get("labels", []))
    evidence.update(val_samples=sum(got.values()), expected_val_samples=len(y_val))
    # Recognised by value: the labels of one pass over the loader run() hands to train as
    # val_loader are those of the validation split (every fifth image), whatever the batches.
    if got != want:
        fail(f"{SETUP_CALL}: the loader handed to train as val_loader yields "
             f"{sum(got.values())} samples whose labels are not those of the validation split "
             f"({len(y_val)} images, every fifth): the validation numbers do not measure "
             "images the model never trained on.", call=SETUP_CALL,
             expected=f"the {len(y_val)} validation images", got=f"{sum(got.values())} others")


EVAL_BATCHES = batches(55, [8, 8, 3], (1, 8, 8), 4)
EVAL_CALL = ("evaluate(model, loader, loss_fn)  # a small network, a loader of 3 batches of 8, 8 "
             "and 3 samples")


@check(points=2, targets="evaluate", timeout=TIMEOUT, reveal=REVEAL)
def test_evaluate_averages_over_samples(sub, evidence):
    """evaluate averages over the samples, not over the batches"""
    verify_evaluate_over_samples(sub, TRAIN, EVAL_BATCHES, "cross_entropy", EVAL_CALL, evidence)
