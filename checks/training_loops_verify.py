"""Verifiers of the `training_loops` checks (visible and hidden): each runs one case through a
probe (`probes/training_loops.py`) and judges the record against the grader's own
reference run (`training_loops_reference.py`) on the same seeded data and initial weights.
Shipped with the visible checks; it holds no hidden check's inputs.

Tolerances. Grader and worker run torch single-threaded on identical data and weights, so the
reference loop and every correct style measured (`optimizer.zero_grad()`, `model.zero_grad()`,
`set_to_none=False`, `loss.item()` or `float(loss)`, `torch.inference_mode()`, accumulating by
dividing each loss or rescaling the gradients, a closure passed to step) end within 3e-8 of
the reference weights (the accumulation styles; the others bit for bit), and their losses within
2e-7 (relative); WEIGHT_RTOL/ATOL are 300x the one, LOSS_RTOL 50x the other. The mistakes in
mutants/training_loops/ that change weights change them by 0.1 or more.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

import training_loops_reference as reference
from training_loops_cases import (AccumulatedCase, CheckpointCase, EvaluateCase,
                                                FitCase, TrainEpochCase, classifier_data,
                                                describe_batches, describe_optimizer,
                                                toy_batches)
from grader.checking.compare import grad_histogram_evidence, mismatch_report
from grader.checking.memo import shared
from grader.checking.recorded import digest
from grader import StudentError, expect_type, fail, short
from grader.checking.student import StudentRaised
from probes.training_loops import build_model


# Correct styles land within 3e-8 of the reference weights (see the module docstring).
WEIGHT_RTOL, WEIGHT_ATOL = 1e-5, 1e-5
# Loss values: correct styles (float32 or float64 sums, one loss over all outputs) <= 2e-7.
LOSS_RTOL = 1e-5
# Accuracies are k / n with n <= 50: any real mistake is off by >= 0.02.
ACCURACY_ATOL = 1e-6
# A correct loop leaves p.grad equal to the newest backward's gradient exactly (0.0 measured).
GRAD_RTOL = 1e-4
CLASSIFIER_TARGET = 0.95

LOOP_HINT = ("per batch: optimizer.zero_grad(), output = model(x), loss = loss_fn(output, y), "
             "loss.backward(), optimizer.step(); model.train() once before the loop.")
FLOAT_HINT = ("loss.item() (or float(loss)) gives a Python float; keeping the tensor keeps its "
              "whole graph alive.")
EVAL_HINT = ("was_training = model.training; model.eval(); with torch.no_grad(): ... ; then "
             "model.train(was_training).")
SAMPLE_MEAN_HINT = ("loss_fn returns the mean over its batch: multiply by len(y) to get the "
                    "batch's sum, add those up and divide by the number of samples.")
FIT_HINT = ("per epoch: record optimizer.param_groups[0]['lr'], train_epoch(...), then "
            "scheduler.step() if there is one, then evaluate(...) on the validation loader.")
BEST_HINT = ("keep a copy of the best weights (copy.deepcopy(model.state_dict()): state_dict() "
             "returns the live tensors, which training keeps changing) and load it at the end.")
ACCUM_HINT = ("divide each batch's loss by the number of batches in its chunk (accum_steps, or "
              "fewer for the last chunk) before backward(), step once per chunk, then zero_grad.")
CHECKPOINT_HINT = ("save {'model': model.state_dict(), 'optimizer': optimizer.state_dict(), "
                   "'epoch': epoch} with torch.save; load_state_dict both on the way back.")
SEED_HINT = "random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)."

MODEL_TEXT = {"mlp": "Linear-ReLU-Linear", "mlp_bn": "Linear-BatchNorm1d-ReLU-Linear",
              "mlp_bn_dropout": "Linear-BatchNorm1d-ReLU-Dropout(0.5)-Linear"}
LOSS_TEXT = {"cross_entropy": "nn.CrossEntropyLoss()",
             "cross_entropy_smoothed": "nn.CrossEntropyLoss(label_smoothing=0.2)"}


def probe(sub, name: str, call: str, **kwargs) -> dict:
    """`sub.probe("training_loops:<name>", ...)`. A probe calls several functions (fit calls
    train_epoch and evaluate; checkpoints need save and load): when one of them still raises
    the stub's NotImplementedError("<its name>"), the message names that one."""
    try:
        return sub.probe(f"training_loops:{name}", label=call, **kwargs)
    except StudentRaised as exc:
        missing = exc.raw_message.strip()
        if exc.type != "NotImplementedError" or not missing.isidentifier() or \
                call.startswith(f"{missing}("):
            raise
        raise StudentError(f"{call}: {missing} is not implemented yet (it raises "
                           "NotImplementedError).", call=call,
                           reason="not_implemented") from None


def returned(record: dict, call: str) -> Any:
    """The value the student's function returned, as the probe recorded it."""
    value = record["returned"]
    if isinstance(value, dict) and set(value) == {"__unsupported__"}:
        fail(f"{call} returned an object of type {value['__unsupported__']}; the contract asks "
             "for plain values (floats, ints, lists, dicts).", call=call,
             got=value["__unsupported__"])
    return value


