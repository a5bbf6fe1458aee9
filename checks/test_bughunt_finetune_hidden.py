"""Hidden checks for the bug hunt `bughunt_finetune` (bughunt/finetune.py).

One check per behaviour a seeded fault breaks (faults.toml says which check scores which
fault); checks of faults the student's copy does not hold still run and count only if they
fail. The model, optimizer and freezing that run() builds are judged from the outside: a few
training steps of that model (through its documented parts .encoder, .head, .score_head, so
that whatever forward() does cannot hide them) with that optimizer on the grader's batches;
forward() itself is judged by the gradients a loss of it gives. See `bughunt_common.py`.
"""

from __future__ import annotations

from collections import Counter

import torch

from bughunt_common import (REVEAL, TIMEOUT, fail, optimizer_settings, reference,
                                          setup_record, verify_evaluate_over_samples,
                                          verify_fresh_gradients, verify_history,
                                          verify_log, verify_lr_trains, verify_registration,
                                          verify_training_mode, verify_validation_graph,
                                          verify_validation_mode)
from bughunt_finetune_cases_hidden import (EVAL_BATCHES, EVAL_CALL, FINE_TUNED, FROZEN,
                                                         LR_THRESHOLD, SETUP, SETUP_CALL,
                                                         STEPS_CALL, TRAIN, TUNED)
from bughunt_finetune_verify_hidden import (harness, reference_curve,
                                                          verify_group_rates)
