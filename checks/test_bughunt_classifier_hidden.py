"""Hidden checks for the bug hunt `bughunt_classifier` (bughunt/classifier.py).

One check per behaviour a seeded fault breaks (faults.toml says which check scores which
fault); checks of faults the student's copy does not hold still run and count only if they
fail. See `bughunt_common.py` for how each is judged.
"""

from __future__ import annotations

from collections import Counter

import torch

from bughunt_classifier_cases_hidden import (EVAL_BATCHES, EVAL_CALL, PROBE_IMAGES,
                                                           PROBE_LABELS, SETUP, SETUP_CALL, TRAIN)
from bughunt_classifier_verify_hidden import verify_run_schedule
from bughunt_common import (REVEAL, TIMEOUT, fail, reference, setup_record,
                                          verify_dropout, verify_evaluate_over_samples,
                                          verify_fresh_gradients, verify_history, verify_labels,
                                          verify_log, verify_logits, verify_loss_input,
                                          verify_mixed_batches, verify_registration,
                                          verify_schedule, verify_training_mode,
                                          verify_validation_graph, verify_validation_mode)
from grader import check
from bughunt_classifier_cases_hidden import END_TO_END
from grader.checking.bughunt_e2e import (verify_outcome, verify_pairing, verify_parameters_learn,
                                         verify_split)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_steps_use_fresh_gradients(sub, evidence):
    """Every update uses the gradient of its own batch"""
    verify_fresh_gradients(sub, TRAIN, evidence)


@check(points=2, targets=["train", "run"], timeout=TIMEOUT, reveal=REVEAL)
def test_scheduler_per_epoch(sub, evidence):
    """The learning rate follows the schedule epoch by epoch"""
    verify_schedule(sub, TRAIN, evidence)
    verify_run_schedule(setup_record(sub, SETUP_CALL, **SETUP), evidence)


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
    """train returns its history as Python floats, each loss the mean of its batches'"""
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


@check(points=2, targets="evaluate", timeout=TIMEOUT, reveal=REVEAL)
def test_evaluate_averages_over_samples(sub, evidence):
    """evaluate averages over the samples, not over the batches"""
    verify_evaluate_over_samples(sub, TRAIN, EVAL_BATCHES, "cross_entropy", EVAL_CALL, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_every_parameter_learns(sub, evidence):
    """Every parameter of the network run() trains gets a gradient and moves (frozen ones stay)"""
    verify_parameters_learn(sub, END_TO_END, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_splits_are_the_contracts(sub, evidence):
    """run() trains on the training samples and validates on the validation samples, never on both"""  # noqa: E501 - a check's title is its docstring
    verify_split(sub, END_TO_END, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_samples_keep_their_labels(sub, evidence):
    """Every sample run() trains and validates on comes with its own label"""
    verify_pairing(sub, END_TO_END, evidence)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_run_learns_like_the_fixed_script(sub, evidence):
    """run() learns as well as the fixed script does on the same seed and data"""
    verify_outcome(sub, END_TO_END, evidence)