def expect_float(value: Any, *, call: str, what: str) -> float:
    """A Python float (numpy float64, a float subclass, is accepted); a tensor fails."""
    if isinstance(value, torch.Tensor):
        fail(f"{call} returned a tensor for {what} ({short(value)}); the contract asks for a "
             "Python float.", call=call, expected="a Python float", got=short(value),
             hint=FLOAT_HINT, evidence={"returned_tensor": True})
    expect_type(value, float, call=call, what=f"a Python float for {what}", hint=FLOAT_HINT)
    return float(value)


def state_mismatch(got: dict, expected: dict, *, rtol: float = WEIGHT_RTOL,
                   atol: float = WEIGHT_ATOL) -> str:
    """Empty when every entry of the state_dict is close; else which one differs and how."""
    for name, want in expected.items():
        have = got.get(name)
        if not isinstance(have, torch.Tensor) or tuple(have.shape) != tuple(want.shape):
            return f"  {name}: missing or of another shape"
        report = mismatch_report(have.double().numpy(), want.double().numpy(), rtol=rtol,
                                 atol=atol)
        if report:
            return f"  {name}:\n{report}"
    return ""


def max_difference(got: dict, expected: dict) -> float:
    return max(float((got[k].double() - v.double()).abs().max()) for k, v in expected.items()
               if v.numel() and isinstance(got.get(k), torch.Tensor)
               and got[k].shape == v.shape)


def rounded(values, digits: int = 6) -> list:
    return [None if v is None else round(float(v), digits) for v in values]


def grad_ratio(grad: torch.Tensor, wanted: torch.Tensor) -> float:
    """How many times `wanted` `grad` holds, projected: 1.0 right, 2.0 for twice the gradient
    (never zeroed, with two similar batches), 0.0 for an empty gradient."""
    denominator = float(wanted.double() @ wanted.double())
    return float(grad.double() @ wanted.double()) / denominator if denominator else math.nan


def relative_error(grad: torch.Tensor, wanted: torch.Tensor) -> float:
    norm = float(wanted.double().norm())
    return float((grad.double() - wanted.double()).norm()) / norm if norm else math.inf


def stale_steps(steps: list[dict]) -> tuple[list[int], list[int]]:
    """Steps (1-based) whose p.grad was empty although backward() had just run, and steps whose
    p.grad was the sum of this and earlier batches' gradients (evidence for diagnoses)."""
    empty, accumulated = [], []
    for k, s in enumerate(steps):
        if relative_error(s["grad"], s["newest"]) <= GRAD_RTOL or s["backwards"] != 1:
            continue
        if s["grad_missing"] or abs(grad_ratio(s["grad"], s["newest"])) < 1e-3:
            empty.append(k + 1)
            continue
        window = s["newest"].double()
        for j in range(k - 1, -1, -1):
            window = window + steps[j]["newest"].double()
            if relative_error(s["grad"], window) <= GRAD_RTOL:
                accumulated.append(k + 1)
                break
    return empty[:50], accumulated[:50]


def record_grad_histograms(evidence: dict, case: TrainEpochCase | AccumulatedCase,
                           steps: list[dict], reference_grads: list,
                           reference_steps: int) -> None:
    """`grad_histograms` for the report: per parameter tensor of the case's model, log10|grad|
    at the first and the last optimizer step of the student's run (`steps`, the probe's step
    audit) and of the reference run on the same data (`reference_grads`: flat gradients, the
    first and the last of its `reference_steps` steps among them).
    Evidence only: whatever goes wrong here leaves the picture out, never the verdict."""
    try:
        named = [(n, p.numel()) for n, p in
                 build_model(case.model, case.sizes, case.state).named_parameters()]
        grads = [s.get("grad") for s in steps if isinstance(s, dict)]
        layers = grad_histogram_evidence(
            [n for n, _ in named], [k for _, k in named],
            {"yours_first": grads[0] if grads else None,
             "yours_last": grads[-1] if grads else None,
             "reference_first": reference_grads[0] if reference_grads else None,
             "reference_last": reference_grads[-1] if reference_grads else None})
        if layers:
            evidence["grad_histograms"] = {"steps": len(grads),
                                           "reference_steps": reference_steps,
                                           "layers": layers}
    except Exception:  # noqa: BLE001 - evidence is never part of a verdict
        return


def epoch_call(case: TrainEpochCase) -> str:
    return (f"train_epoch(model, loader, optimizer, loss_fn)  # model {MODEL_TEXT[case.model]} "
            f"handed over in {case.start_mode} mode, loader: {case.loader} of "
            f"{describe_batches(case.batches)}, optimizer {describe_optimizer(case.optimizer)}, "
            f"loss_fn {LOSS_TEXT[case.loss]}")