from grader import check
from bughunt_finetune_cases_hidden import END_TO_END
from grader.checking.bughunt_e2e import (verify_outcome, verify_pairing, verify_parameters_learn,
                                         verify_split)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_steps_use_fresh_gradients(sub, evidence):
    """Every update uses the gradient of its own batch's loss"""
    verify_fresh_gradients(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_without_graph(sub, evidence):
    """Validation runs without building autograd graphs"""
    verify_validation_graph(sub, TRAIN, evidence)


@check(points=2, targets=["train", "evaluate"], timeout=TIMEOUT, reveal=REVEAL)
def test_validation_in_eval_mode(sub, evidence):
    """Validation runs with the model in eval mode"""
    verify_validation_mode(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_training_mode_restored(sub, evidence):
    """Every training batch runs with the model in training mode"""
    verify_training_mode(sub, TRAIN, evidence)


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_history_holds_floats(sub, evidence):
    """train returns its history as Python floats, each loss the mean of its batches'"""
    verify_history(sub, TRAIN, evidence)


@check(points=2, targets="evaluate", timeout=TIMEOUT, reveal=REVEAL)
def test_evaluate_returns_the_mean_loss_and_accuracy(sub, evidence):
    """evaluate returns the mean two-head loss and the accuracy over the loader's samples"""
    verify_evaluate_over_samples(sub, TRAIN, EVAL_BATCHES, "two_heads", EVAL_CALL, evidence,
                                 score_weight=reference("finetune").SCORE_WEIGHT)


@check(points=2, targets="run", timeout=TIMEOUT, reveal=REVEAL)
def test_validates_on_the_validation_split(sub, evidence):
    """run() trains on the first 320 samples and validates on the last 80"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    with torch.random.fork_rng(devices=[]):
        y = reference("finetune").make_task(seed=0)[1]
    y_val = y[320:]
    want = Counter(float(v) for v in y_val.tolist())
    passes = (record.get("val_loader") or {}).get("passes") or [[]]
    got = Counter(v for b in passes[0] for v in b.get("labels", []))
    evidence.update(val_samples=sum(got.values()), expected_val_samples=len(y_val))
    # Recognised by value: the labels of one pass over the loader run() hands to train as
    # val_loader are those of the last 80 samples, whatever the batches or their order.
    if got != want:
        fail(f"{SETUP_CALL}: the loader handed to train as val_loader yields "
             f"{sum(got.values())} samples whose labels are not those of the validation split "
             f"(the last {len(y_val)} samples): the validation numbers do not measure samples "
             "the model never trained on.", call=SETUP_CALL,
             expected=f"the {len(y_val)} validation samples", got=f"{sum(got.values())} others")


@check(points=2, targets="train", timeout=TIMEOUT, reveal=REVEAL)
def test_log_prints_numbers(sub, evidence):
    """The log prints one line of numbers per epoch"""
    verify_log(sub, TRAIN, evidence)


@check(points=2, targets="PretrainedNet", timeout=TIMEOUT, reveal=REVEAL)
def test_parameters_registered(sub, evidence):
    """PretrainedNet registers every layer it uses"""
    expected = sum(p.numel() for p in reference("finetune").PretrainedNet().parameters())
    x = torch.randn(16, 12, generator=torch.Generator().manual_seed(65))
    verify_registration(sub, "PretrainedNet", [], x, expected, evidence)


@check(points=2, targets=["PretrainedNet", "run"], timeout=TIMEOUT, reveal=REVEAL)
def test_trainable_layers_get_gradients(sub, evidence):
    """Every trainable parameter of the fine-tuned model gets a gradient from the loss"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    graph = record.get("graph")
    call = f"{SETUP_CALL}; loss of model(x) on a batch, then loss.backward()"
    if graph is None:
        fail(f"{call}: run() did not hand train a model.", call=call)
    if not graph["loss_requires_grad"]:
        evidence["params_without_grad"] = ["(all)"]
        fail(f"{call}: the loss does not depend on any trainable parameter (it has no "
             "autograd graph), so backward() cannot train anything.", call=call,
             expected="a loss with a graph", got="no graph", evidence=evidence)
    missing = sorted(n for n, g in graph["grads"].items() if not g)
    # Both losses share the encoder: the score's loss alone must reach its trainable part.
    score_grads = graph.get("score_grads", {})
    cut = sorted(f"{n} (from the score loss)" for n, g in score_grads.items()
                 if n.startswith(TUNED) and not g)
    evidence["params_without_grad"] = missing + cut
    if missing:
        fail(f"{call}: after backward() the trainable parameters {missing} have no gradient "
             "(p.grad is None or zero): those layers can never learn.", call=call,
             expected="a gradient for every trainable parameter", got=f"none for {missing}")
    if cut:
        fail(f"{call}: the score's loss alone gives the trainable encoder layer no gradient "
             f"({cut}): the score head's input is cut off from the encoder, so the score loss "
             "no longer fine-tunes the shared encoder.", call=call,
             expected="both losses reach the encoder", got="the score loss does not")
    if not any(n.startswith(TUNED) for n in graph["grads"]):
        fail(f"{call}: the second encoder layer is not trainable any more; the script "
             "fine-tunes it: keep it.", call=call)


@check(points=2, targets=["adapt", "make_optimizer", "run"], timeout=TIMEOUT, reveal=REVEAL)
def test_new_head_is_trained(sub, evidence):
    """The new class head has 3 outputs and the optimizer trains it"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    steps = harness(record)
    foreign = sum(len(g["foreign"]) for g in record["optimizer"].get("groups", []))
    shapes = steps["output_shapes"][0] if steps["output_shapes"] else []
    head = [n for n in steps["before"] if n.startswith("head.")]
    changed = any(not torch.equal(steps["before"][n], steps["after"][n]) for n in head)
    evidence.update(head_changed=changed, optimizer_foreign_parameters=foreign,
                    logits_shape=shapes[0] if shapes else None)
    classes = reference("finetune").N_CLASSES
    if not shapes or len(shapes[0]) != 2 or shapes[0][1] != classes:
        fail(f"{STEPS_CALL}: the class head gives outputs of shape "
             f"{shapes[0] if shapes else None}; the new task has {classes} classes.",
             call=STEPS_CALL, expected=f"(N, {classes})", got=str(shapes[:1]))
    if not head or not changed:
        fail(f"{STEPS_CALL}: the new class head's weights did not change"
             + (f", while the optimizer holds {foreign} tensors that are not parameters of "
                "the model any more" if foreign else "")
             + ": the head the model uses is not being trained.", call=STEPS_CALL,
             expected="the new head trained", got="unchanged")


@check(points=2, targets=["adapt", "run"], timeout=TIMEOUT, reveal=REVEAL)
def test_frozen_layers_stay_frozen(sub, evidence):
    """The first encoder layer stays frozen; the second one and both heads are fine-tuned"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    steps = harness(record)
    frozen = [n for n in steps["before"] if n.startswith(FROZEN)]
    changed = sorted(n for n in frozen if not torch.equal(steps["before"][n],
                                                          steps["after"][n]))
    evidence["frozen_changed"] = changed
    if not frozen:
        fail(f"{STEPS_CALL}: the model has no first encoder layer (encoder.0) any more.",
             call=STEPS_CALL)
    if changed:
        fail(f"{STEPS_CALL}: the pretrained first encoder layer changed ({changed}): it is "
             "meant to stay frozen.", call=STEPS_CALL, expected="encoder.0 unchanged",
             got="changed")
    flags = {p["name"]: p["requires_grad"] for p in record["model"].get("parameters", [])}
    held = {n for g in record["optimizer"].get("groups", []) for n in g["names"]}
    # adapt's contract: the first layer frozen (requires_grad False), not merely left out of
    # the optimizer (its gradients would still be computed, and any other optimizer of the
    # model would train it).
    trainable_frozen = sorted(n for n in flags if n.startswith(FROZEN) and flags[n])
    evidence["frozen_requires_grad"] = trainable_frozen
    if trainable_frozen:
        fail(f"{SETUP_CALL}: after adapt() the first encoder layer still requires gradients "
             f"({trainable_frozen}): adapt is meant to freeze it (requires_grad False), not "
             "only leave it out of the optimizer.", call=SETUP_CALL,
             expected="encoder.0 requires_grad False", got="requires_grad True")
    tuned = [n for n in flags if n.startswith(TUNED)]
    if not tuned or not all(flags[n] and n in held for n in tuned):
        fail(f"{STEPS_CALL}: the second encoder layer (encoder.2) is not trainable, or not in "
             "the optimizer; the script fine-tunes it: keep it.", call=STEPS_CALL,
             expected="encoder.2 trainable", got="frozen")
    # Everything the contract fine-tunes must move in those steps: a freeze that is too broad
    # (a head forgotten when unfreezing, a head left out of the optimizer) fails here.
    stuck = sorted(n for n in steps["before"] if n.startswith(FINE_TUNED)
                   and torch.equal(steps["before"][n], steps["after"][n]))
    # (A head that is not registered at all is parameters_registered's business.)
    evidence["fine_tuned_unchanged"] = stuck
    if stuck:
        fail(f"{STEPS_CALL}: parameters the script fine-tunes did not change in those steps "
             f"({stuck}): frozen, or not in the optimizer. Only the first encoder layer stays "
             "frozen; the second one and both heads train.", call=STEPS_CALL,
             expected="encoder.2 and score_head trained", got=f"unchanged: {stuck[:4]}")


@check(points=2, targets=["make_optimizer", "run"], timeout=TIMEOUT, reveal=REVEAL)
def test_learning_rate_trains(sub, evidence):
    """The script's optimizer settings fine-tune the network without diverging"""
    record = setup_record(sub, SETUP_CALL, **SETUP)
    cls, hyper, text = optimizer_settings(record, SETUP_CALL)
    key = tuple(sorted(hyper.items()))
    verify_lr_trains(lambda: list(reference_curve(cls.__name__, key)), text, SETUP_CALL,
                     evidence, LR_THRESHOLD, lr=hyper.get("lr"),
                     reference_lr=reference("finetune").LR)
    verify_group_rates(record, evidence)


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