def audit_steps(steps: list[dict], *, n_expected: int, call: str, evidence: dict) -> None:
    """Every batch gets exactly one step, after its own backward, with p.grad equal to that
    backward's gradient (nothing left over from earlier batches, nothing wiped)."""
    evidence["steps"] = len(steps)
    evidence["grad_ratio"] = rounded([grad_ratio(s["grad"], s["newest"]) for s in steps], 4)
    evidence["backwards_per_step"] = [s["backwards"] for s in steps][:300]
    evidence["empty_grad_steps"], evidence["accumulated_steps"] = stale_steps(steps)
    if len(steps) != n_expected:
        fail(f"{call} called optimizer.step() {len(steps)} times for {n_expected} batches; "
             "expected once per batch.", call=call, expected=f"{n_expected} steps",
             got=f"{len(steps)} steps", hint=LOOP_HINT)
    for k, s in enumerate(steps, start=1):
        if s["backwards"] == 0:
            fail(f"{call}: step {k} ran before any loss.backward() for its batch, so it used "
                 "no gradient (or an old one); backward() must come before step().", call=call,
                 expected="backward() then step()", got="step() before backward()",
                 hint=LOOP_HINT)
        if s["backwards"] > 1:
            fail(f"{call}: {s['backwards']} backward() calls ran before step {k}; expected one "
                 "per batch.", call=call, expected="one backward() per step",
                 got=f"{s['backwards']} backward() calls", hint=LOOP_HINT)
        ratio, error = grad_ratio(s["grad"], s["newest"]), relative_error(s["grad"], s["newest"])
        if error <= GRAD_RTOL:
            continue
        if s["grad_missing"] or abs(ratio) < 1e-3:
            fail(f"{call}: at step {k}, p.grad was empty (zero or None) although backward() had "
                 "just computed a gradient: zero_grad() ran between backward() and step(), so "
                 "step() updated nothing.", call=call,
                 expected="p.grad = this batch's gradient", got="p.grad empty",
                 hint=LOOP_HINT, evidence=evidence)
        fail(f"{call}: at step {k}, p.grad was {ratio:.2f}x the gradient of the current batch "
             f"(relative difference {error:.2g}): gradients of earlier batches were still in "
             "p.grad. backward() adds to p.grad; call optimizer.zero_grad() before every "
             "backward().", call=call, expected="p.grad = this batch's gradient",
             got=f"{ratio:.2f}x it", hint=LOOP_HINT, evidence=evidence)


def epoch_record(sub, case: TrainEpochCase) -> dict:
    """The probe's record of one `train_epoch` on `case`, made once per submission and judged by
    every verifier of that case (its steps, its weights, its returned loss): the run is the
    same, so it is trained once (`grader.checking.memo.shared`; what it raised is raised again
    in each check that needs it)."""
    kwargs = case.probe_kwargs()
    return shared(sub, ("training_loops:train_epoch_run", digest("case", (), kwargs)),
                  lambda: probe(sub, "train_epoch_run", epoch_call(case), **kwargs))


def verify_train_epoch_steps(sub, case: TrainEpochCase, evidence: dict) -> None:
    call = epoch_call(case)
    record = epoch_record(sub, case)
    ref = reference.train_epoch(case)
    evidence["loss_curve"] = rounded([c[0] for c in record["losses"]][:200])
    evidence["reference_loss_curve"] = rounded(ref.batch_losses)
    evidence["forward_modes"] = record["forwards"][:200]
    record_grad_histograms(evidence, case, record["steps"], getattr(ref, "edge_grads", []),
                           len(ref.batch_losses))
    audit_steps(record["steps"], n_expected=len(case.batches), call=call, evidence=evidence)
    modes = record["forwards"]
    if any(training is not True for training, _ in modes):
        fail(f"{call} ran forward passes with the model not in training mode (the model was "
             f"handed over in {case.start_mode} mode): BatchNorm then uses its running "
             "statistics and does not update them. Call model.train() at the start.",
             call=call, expected="model.training True in every forward",
             got=f"forward modes {modes[:3]}...", hint=LOOP_HINT)
    if any(not grad_enabled for _, grad_enabled in modes):
        fail(f"{call} ran forward passes with gradient tracking off (torch.no_grad?); "
             "training needs the graph for backward().", call=call, hint=LOOP_HINT)
    diff = state_mismatch(record["state"], ref.state)
    evidence["weight_error"] = max_difference(record["state"], ref.state)
    if diff:
        fail(f"{call}: after the epoch the model's weights (or BatchNorm buffers) differ from "
             f"those of the reference loop on the same data and initial weights.\n{diff}",
             call=call, expected="the reference weights", got="other weights", hint=LOOP_HINT)


def verify_train_epoch_loss(sub, case: TrainEpochCase, evidence: dict) -> None:
    call = epoch_call(case)
    record = epoch_record(sub, case)
    value = expect_float(returned(record, call), call=call, what="the epoch's loss")
    # The batch losses the student's own loop computed (one loss_fn call per batch); when the
    # loop called loss_fn some other number of times, the reference run's.
    batch_losses = [c[0] for c in record["losses"] if c[1]]
    if len(batch_losses) != len(case.batches):
        batch_losses = reference.train_epoch(case).batch_losses
    sizes = [len(y) for _, y in case.batches]
    expected = sum(batch_losses) / len(batch_losses)
    weighted = sum(loss * n for loss, n in zip(batch_losses, sizes)) / sum(sizes)
    evidence["loss_curve"] = rounded(batch_losses)
    if not math.isclose(value, expected, rel_tol=LOSS_RTOL):
        why = ""
        if math.isclose(value, weighted, rel_tol=LOSS_RTOL):
            why = (" That is the mean weighted by batch size; train_epoch returns the plain "
                   "mean of the batch losses (evaluate is the one that weighs by samples).")
        elif math.isclose(value, batch_losses[-1], rel_tol=LOSS_RTOL):
            why = " That is the last batch's loss alone."
        elif math.isclose(value, sum(batch_losses), rel_tol=LOSS_RTOL):
            why = " That is the sum of the batch losses, not their mean."
        fail(f"{call} returned {value:.6g}; the mean of its {len(batch_losses)} batch losses "
             f"{rounded(batch_losses, 4)} is {expected:.6g}.{why}", call=call,
             expected=f"{expected:.6g}", got=f"{value:.6g}",
             hint="append loss.item() for every batch and return sum(losses) / len(losses).")


def eval_call(case: EvaluateCase) -> str:
    return (f"evaluate(model, loader, loss_fn)  # model {MODEL_TEXT[case.model]} in "
            f"{case.start_mode} mode, loader: {case.loader} of {describe_batches(case.batches)}, "
            f"loss_fn {LOSS_TEXT[case.loss]}")


def evaluate_result(record: dict, call: str) -> tuple[float, float]:
    value = returned(record, call)
    if not isinstance(value, dict) or not {"loss", "accuracy"} <= set(value):
        fail(f"{call} returned {short(value)}; expected a dict {{'loss': float, 'accuracy': "
             "float}.", call=call, expected="{'loss': ..., 'accuracy': ...}", got=short(value))
    return (expect_float(value["loss"], call=call, what="'loss'"),
            expect_float(value["accuracy"], call=call, what="'accuracy'"))


def made_by_the_model(record: dict, call: str, ref) -> None:
    """Loosely: a loss and an accuracy the model gives, exactly or with a slip other checks
    score (the batch mean, training mode; tensors for floats), not numbers made up by code
    that ran the model and threw its outputs away."""
    value = returned(record, call)
    try:
        loss, accuracy = float(value["loss"]), float(value["accuracy"])
    except (TypeError, KeyError, ValueError, IndexError):
        fail(f"{call} returned {short(value)}; expected a dict {{'loss': float, 'accuracy': "
             "float}.", call=call, expected="{'loss': ..., 'accuracy': ...}", got=short(value))
    losses = (ref.loss, ref.batch_mean_loss, ref.train_mode_loss)
    accuracies = (ref.accuracy, ref.batch_mean_accuracy)
    if not any(math.isclose(loss, want, rel_tol=1e-3) for want in losses) or not any(
            abs(accuracy - want) <= ACCURACY_ATOL for want in accuracies):
        fail(f"{call} returned loss {loss:.6g} and accuracy {accuracy:.6g}; the model in eval "
             f"mode gives loss {ref.loss:.6g} and accuracy {ref.accuracy:.6g}: evaluate must "
             "compute both from the model's outputs.", call=call,
             expected=f"loss {ref.loss:.6g}, accuracy {ref.accuracy:.6g}",
             got=f"loss {loss:.6g}, accuracy {accuracy:.6g}", hint=EVAL_HINT)


def verify_evaluate_values(sub, case: EvaluateCase, evidence: dict) -> None:
    call = eval_call(case)
    record = probe(sub, "evaluate_run", call, **case.probe_kwargs())
    loss, accuracy = evaluate_result(record, call)
    ref = reference.evaluate(case)
    evidence.setdefault("loss", []).append(round(loss, 6))
    evidence.setdefault("reference_loss", []).append(round(ref.loss, 6))
    if not math.isclose(loss, ref.loss, rel_tol=LOSS_RTOL):
        why = ""
        if math.isclose(loss, ref.batch_mean_loss, rel_tol=LOSS_RTOL):
            why = (" That is the mean of the batch losses: the short last batch counts as much "
                   "as a full one.")
        elif math.isclose(loss, ref.train_mode_loss, rel_tol=1e-3):
            why = " That is the loss with the model in training mode."
        elif case.loss != "cross_entropy" and math.isclose(loss, ref.plain_loss,
                                                            rel_tol=LOSS_RTOL):
            why = (f" That is plain cross-entropy: use the loss_fn passed in (here "
                   f"{LOSS_TEXT[case.loss]}).")
        fail(f"{call} returned loss {loss:.6g}; the loss averaged over samples is "
             f"{ref.loss:.6g}.{why}", call=call, expected=f"{ref.loss:.6g}",
             got=f"{loss:.6g}", hint=SAMPLE_MEAN_HINT)
    if abs(accuracy - ref.accuracy) > ACCURACY_ATOL:
        why = ""
        if abs(accuracy - ref.batch_mean_accuracy) <= ACCURACY_ATOL:
            why = " That is the mean of the batch accuracies, not the share of all samples."
        elif abs(accuracy - 100 * ref.accuracy) < 1e-4:
            why = " That is a percentage; the contract asks for a share between 0 and 1."
        fail(f"{call} returned accuracy {accuracy:.6g}; the share of samples whose argmax "
             f"equals y is {ref.accuracy:.6g}.{why}", call=call, expected=f"{ref.accuracy:.6g}",
             got=f"{accuracy:.6g}",
             hint="count (output.argmax(dim=1) == y).sum() over all batches, divide by the "
                  "number of samples.")


def verify_evaluate_modes(sub, case: EvaluateCase, evidence: dict, *,
                          check_forwards: bool = True, check_values: bool = True,
                          check_state: bool = False, check_made: bool = False) -> None:
    """The forwards' modes (eval, no grad), the values in eval mode, the mode afterwards and,
    with `check_state`, that nothing in the model changed; with `check_made`, that the values
    come from the model at all (`made_by_the_model`)."""
    call = eval_call(case)
    record = probe(sub, "evaluate_run", call, **case.probe_kwargs())
    modes = record["forwards"]
    evidence.setdefault("forward_modes", []).extend(modes[:100])
    if not modes:
        fail(f"{call} never ran the model forward.", call=call, hint=EVAL_HINT)
    if check_forwards and any(training is not False for training, _ in modes):
        fail(f"{call} ran the model in training mode (forward modes [training, grad_enabled] "
             f"= {modes[:4]}): dropout stays on and BatchNorm normalises with batch statistics "
             "(and updates its running ones). Call model.eval() before the loop.", call=call,
             expected="model.training False in every forward", got="training mode",
             hint=EVAL_HINT, evidence={"forward_modes": modes[:100]})
    if check_forwards and any(grad_enabled for _, grad_enabled in modes):
        fail(f"{call} ran the model with gradient tracking on (forward modes [training, "
             f"grad_enabled] = {modes[:4]}): every forward builds a graph nobody uses. Wrap the "
             "loop in torch.no_grad().", call=call, expected="torch.is_grad_enabled() False",
             got="gradient tracking on", hint=EVAL_HINT,
             evidence={"forward_modes": modes[:100]})
    if check_values:
        loss, accuracy = evaluate_result(record, call)
        ref = reference.evaluate(case)
        if not math.isclose(loss, ref.loss, rel_tol=LOSS_RTOL) or \
                abs(accuracy - ref.accuracy) > ACCURACY_ATOL:
            fail(f"{call} returned loss {loss:.6g} and accuracy {accuracy:.6g}; the model in "
                 f"eval mode gives loss {ref.loss:.6g} and accuracy {ref.accuracy:.6g} "
                 "(all batches have the same size here).", call=call,
                 expected=f"loss {ref.loss:.6g}, accuracy {ref.accuracy:.6g}",
                 got=f"loss {loss:.6g}, accuracy {accuracy:.6g}", hint=EVAL_HINT)
    if check_made:
        made_by_the_model(record, call, reference.evaluate(case))
    want = case.start_mode == "train"
    if record["mode_after"] is not want:
        after = {True: "training", False: "eval", None: "a mix of training and eval"}
        fail(f"{call} left the model in {after[record['mode_after']]} mode; it was handed over "
             f"in {case.start_mode} mode and must be left that way.", call=call,
             expected=f"{case.start_mode} mode", got=f"{after[record['mode_after']]} mode",
             hint=EVAL_HINT)
    if check_state:
        diff = state_mismatch(record["state"], case.state, rtol=0.0, atol=0.0)
        if diff:
            fail(f"{call} changed the model's state_dict (weights or BatchNorm running "
                 f"statistics); evaluating must leave it untouched.\n{diff}", call=call,
                 expected="state_dict unchanged", got="changed", hint=EVAL_HINT)
        if record["grads_after"]:
            fail(f"{call} left gradients in {record['grads_after']} parameters: evaluate "
                 "should compute no gradients (no backward(), inside torch.no_grad()).",
                 call=call, hint=EVAL_HINT)


def fit_result(record: dict, call: str) -> dict[str, list[float]]:
    """The returned history: a dict of four equally long lists of Python floats."""
    value = returned(record, call)
    keys = ("train_loss", "val_loss", "val_accuracy", "lr")
    if not isinstance(value, dict) or not set(keys) <= set(value):
        fail(f"{call} returned {short(value)}; expected a dict with keys {list(keys)}.",
             call=call, expected=f"a dict with keys {list(keys)}", got=short(value))
    lengths = {k: len(value[k]) if isinstance(value[k], (list, tuple)) else None for k in keys}
    for k in keys:
        if lengths[k] is None:
            fail(f"{call} returned {k!r} = {short(value[k])}; expected a list with one entry "
                 "per epoch run.", call=call, expected="a list", got=short(value[k]))
    if len(set(lengths.values())) != 1:
        fail(f"{call} returned lists of different lengths {lengths}; expected one entry per "
             "epoch run in each.", call=call, expected="equal lengths", got=str(lengths),
             hint=FIT_HINT)
    history = {k: [expect_float(v, call=call, what=f"an entry of {k!r}") for v in value[k]]
               for k in keys}
    return history


def compare_history(history: dict, ref: reference.FitReference, call: str) -> None:
    """train_loss, val_loss and val_accuracy epoch by epoch against the reference."""
    for key, want, close in (
            ("train_loss", ref.train_loss, lambda a, b: math.isclose(a, b, rel_tol=LOSS_RTOL)),
            ("val_loss", ref.val_loss, lambda a, b: math.isclose(a, b, rel_tol=LOSS_RTOL)),
            ("val_accuracy", ref.val_accuracy, lambda a, b: abs(a - b) <= ACCURACY_ATOL)):
        got = history[key]
        for epoch, (a, b) in enumerate(zip(got, want), start=1):
            if not close(a, b):
                fail(f"{call} returned {key} {rounded(got, 4)}; the reference run gives "
                     f"{rounded(want, 4)} (first difference at epoch {epoch}: {a:.6g} instead "
                     f"of {b:.6g}).", call=call, expected=str(rounded(want, 4)),
                     got=str(rounded(got, 4)),
                     hint=FIT_HINT + " If train_epoch or evaluate fail their own checks, fix "
                                     "those first.")


def verify_fit(sub, case: FitCase, evidence: dict) -> None:
    """History, learning rate at every step, epochs run and the final (best) weights."""
    call = case.call_text()
    record = probe(sub, "fit_run", call, **case.probe_kwargs())
    ref = reference.fit(case)
    if ref.margin < 0.01:  # the case is built with >= 2.4 %: a near-tie would make it fragile
        raise RuntimeError(f"fit case has a best-epoch margin of only {ref.margin:.3g}")
    history = fit_result(record, call)
    evidence["lr_per_step"] = rounded(record["step_lrs"][:300])
    evidence["steps_per_epoch"] = len(case.batches)
    evidence["reference_lr_per_step"] = rounded(ref.step_lrs[:300])
    evidence["val_loss_curve"] = rounded(history["val_loss"])
    evidence["reference_val_loss_curve"] = rounded(ref.val_loss)
    steps_per_epoch = len(case.batches)
    got_lrs, want_lrs = record["step_lrs"], ref.step_lrs
    ran = len(history["val_loss"])
    if len(got_lrs) != ran * steps_per_epoch:
        fail(f"{call} made {len(got_lrs)} optimizer steps in the {ran} epochs it reports, with "
             f"{steps_per_epoch} training batches per epoch; expected one step per batch. "
             "If train_epoch fails its own checks, fix that first.", call=call,
             expected=f"{ran * steps_per_epoch} steps", got=f"{len(got_lrs)} steps",
             hint=FIT_HINT)
    for k, (a, b) in enumerate(zip(got_lrs, want_lrs)):
        if not math.isclose(a, b, rel_tol=1e-9):
            epoch, batch = divmod(k, steps_per_epoch)
            fail(f"{call}: optimizer step {k + 1} (epoch {epoch + 1}, batch {batch + 1}) used "
                 f"learning rate {a:.6g}; expected {b:.6g}. The learning rates the steps used "
                 f"were {rounded(got_lrs[:3 * steps_per_epoch], 6)}...: scheduler.step() runs "
                 "once per epoch, after that epoch's training, never inside the batch loop.",
                 call=call, expected=f"lr {b:.6g}", got=f"lr {a:.6g}", hint=FIT_HINT,
                 evidence={"lr_per_step": rounded(got_lrs[:300]),
                           "steps_per_epoch": steps_per_epoch})
    compare_history(history, ref, call)
    ran, want_ran = len(history["val_loss"]), len(ref.val_loss)
    if ran != want_ran:
        best = ref.best_epoch + 1
        if case.patience is None:
            detail = f"without patience it must run all {case.epochs} epochs"
        else:
            detail = (f"the reference's best val_loss is at epoch {best} "
                      f"({ref.val_loss[ref.best_epoch]:.4f}) and none of the next "
                      f"{case.patience} is lower, so it stops after epoch {best + case.patience}")
        fail(f"{call} ran {ran} epochs; expected {want_ran}: {detail}. The reference val_loss "
             f"curve is {rounded(ref.val_loss, 4)}; yours is {rounded(history['val_loss'], 4)}.",
             call=call, expected=f"{want_ran} epochs", got=f"{ran} epochs",
             hint="count the epochs since the last new best val_loss (lower than every earlier "
                  "one); stop when that count reaches patience.")
    if not all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(history["lr"], ref.lr)):
        fail(f"{call} returned lr {rounded(history['lr'])}; the learning rates the epochs used "
             f"are {rounded(ref.lr)}. Read optimizer.param_groups[0]['lr'] before training the "
             "epoch (after scheduler.step() it is already next epoch's rate).", call=call,
             expected=str(rounded(ref.lr)), got=str(rounded(history["lr"])), hint=FIT_HINT)
    diff = state_mismatch(record["state"], ref.best_state)
    if diff:
        last = "" if state_mismatch(record["state"], ref.last_state) else (
            " These are the weights of the last epoch.")
        fail(f"{call}: the model should end with the weights of its best epoch (epoch "
             f"{ref.best_epoch + 1}, val_loss {ref.val_loss[ref.best_epoch]:.4f}); its weights "
             f"differ from those.{last}\n{diff}", call=call,
             expected=f"the weights after epoch {ref.best_epoch + 1}", got="other weights",
             hint=BEST_HINT)


def accumulated_call(case: AccumulatedCase) -> str:
    return (f"train_accumulated(model, loader, optimizer, loss_fn, accum_steps="
            f"{case.accum_steps})  # loader: {case.loader} of {describe_batches(case.batches)}, "
            f"optimizer {describe_optimizer(case.optimizer)}"
            + (f", model handed over in {case.start_mode} mode" if case.start_mode != "train"
               else ""))


def verify_accumulated(sub, case: AccumulatedCase, evidence: dict) -> None:
    call = accumulated_call(case)
    record = probe(sub, "accumulated_run", call, **case.probe_kwargs())
    # Training, like train_epoch: every forward in training mode (the module docstring's
    # step 2), whatever mode the model was handed over in.
    modes = record.get("forwards", [])
    if any(training is not True for training, _ in modes):
        fail(f"{call} ran forward passes with the model not in training mode: dropout and "
             "BatchNorm then behave as in evaluation. Call model.train() at the start.",
             call=call, expected="model.training True in every forward",
             got=f"forward modes {modes[:3]}...", hint=LOOP_HINT)
    ref = reference.train_accumulated(case)
    chunks = case.chunks()
    steps = record["steps"]
    record_grad_histograms(evidence, case, steps, ref.step_grads, len(ref.step_grads))
    ratios = [grad_ratio(s["grad"], want) for s, want in zip(steps, ref.step_grads)]
    evidence.setdefault("grad_ratio", []).append(rounded(ratios, 4))
    evidence.setdefault("steps", []).append(len(steps))
    after = [c[-1] + 1 for c in chunks]
    if len(steps) != len(chunks):
        why = ""
        if len(steps) == len(case.batches) // case.accum_steps:
            why = (f" The last {len(case.batches) % case.accum_steps} batch(es) got no step: "
                   "the remainder needs one too.")
        elif len(steps) == len(case.batches):
            why = " That is one step per batch: nothing was accumulated."
        fail(f"{call} called optimizer.step() {len(steps)} times; expected {len(chunks)} "
             f"(after batches {after}).{why}", call=call, expected=f"{len(chunks)} steps",
             got=f"{len(steps)} steps", hint=ACCUM_HINT)
    for k, (s, want, ratio) in enumerate(zip(steps, ref.step_grads, ratios), start=1):
        error = relative_error(s["grad"], want)
        if error <= 1e-4:  # correct styles: <= 3e-7 (float32 sums in another order)
            continue
        chunk = chunks[k - 1]
        why = ""
        if abs(ratio - len(chunk)) < 0.05 * len(chunk):
            why = (f" It is {len(chunk)}x too large: the losses were summed, not averaged over "
                   f"the {len(chunk)} batches.")
        elif len(chunk) < case.accum_steps and \
                abs(ratio * case.accum_steps / len(chunk) - 1) < 0.05:
            why = (f" It is {ratio:.2f}x the right one: this last step covers only "
                   f"{len(chunk)} batch(es), so divide by {len(chunk)}, not by accum_steps.")
        elif abs(ratio) < 1e-3:
            why = " It is empty: zero_grad() ran after backward() and before step()."
        fail(f"{call}: step {k} (covering batches {[i + 1 for i in chunk]}) used a gradient "
             f"{ratio:.3g}x that of the mean loss over those batches (relative difference "
             f"{error:.2g}).{why}", call=call, expected="the gradient of the chunk's mean loss",
             got=f"{ratio:.3g}x it", hint=ACCUM_HINT)
    diff = state_mismatch(record["state"], ref.state)
    if diff:
        fail(f"{call}: the final weights differ from one step per chunk on the chunk's batches "
             f"concatenated.\n{diff}", call=call, expected="the reference weights",
             got="other weights", hint=ACCUM_HINT)
    value = expect_float(returned(record, call), call=call, what="the mean batch loss")
    losses = [c[0] for c in record["losses"]]
    batch_losses = losses if len(losses) == len(case.batches) else None
    expected = (sum(batch_losses) / len(batch_losses)) if batch_losses else ref.mean_loss
    if not math.isclose(value, expected, rel_tol=LOSS_RTOL):
        fail(f"{call} returned {value:.6g}; the mean of the batch losses (each batch's own "
             f"loss, before any division) is {expected:.6g}.", call=call,
             expected=f"{expected:.6g}", got=f"{value:.6g}",
             hint="keep loss.item() of every batch, before dividing it, and return their mean.")


def checkpoint_call(case: CheckpointCase) -> str:
    return (f"save_checkpoint(path, model, optimizer, epoch={case.epoch}), then "
            f"load_checkpoint(path, fresh_model, fresh_optimizer)  # optimizer "
            f"{describe_optimizer(case.optimizer)}, model {MODEL_TEXT[case.model]}")


def verify_checkpoint(sub, case: CheckpointCase, evidence: dict) -> None:
    call = checkpoint_call(case)
    record = probe(sub, "checkpoint_run", call, **case.probe_kwargs())
    ref = reference.checkpoint(case)
    if not record["file_written"]:
        fail(f"{call}: save_checkpoint wrote no file at path (a file in the working folder, "
             "'checkpoint.pt'); the checkpoint must be saved there.", call=call,
             expected="a file at path", got="no file", hint=CHECKPOINT_HINT)
    epoch = returned(record, call)
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch != case.epoch:
        fail(f"{call}: load_checkpoint returned {short(epoch)}; expected the saved epoch, "
             f"{case.epoch} (an int).", call=call, expected=str(case.epoch), got=short(epoch),
             hint=CHECKPOINT_HINT)
    # The probe trains with the grader's own loop, so a faithful save/load restores the
    # reference bit for bit; the small tolerance only absorbs a grader that computed its
    # reference with other thread settings. A lost or half-restored state is off by > 1e-3.
    diff = state_mismatch(record["loaded_state"], ref.saved_state, rtol=1e-6, atol=1e-7)
    if diff:
        what = ("its BatchNorm buffers (running statistics) are not the saved ones: "
                "model.state_dict() holds them, named_parameters() does not"
                if "running_" in diff.splitlines()[0] else "its weights are not the saved ones")
        fail(f"{call}: after load_checkpoint the fresh model's state_dict differs from the "
             f"saved one: {what}.\n{diff}", call=call, expected="the saved state_dict",
             got="another state", hint=CHECKPOINT_HINT)
    loaded = record["loaded_optimizer"]
    evidence["optimizer_state_entries"] = len(loaded)
    if set(loaded) != set(ref.saved_optimizer) or any(
            set(loaded[i]) != set(state) or state_mismatch(loaded[i], state, rtol=1e-6, atol=1e-7)
            for i, state in ref.saved_optimizer.items()):
        what = ("momentum buffers" if case.optimizer["name"] == "sgd"
                else "moment estimates (exp_avg, exp_avg_sq) and step counts")
        fail(f"{call}: after load_checkpoint the fresh optimizer's state ({what}) is not the "
             f"saved one (it holds state for {len(loaded)} of {len(ref.saved_optimizer)} "
             "parameters, or other values). Training would resume with a cold optimizer.",
             call=call, expected=f"the saved {what}", got="other optimizer state",
             hint=CHECKPOINT_HINT)
    diff = state_mismatch(record["state"], ref.final_state)
    evidence["weight_error"] = max_difference(record["state"], ref.final_state)
    if diff:
        fail(f"{call}: one epoch, save, load into fresh objects, one more epoch gives other "
             f"weights than two epochs without interruption.\n{diff}", call=call,
             expected="the uninterrupted weights", got="other weights", hint=CHECKPOINT_HINT)


def seeded_runs(sub, seeds: list[int]) -> tuple[list[dict], list[dict], str]:
    call = (f"set_seed(s) before each of {len(seeds)} identical training runs, s = {seeds}  "
            "# each run uses random.sample, np.random.normal, torch init, dropout and a "
            "shuffled DataLoader")
    x, y = toy_batches(901, [40], 5, 3)[0]
    record = probe(sub, "seeded_runs", call, seeds=seeds, x=x, y=y)
    return record["runs"], record["draws"], call


def classifier_check(sub, seed: int, evidence: dict) -> None:
    data = classifier_data(seed)
    call = (f"train_classifier(X_train, y_train, X_val, y_val)  # X_train "
            f"{tuple(data.x_train.shape)} float32, y_train int64 with 10 classes, "
            f"X_val {tuple(data.x_val.shape)}")
    record = probe(sub, "classifier_run", call, x_train=data.x_train, y_train=data.y_train,
                   x_val=data.x_val, y_val=data.y_val, x_test=data.x_test, seed=seed)
    if not record.get("module"):
        fail(f"{call} returned an object of type {record.get('type')}; expected the trained "
             "nn.Module.", call=call, expected="an nn.Module", got=str(record.get("type")))
    predictions = record.get("predictions")
    if not isinstance(predictions, torch.Tensor) or tuple(predictions.shape) != (len(data.x_test),):
        fail(f"{call}: the returned model, given X_test of shape {tuple(data.x_test.shape)}, "
             f"gave {record.get('output_shape') or record.get('output')}; "
             f"expected a tensor of shape ({len(data.x_test)}, 10) of class scores.", call=call,
             expected=f"shape ({len(data.x_test)}, 10)", got=str(record.get("output_shape")))
    accuracy = float((predictions == data.y_test).double().mean())
    evidence["test_accuracy"] = round(accuracy, 4)
    if accuracy < CLASSIFIER_TARGET:
        fail(f"{call}: the returned model (in eval mode) classifies {accuracy:.1%} of "
             f"{len(data.x_test)} held-out test samples correctly; full marks need at least "
             f"{CLASSIFIER_TARGET:.0%} (below that this check scores 0). A small MLP or even "
             "a linear model trained for a few epochs gets about 98 % here.", call=call,
             expected=f">= {CLASSIFIER_TARGET:.0%}", got=f"{accuracy:.1%}",
             hint="standardise the features with the training set's mean and std inside the "
                  "model, train with Adam for ~20 epochs, keep the best epoch on the "
                  "validation set (fit with patience does all that).")
