"""What the bug-hunt checks share (grader side; no `test_` prefix, not collected).

Each bug hunt has one hidden check per behaviour a seeded fault breaks (`faults.toml` names the
check that scores each fault). A check looks at its behaviour alone, so that fixing one fault
earns its points whatever else is still broken, and it asks for the behaviour itself, so that
a fix written differently passes and a "fix" that deletes the feature (the validation, the
schedule, the normalisation, dropout, BatchNorm ...) fails. Records come from the probes in
`probes/bughunt.py`; each probe runs once per submission and its record is shared by the
checks that read it (`shared`, `grader.checking.memo`). References come from the fixed scripts
(the course's `solutions/bughunt/*.py`), run here in the grader.

Messages describe what was observed (the symptom and the evidence), not the cause: the
diagnoses that `grader.scoring.diagnose` attaches say as much about the cause as each check's
`reveal` setting allows. Evidence keys (for diagnoses and reports):

    steps, backwards_per_step, grad_ratio, empty_grad_steps, accumulated_steps,
    repeated_backward_steps, freed_graph_reused_steps   optimizer steps of the train audit
    grad_histograms                               per layer, |grad| at the first and last update
    val_forwards, val_samples_seen, val_forward_modes, val_forward_grad_enabled, train_forward_modes
    history_tensor_entries, history_requires_grad, printed_tensors, printed_lines
    lr_per_step, steps_per_epoch, expected_lr_per_epoch
    loss_input_probabilities, outputs_are_probabilities, loss, loss_if_logits,
    loss_applies_softmax
    parameter_count, expected_parameter_count, unregistered_leaves, module_lists,
    bare_tensors, modules_created_in_forward, unregistered_modules_called
    eval_outputs_differ, train_outputs_differ, active_dropout_in_eval
    weight_draws_in_eval                          random weights drawn in an eval forward
    feature_mean, feature_std, feature_deviation, val_feature_deviation   first-layer inputs
    normaliser_fit_on, normaliser_skips           the statistics they were standardised with
    normaliser_mean_from, normaliser_std_from     each statistic on its own
    val_normaliser_*                              the same for the validation features
    lr, loss_curve, diverged, lr_over_reference   a reference run at the script's settings
    single_class_batches, batches, batch_sizes, batchnorm_layers, target_dtype, error
    head_changed, optimizer_foreign_parameters, frozen_changed, params_without_grad
    broadcast_shapes, matches_broadcast_loss, params_changed, input_modified
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import torch
import torch.nn.functional as F

from grader import StudentError, fail, short, solution_module
from grader.checking.memo import shared
from grader.checking.student import StudentRaised

TIMEOUT = 30  # seconds per call: a worker's first optimizer imports torch._dynamo (seconds)
REVEAL: Final = "symptom"
# A correct loop leaves p.grad equal to the sum of this step's backward gradients exactly
# (measured: 0.0); an accumulated or doubled gradient is off by 50 % or more.
GRAD_RTOL = 1e-4


def reference(name: str):
    """The fixed script `solutions/bughunt/<name>.py` (grader side only)."""
    return solution_module(f"bughunt_{name}")


def require(sub, *names: str, call: str) -> None:
    for name in names:
        if not sub.has(name):
            raise StudentError(f"{sub.filename} defines no {name}: the script's docstring lists "
                               "the names the grader calls; keep them.", call=call,
                               reason="not_defined")


def probe(sub, probe_name: str, call: str, **kwargs) -> Any:
    """`probes.bughunt.<probe_name>(module, **kwargs)` in the worker."""
    return sub.probe(f"bughunt:{probe_name}", label=call, timeout=TIMEOUT, **kwargs)


def rounded(values, digits: int = 4) -> list:
    out: list[float | str | None] = []
    for v in values:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            out.append(None if v is None else str(v))
        else:
            out.append(round(float(v), digits))
    return out


# --------------------------------------------------------------------------- train audit


@dataclass
class TrainCase:
    """How the grader calls a script's `train`: a harness model (kind, sizes, seed), batches,
    and the arguments by train's parameter names ("$model", "$train_loader", ... stand for the
    harness objects; see `probes.bughunt.train_audit`)."""

    model: str
    sizes: list[int]
    seed: int
    train_batches: list
    val_batches: list
    arguments: dict
    epochs: int
    optimizer: dict | None = None
    scheduler: dict | None = None
    update: str | None = None
    loss: str | None = None
    history_keys: tuple[str, ...] = ("train_loss", "val_loss")
    call: str = ""
    # The script's own model class and its constructor's positional arguments, for a train()
    # that only runs on the script's model (see `probes.bughunt.train_audit`).
    own_model: list | None = None
    state: dict = field(init=False)

    def __post_init__(self):
        from probes.bughunt import build_model

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            model = build_model(self.model, self.sizes)
            self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def kwargs(self) -> dict:
        return {"model": self.model, "sizes": self.sizes, "state": self.state,
                "train_batches": self.train_batches, "val_batches": self.val_batches,
                "arguments": self.arguments, "optimizer": self.optimizer,
                "scheduler": self.scheduler, "update": self.update, "loss": self.loss,
                "own_model": self.own_model}


def batches(seed: int, sizes: list[int], x_shape: tuple, classes: int | None,
            score: bool = False) -> list:
    """Random harness batches: x ~ N(0, 1) of shape (n, *x_shape); y class indices (or
    regression targets when `classes` is None); with `score`, a third float tensor."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        x = torch.randn(n, *x_shape, generator=g)
        y = (torch.randint(0, classes, (n,), generator=g) if classes
             else torch.randn(n, generator=g))
        out.append((x, y, torch.randn(n, generator=g)) if score else (x, y))
    return out


def train_record(sub, case: TrainCase) -> dict:
    require(sub, "train", call=case.call)
    return shared(sub, "train_audit", lambda: probe(sub, "train_audit", case.call,
                                                    **case.kwargs()))


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float = GRAD_RTOL) -> bool:
    scale = float(b.double().norm())
    return float((a.double() - b.double()).norm()) <= rtol * max(scale, 1e-12)


# The fixed script's train audited on a case, once per grader process (report pictures only).
_REFERENCE_AUDITS: dict[tuple[str, int], dict | None] = {}


def reference_audit(exercise: str, case: TrainCase) -> dict | None:
    """`probes.bughunt.train_audit` of the fixed script on `case`, run here in the
    grader (it is the course's own code), quietly and without touching the grader's random
    state; None if it fails. Cached: the run is the same for every submission."""
    key = (exercise, id(case))
    if key not in _REFERENCE_AUDITS:
        import random

        import numpy as np

        from probes.bughunt import train_audit

        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            with torch.random.fork_rng(devices=[]):
                _REFERENCE_AUDITS[key] = quiet(train_audit, reference(
                    exercise.removeprefix("bughunt_")), **case.kwargs())
        except Exception:  # noqa: BLE001 - no reference, no reference histograms
            _REFERENCE_AUDITS[key] = None
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
    return _REFERENCE_AUDITS[key]


def record_grad_histograms(sub, case: TrainCase, record: dict, evidence: dict) -> None:
    """`grad_histograms` for the report: per parameter tensor, log10|grad| at the first and
    the last update of the script's train and of the fixed script's on the same harness.
    Parameter names come from the model the audit ran (the harness, or the fixed script's own
    class when train only runs on the script's model); a flat gradient of another length
    draws nothing. Evidence only: never raises, never part of a verdict."""
    try:
        from grader.checking.compare import grad_histogram_evidence
        from probes.bughunt import _own_model, build_model

        ref = reference_audit(sub.exercise, case)
        if record.get("model") == "harness":
            net: torch.nn.Module | None = build_model(case.model, case.sizes)
        else:
            net = _own_model(reference(sub.exercise.removeprefix("bughunt_")), case.own_model,
                             case.sizes)
        if net is None:
            return
        named = [(n, p.numel()) for n, p in net.named_parameters()]
        grads = [s.get("grad") for s in record.get("steps", [])]
        ref_grads = [s.get("grad") for s in ref["steps"]] \
            if ref and ref.get("model") == record.get("model") else []
        layers = grad_histogram_evidence(
            [n for n, _ in named], [k for _, k in named],
            {"yours_first": grads[0] if grads else None,
             "yours_last": grads[-1] if grads else None,
             "reference_first": ref_grads[0] if ref_grads else None,
             "reference_last": ref_grads[-1] if ref_grads else None})
        if layers:
            evidence["grad_histograms"] = {"steps": len(grads), "reference_steps": len(ref_grads),
                                           "layers": layers}
    except Exception:  # noqa: BLE001 - evidence is never part of a verdict
        return


def verify_fresh_gradients(sub, case: TrainCase, evidence: dict) -> None:
    """Each optimizer step uses exactly the gradient of the backward passes since the previous
    step (one batch's loss), one step per training batch."""
    record = train_record(sub, case)
    record_grad_histograms(sub, case, record, evidence)
    steps = record["steps"]
    n_batches = len(case.train_batches) * case.epochs
    evidence["steps"] = len(steps)
    evidence["backwards_per_step"] = [len(s["backwards"]) for s in steps][:300]
    ratios, empty, accumulated, repeated = [], [], [], []
    reused = [k + 1 for k, s in enumerate(steps) if s["freed_graph_reused"]]
    evidence["freed_graph_reused_steps"] = reused[:50]
    first_problem = (reused[0] - 1, "freed graph") if reused else None
    for k, s in enumerate(steps):
        grad = s["grad"]
        fresh = sum(s["backwards"]) if s["backwards"] else torch.zeros_like(grad)
        denominator = float(fresh.double() @ fresh.double())
        ratios.append(float(grad.double() @ fresh.double()) / denominator if denominator
                      else 0.0)
        if s["repeated_backward"]:
            repeated.append(k + 1)
        if not s["backwards"]:
            first_problem = first_problem or (k, "no backward")
            continue
        if _close(grad, fresh) and not s["repeated_backward"]:
            continue
        if float(grad.double().norm()) <= 1e-3 * float(fresh.double().norm()):
            empty.append(k + 1)
            first_problem = first_problem or (k, "empty")
            continue
        window = fresh.clone()
        for j in range(k - 1, -1, -1):
            window = window + (sum(steps[j]["backwards"]) if steps[j]["backwards"] else 0)
            if _close(grad, window):
                accumulated.append(k + 1)
                first_problem = first_problem or (k, f"accumulated {k - j}")
                break
        else:
            first_problem = first_problem or (k, "repeated" if s["repeated_backward"]
                                              else "other")
    evidence.update(grad_ratio=rounded(ratios[:300]), empty_grad_steps=empty[:50],
                    accumulated_steps=accumulated[:50], repeated_backward_steps=repeated[:50])
    # Trainable parameters that no backward pass reached at any step: the loss was cut off
    # from them (a detach() or .data on the way), although the model uses them.
    unreached = set.intersection(*(set(s.get("unreached", [])) for s in steps)) if steps \
        else set()
    trainable = record.get("trainable", 0)
    evidence["params_without_grad"] = len(unreached)
    call = case.call
    if len(steps) != n_batches:
        fail(f"{call}: {len(steps)} parameter updates for {n_batches} training batches "
             f"({len(case.train_batches)} per epoch, {case.epochs} epochs); expected one "
             "update per batch.", call=call, expected=f"{n_batches} updates",
             got=f"{len(steps)} updates")
    if first_problem is None:
        if unreached and len(unreached) < trainable:
            fail(f"{call}: {len(unreached)} of the model's {trainable} trainable parameter "
                 "tensors never received a gradient: no backward() of any batch reached them, "
                 "so the optimizer never changes them although the model uses them.",
                 call=call, expected="every trainable parameter gets a gradient",
                 got=f"{len(unreached)} without")
        return
    k, kind = first_problem
    where = f"{call}: at update {k + 1} (epoch {k // len(case.train_batches) + 1})"
    if kind == "freed graph":
        fail(f"{where} a second backward() went through the part of the graph the first one "
             "had already used and freed (the grader let it run; on its own, torch raises "
             "'Trying to backward through the graph a second time').", call=call,
             expected="one backward() per batch", got="two through the same graph")
    if kind == "no backward":
        fail(f"{where} no backward() had run since the previous update, so it used no new "
             "gradient.", call=call, expected="a backward() before every update",
             got="an update without one")
    if kind == "empty":
        fail(f"{where} the parameters' gradients (p.grad) were all zero although backward() "
             "had just computed a non-zero gradient: the update changed nothing.", call=call,
             expected="p.grad = this batch's gradient", got="p.grad empty")
    if kind.startswith("accumulated"):
        n = int(kind.split()[1])
        fail(f"{where} p.grad was not this batch's gradient but the sum of it and the gradients "
             f"of the {n} batch(es) before it (projected on this batch's gradient: "
             f"{ratios[k]:.2f}x), so the update moved the weights in a stale direction and "
             "further than the learning rate says.", call=call,
             expected="p.grad = this batch's gradient", got=f"a sum over {n + 1} batches")
    if kind == "repeated":
        fail(f"{where} backward() ran {len(steps[k]['backwards'])} times from the same loss, "
             f"so p.grad held its gradient {ratios[k]:.2f} times.", call=call,
             expected="each loss backpropagated once", got="the same loss twice")
    fail(f"{where} p.grad was not the gradient of the backward passes since the previous "
         f"update (ratio {ratios[k]:.2f}).", call=call, expected="this batch's gradient",
         got="another gradient")


def forwards(record: dict) -> tuple[list, list]:
    """(training forwards, validation forwards) as [training, grad_enabled] pairs. A forward
    is a validation forward when most of its samples are validation samples (the probe
    recognises them by value)."""
    train = [f[:2] for f in record["forwards"] if not _is_validation(f)]
    val = [f[:2] for f in record["forwards"] if _is_validation(f)]
    return train, val


def _is_validation(forward: list) -> bool:
    val, n = forward[2], forward[3]
    return n > 0 and 2 * val > n


def require_validation(record: dict, case: TrainCase, evidence: dict) -> list:
    """The validation forwards, after checking that the whole validation set went through
    the model after every epoch: however it is batched (the loader's batches, or the whole
    set in one pass), the validation samples seen add up to the set's size per epoch."""
    _, val = forwards(record)
    seen = sum(f[2] for f in record["forwards"] if _is_validation(f))
    size = sum(len(b[0]) for b in case.val_batches)
    evidence.update(val_forwards=len(val), val_samples_seen=seen)
    want = case.epochs * size
    if seen < want:
        fail(f"{case.call}: {seen} validation samples went through the model in "
             f"{case.epochs} epochs; expected the whole validation set ({size} samples) after "
             f"every epoch ({want}). Validation is part of the script: keep it.",
             call=case.call, expected=f"{want} validation samples", got=str(seen))
    return val


def verify_validation_mode(sub, case: TrainCase, evidence: dict) -> None:
    record = train_record(sub, case)
    val = require_validation(record, case, evidence)
    evidence["val_forward_modes"] = [v[0] for v in val][:100]
    if any(training is not False for training, _ in val):
        fail(f"{case.call}: the validation batches went through the model in training mode "
             f"(model.training was {[v[0] for v in val][:4]}...): dropout is still active and "
             "BatchNorm uses (and updates) batch statistics, so the same model gets different "
             "validation numbers each time.", call=case.call,
             expected="validation forwards with model.training False", got="training mode")


def verify_validation_graph(sub, case: TrainCase, evidence: dict) -> None:
    record = train_record(sub, case)
    val = require_validation(record, case, evidence)
    evidence["val_forward_grad_enabled"] = [v[1] for v in val][:100]
    if any(grad for _, grad in val):
        fail(f"{case.call}: the validation forward passes ran with gradient tracking on "
             "(torch.is_grad_enabled() was True): every one of them built an autograd graph "
             "that nothing uses, costing time and memory.", call=case.call,
             expected="validation without gradient tracking", got="gradient tracking on")


def verify_training_mode(sub, case: TrainCase, evidence: dict) -> None:
    record = train_record(sub, case)
    require_validation(record, case, evidence)
    train, _ = forwards(record)
    evidence["train_forward_modes"] = [t[0] for t in train][:200]
    wrong = [i for i, (training, _) in enumerate(train) if training is not True]
    if wrong:
        epoch = wrong[0] // len(case.train_batches) + 1
        fail(f"{case.call}: from epoch {epoch} on, training batches went through the model "
             f"with model.training False ({len(wrong)} of {len(train)} training forwards): "
             "dropout was off and BatchNorm used its running statistics while training.",
             call=case.call, expected="every training forward in training mode",
             got="eval mode after validation")


def verify_history(sub, case: TrainCase, evidence: dict) -> None:
    record = train_record(sub, case)
    history = record["history"]
    if history["type"] != "dict":
        fail(f"{case.call} returned a {history['type']}; expected the history dict with "
             f"{list(case.history_keys)}.", call=case.call, expected="a dict",
             got=history["type"])
    tensors = requires = 0
    for key in case.history_keys:
        entries = history["entries"].get(key)
        if entries is None or len(entries) != case.epochs:
            fail(f"{case.call} returned a history whose {key!r} is "
                 f"{'missing' if entries is None else f'{len(entries)} entries long'}; "
                 f"expected one entry per epoch ({case.epochs}).", call=case.call,
                 expected=f"{case.epochs} entries", got=short(entries))
        tensors += sum(e["kind"] == "tensor" for e in entries)
        requires += sum(e["kind"] == "tensor" and e["requires_grad"] for e in entries)
        others = [e.get("type") for e in entries if e["kind"] == "other"]
        if others:
            fail(f"{case.call} returned history[{key!r}] holding {others[0]} values; expected "
                 "Python floats.", call=case.call, expected="floats", got=others[0])
    evidence.update(history_tensor_entries=tensors, history_requires_grad=requires)
    if tensors:
        fail(f"{case.call} returned a history holding {tensors} tensors ({requires} of them "
             "still attached to an autograd graph: grad_fn=...) instead of numbers; each one "
             "keeps the graph of the batches it was computed from alive.", call=case.call,
             expected="Python floats", got="tensors")
    verify_train_loss_values(record, case)
    verify_validation_values(record, case)


def verify_validation_values(record: dict, case: TrainCase) -> None:
    """history["val_accuracy"] entries are fractions in [0, 1]; history["val_loss"][e] is a
    mean of epoch e's validation batch losses: between the smallest and the largest, when the
    loss function train is given recorded exactly one call per training and validation batch
    (the validation calls the last of each epoch's)."""
    entries = record["history"]["entries"]
    for e, entry in enumerate(entries.get("val_accuracy") or []):
        got = entry.get("value")
        if got is not None and not 0.0 <= got <= 1.0:
            fail(f"{case.call} returned history['val_accuracy'][{e}] = {got!r}; an accuracy is "
                 "the fraction of validation samples classified right, between 0 and 1.",
                 call=case.call, expected="a fraction in [0, 1]", got=f"{got!r}")
    calls = record.get("losses") or []
    n_train, n_val = len(case.train_batches), len(case.val_batches)
    per_epoch = n_train + n_val
    val_entries = entries.get("val_loss") or []
    if (len(calls) != per_epoch * case.epochs or len(val_entries) != case.epochs
            or any(c[0] is None or not math.isfinite(c[0]) for c in calls)):
        return
    for epoch, entry in enumerate(val_entries):
        batch = [c[0] for c in calls[epoch * per_epoch + n_train:(epoch + 1) * per_epoch]]
        low, high = min(batch), max(batch)
        slack = 1e-5 * max(abs(low), abs(high)) + 1e-7
        got = entry.get("value")
        if got is None or not low - slack <= got <= high + slack:
            fail(f"{case.call} returned history['val_loss'][{epoch}] = {got!r}; the losses of "
                 f"epoch {epoch + 1}'s validation batches lie between {low:.6g} and "
                 f"{high:.6g}, so their mean over the samples does too.", call=case.call,
                 expected=f"the mean of epoch {epoch + 1}'s validation losses", got=f"{got!r}")


def verify_train_loss_values(record: dict, case: TrainCase) -> None:
    """history["train_loss"][e] is a mean of epoch e's batch losses (over batches or over
    samples): it lies between the smallest and the largest loss train backpropagated in that
    epoch, and when the training batches are all of one size (where both means are one), it
    is their mean. Judged only when train ran exactly one backward() on a scalar per training
    batch (other checks speak for the rest)."""
    losses = record.get("backward_losses") or []
    per_epoch = len(case.train_batches)
    entries = record["history"]["entries"].get("train_loss") or []
    if (len(losses) != per_epoch * case.epochs or len(entries) != case.epochs
            or any(v is None or not math.isfinite(v) for v in losses)):
        return
    one_size = len({len(b[0]) for b in case.train_batches}) == 1
    for epoch, entry in enumerate(entries):
        batch = losses[epoch * per_epoch:(epoch + 1) * per_epoch]
        low, high = min(batch), max(batch)
        spread = f"lie between {low:.6g} and {high:.6g}, so their mean does too"
        if one_size:  # a running total that starts off zero, or a count off by one, fails
            low = high = sum(batch) / len(batch)
            spread = (f"have the mean {low:.6g} (batches of {len(case.train_batches[0][0])}: "
                      "over the batches or over the samples, the same)")
        # float32 losses summed as Python floats: a correct mean is within 1e-6 relative.
        slack = 1e-5 * max(abs(low), abs(high)) + 1e-7
        got = entry.get("value")
        if got is None or not low - slack <= got <= high + slack:
            fail(f"{case.call} returned history['train_loss'][{epoch}] = {got!r}; the losses it "
                 f"backpropagated in epoch {epoch + 1} {spread}.", call=case.call,
                 expected=f"the mean of epoch {epoch + 1}'s batch losses",
                 got=f"{got!r}")


def verify_log(sub, case: TrainCase, evidence: dict) -> None:
    record = train_record(sub, case)
    text = record["printed"]
    lines = [line for line in text.splitlines() if any(ch.isdigit() for ch in line)]
    tensors = "tensor(" in text or "grad_fn" in text
    evidence.update(printed_tensors=tensors, printed_lines=len(lines))
    if tensors:
        line = next(ln for ln in text.splitlines() if "tensor(" in ln or "grad_fn" in ln)
        fail(f"{case.call} printed tensors in its log, e.g. {line.strip()[:160]!r}; expected "
             "plain numbers.", call=case.call, expected="numbers", got="tensor(...)")
    if len(lines) < case.epochs:
        fail(f"{case.call} printed {len(lines)} lines with numbers in {case.epochs} epochs; "
             "the script logs one line per epoch: keep it.", call=case.call,
             expected=f"{case.epochs} lines", got=str(len(lines)))


def verify_schedule(sub, case: TrainCase, evidence: dict) -> None:
    record = train_record(sub, case)
    lrs = [s["lr"] for s in record["steps"]]
    per_epoch = len(case.train_batches)
    spec = case.scheduler
    # verify_schedule is for cases with an optimizer and a scheduler
    assert spec is not None and case.optimizer is not None
    base = case.optimizer["lr"]
    want = [base * spec["gamma"] ** (e // spec["step_size"]) for e in range(case.epochs)]
    evidence.update(lr_per_step=rounded(lrs[:300], 8), steps_per_epoch=per_epoch,
                    expected_lr_per_epoch=rounded(want, 8))
    expected = [lr for lr in want for _ in range(per_epoch)]
    if len(lrs) != len(expected):
        fail(f"{case.call}: {len(lrs)} updates for {len(expected)} training batches; cannot "
             "follow the learning-rate schedule.", call=case.call,
             expected=f"{len(expected)} updates", got=str(len(lrs)))
    for k, (a, b) in enumerate(zip(lrs, expected)):
        if not math.isclose(a, b, rel_tol=1e-9):
            fail(f"{case.call}: update {k + 1} (epoch {k // per_epoch + 1}, batch "
                 f"{k % per_epoch + 1}) used learning rate {a:.6g}; the schedule "
                 f"(StepLR(step_size={spec['step_size']}, gamma={spec['gamma']}) from "
                 f"{base}) gives {b:.6g} for that whole epoch. Learning rates of the updates: "
                 f"{rounded(lrs[:2 * per_epoch], 6)}...", call=case.call,
                 expected=f"lr {b:.6g}", got=f"lr {a:.6g}")


def verify_loss_input(sub, case: TrainCase, evidence: dict) -> None:
    """The loss function train is given receives the model's raw outputs."""
    record = train_record(sub, case)
    probabilities = sum(c[3] for c in record["losses"])
    evidence["loss_input_probabilities"] = probabilities
    if probabilities:
        fail(f"{case.call}: the loss function received rows of probabilities (every row "
             f"between 0 and 1, summing to 1) in {probabilities} of {len(record['losses'])} "
             "calls, not the model's raw scores.", call=case.call,
             expected="the model's outputs as they are", got="probabilities")


# --------------------------------------------------------------------------- model audit


def model_record(sub, cls: str, args: list, x: torch.Tensor, call: str) -> dict:
    require(sub, cls, call=call)
    return shared(sub, f"model_audit:{cls}", lambda: probe(
        sub, "model_audit", call, cls=cls, args=args, seed=7, x=x))


def verify_registration(sub, cls: str, args: list, x: torch.Tensor, expected: int,
                        evidence: dict) -> None:
    call = f"{cls}({', '.join(map(repr, args))})"
    rec = model_record(sub, cls, args, x, call)
    count = sum(math.prod(p["shape"]) for p in rec["parameters"])
    evidence.update(parameter_count=count, expected_parameter_count=expected,
                    unregistered_leaves=len(rec["unregistered_leaves"]),
                    module_lists=rec["module_lists"], bare_tensors=rec["bare_tensors"],
                    modules_created_in_forward=rec["modules_created_in_forward"],
                    unregistered_modules_called=rec["unregistered_modules_called"],
                    weight_draws_in_eval=rec.get("weight_draws_in_eval", 0))
    if rec["unregistered_leaves"]:
        fail(f"{call}: its output depends on {len(rec['unregistered_leaves'])} tensors that "
             f"require grad but are not in model.parameters() (shapes "
             f"{rec['unregistered_leaves'][:4]}): an optimizer built from model.parameters() "
             "never updates them and state_dict() does not save them.", call=call,
             expected="only registered parameters", got="unregistered tensors")
    if rec["modules_created_in_forward"]:
        fail(f"{call}: its forward() built {rec['modules_created_in_forward']} new layer(s) "
             "while running: their weights are new random numbers on every call.", call=call,
             expected="layers built once", got="layers built in forward")
    if count != expected:
        fail(f"{call} has {count} scalar parameters in model.parameters(); the network the "
             f"script describes has {expected}.", call=call, expected=str(expected),
             got=str(count))


def verify_dropout(sub, cls: str, args: list, x: torch.Tensor, evidence: dict) -> None:
    call = f"{cls}({', '.join(map(repr, args))})"
    rec = model_record(sub, cls, args, x, call)
    if rec["eval_outputs_differ"] is not None:  # None: no two outputs of one shape to compare
        evidence["eval_outputs_differ"] = bool(rec["eval_outputs_differ"])  # a Flag
    evidence.update(train_outputs_differ=rec["train_outputs_differ"],
                    active_dropout_in_eval=rec["active_dropout_in_eval"],
                    weight_draws_in_eval=rec.get("weight_draws_in_eval", 0))
    # Outputs that differ because forward() builds layers or draws weights afresh are the
    # registration's fault (its own check), not dropout's.
    fresh_weights = rec["modules_created_in_forward"] or rec.get("weight_draws_in_eval")
    if rec["active_dropout_in_eval"] or (rec["eval_outputs_differ"] and not fresh_weights):
        fail(f"{call}: in eval mode, two forward passes of the same input gave different "
             f"outputs ({rec['active_dropout_in_eval']} dropout operations were active): "
             "predictions and validation numbers are random.", call=call,
             expected="eval mode deterministic", got="different outputs")
    if not rec["train_outputs_differ"]:
        fail(f"{call}: in training mode, two forward passes of the same input gave the same "
             "output: the model has no working dropout any more. Dropout is part of the "
             "script: keep it.", call=call, expected="dropout in training mode",
             got="no dropout")


# --------------------------------------------------------------------------- setup capture


def setup_record(sub, call: str, **options) -> dict:
    require(sub, "run", "train", call=call)
    record = shared(sub, "setup", lambda: probe(sub, "setup_capture", call, **options))
    if not record["train_called"]:
        fail(f"{call} never called train(...): the grader looks at what run() hands to train; "
             "keep run() calling it.", call=call, expected="run() calls train",
             got="no call")
    return record


def nearest_deviation(seen: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest distance from a seen row to its nearest expected row (max-norm)."""
    d = (seen.double()[:, None, :] - expected.double()[None, :, :]).abs().amax(dim=2)
    return float(d.amin(dim=1).max())


def verify_standardized(record: dict, raw_train: torch.Tensor, raw_val: torch.Tensor,
                        call: str, evidence: dict) -> None:
    """What the first layer sees is the data standardised with the training split's mean and
    standard deviation (either convention for the std)."""
    seen = record.get("first_layer") or {}
    train, val = seen.get("train"), seen.get("val")
    if train is None or val is None:
        fail(f"{call}: the grader could not run the model on the loaders run() builds.",
             call=call)
    mean = raw_train.double().mean(0)
    devs, val_devs = [], []
    for ddof in (0, 1):
        std = raw_train.double().std(0, correction=ddof)
        devs.append(nearest_deviation(train, (raw_train.double() - mean) / std))
        val_devs.append(nearest_deviation(val, (raw_val.double() - mean) / std))
    evidence.update(normalisation_statistics(train, raw_train, raw_val))
    # The validation side too: validation features standardised with their own statistics
    # (or all the data's) are the same leak seen from the other split.
    val_side = normalisation_statistics(val, raw_train, raw_val, raw_seen=raw_val)
    evidence.update({f"val_{k}": v for k, v in val_side.items()})
    evidence.update(feature_mean=rounded(train.double().mean(0).tolist(), 3),
                    feature_std=rounded(train.double().std(0).tolist(), 3),
                    feature_deviation=round(min(devs), 6),
                    val_feature_deviation=round(min(val_devs), 6))
    # Correct code lands within 1e-5 (float32); fitting on other data is off by 0.01 or more.
    if min(devs) > 2e-3:
        fail(f"{call}: the training features reaching the model are not the training data "
             "standardised with its own statistics: per feature, their means are "
             f"{evidence['feature_mean']} and their standard deviations "
             f"{evidence['feature_std']} (a row differs by up to {min(devs):.3g}).",
             call=call, expected="means 0, standard deviations 1",
             got=f"means {evidence['feature_mean']}")
    if min(val_devs) > 2e-3:
        fail(f"{call}: the validation features reaching the model are not standardised with "
             f"the training split's mean and standard deviation (a row differs by up to "
             f"{min(val_devs):.3g}).", call=call,
             expected="validation data scaled with the training statistics",
             got="other scaling")


def normalisation_statistics(seen: torch.Tensor, raw_train: torch.Tensor,
                             raw_val: torch.Tensor, raw_seen: torch.Tensor | None = None
                             ) -> dict:
    """Which statistics the features `seen` (the rows of `raw_seen`, by default the training
    split) were standardised with, for diagnoses. If the features the model sees are
    (x - m) / s per feature, their mean and standard deviation give m and s back (from the rows
    the loaders yield: a dropped last batch moves them by well under 1 %). Evidence:
    `normaliser_fit_on` ("training split", "validation split", "all data" or None: statistics
    within 2 % of a standard deviation of those), `normaliser_skips` ("centring" when m is 0,
    "scaling" when s is 1, or None)."""
    raw = (raw_train if raw_seen is None else raw_seen).double()
    seen = seen.double()
    s = raw.std(0) / seen.std(0).clamp_min(1e-12)
    m = raw.mean(0) - seen.mean(0) * s
    best, where = math.inf, None
    # The mean and the scale each on their own too: a mean from one split and a standard
    # deviation from another (`normaliser_mean_from`, `normaliser_std_from`).
    best_m: tuple[float, str | None] = (math.inf, None)
    best_s: tuple[float, str | None] = (math.inf, None)
    train = raw_train.double()
    for name, data in (("training split", train), ("validation split", raw_val.double()),
                       ("all data", torch.cat([train, raw_val.double()]))):
        for ddof in (0, 1):
            std = data.std(0, correction=ddof)
            gap_m = float(((m - data.mean(0)).abs() / std).max())
            gap_s = float((s / std - 1).abs().max())
            best_m, best_s = min(best_m, (gap_m, name)), min(best_s, (gap_s, name))
            if max(gap_m, gap_s) < best:
                best, where = max(gap_m, gap_s), name
    skips = ("centring" if bool((m.abs() <= 0.02 * raw.std(0)).all()) else
             "scaling" if bool(((s - 1).abs() <= 0.02).all()) else None)
    return {"normaliser_fit_on": where if best <= 0.02 else None, "normaliser_skips": skips,
            "normaliser_mean_from": best_m[1] if best_m[0] <= 0.02 else None,
            "normaliser_std_from": best_s[1] if best_s[0] <= 0.02 else None}


def verify_mixed_batches(record: dict, call: str, evidence: dict) -> None:
    loader = record["train_loader"]
    if loader.get("error") or not loader.get("passes"):
        fail(f"{call}: the training loader could not be iterated "
             f"({loader.get('error', 'no batches')}).", call=call)
    labelled = [b["labels"] for p in loader["passes"] for b in p
                if "labels" in b and len(b["labels"]) > 1]
    single = sum(len(set(labels)) == 1 for labels in labelled)
    evidence.update(single_class_batches=single, batches=len(labelled))
    if labelled and single > len(labelled) / 2:
        fail(f"{call}: {single} of the {len(labelled)} training batches of two epochs hold a "
             "single class: the model sees one class at a time, and the last one seen wins.",
             call=call, expected="batches mixing the classes", got="one class per batch")


def verify_no_batch_of_one(record: dict, call: str, evidence: dict) -> None:
    loader = record["train_loader"]
    if loader.get("error") or not loader.get("passes"):
        fail(f"{call}: the training loader could not be iterated "
             f"({loader.get('error', 'no batches')}).", call=call)
    sizes = [b["size"] for b in loader["passes"][0]]
    norms = sum("BatchNorm" in m for m in record["model"].get("modules", []))
    evidence.update(batch_sizes=sizes[:100], batchnorm_layers=norms)
    if not norms:
        fail(f"{call}: the model run() trains has no BatchNorm layer any more; BatchNorm is "
             "part of the script: keep it.", call=call, expected="BatchNorm", got="none")
    if 1 in sizes:
        fail(f"{call}: the training loader yields a batch of a single sample (batch sizes "
             f"{sizes[:3]} ... {sizes[-2:]}), and BatchNorm in training mode cannot normalise "
             "one sample.", call=call, expected="no batch of one", got=f"sizes {sizes[-2:]}")


def verify_labels(record: dict, call: str, evidence: dict) -> None:
    first = record.get("first_loss") or {}
    dtype = first.get("target_dtype")
    if dtype is None:
        dtypes = {b.get("label_dtype") for p in record["train_loader"].get("passes", [])
                  for b in p}
        dtype = sorted(d for d in dtypes if d)[0] if dtypes - {None} else None
    evidence["target_dtype"] = dtype
    if first.get("error"):
        evidence["error"] = first["error"]
        fail(f"{call}: the loss rejected the labels it was given (dtype {dtype}): "
             f"{first['error']}", call=call, expected="int64 class indices", got=dtype)
    if dtype not in ("int64", "int32", "int16", "uint8", "long"):
        fail(f"{call}: the labels reaching the loss have dtype {dtype}; a classification loss "
             "needs class indices (int64).", call=call, expected="int64", got=str(dtype))


def verify_logits(record: dict, labels: torch.Tensor, call: str, evidence: dict) -> None:
    """The model's outputs are scores the script's loss treats as logits, or probabilities it
    treats as probabilities; never probabilities fed to a loss that applies softmax again."""
    probe_rec = record.get("logits") or {}
    out = probe_rec.get("output")
    if out is None or probe_rec.get("loss") is None:
        fail(f"{call}: the grader could not evaluate the script's loss on its model's output "
             f"({probe_rec.get('error') or 'no output'}).", call=call)
    y = labels
    out = out.double()
    probabilities = bool((out >= 0).all() and (out <= 1).all()
                         and torch.allclose(out.sum(1), torch.ones(len(out), dtype=out.dtype),
                                            atol=1e-4))
    as_logits = float(F.cross_entropy(out, y))
    evidence.update(outputs_are_probabilities=probabilities, loss=round(probe_rec["loss"], 6),
                    loss_if_logits=round(as_logits, 6))
    # The loss itself may apply softmax first (F.cross_entropy(F.softmax(out), y)): its value
    # is then the cross-entropy of the softmax of the model's scores, not of the scores.
    of_softmax = float(F.cross_entropy(out.softmax(1), y))
    applies_softmax = (not probabilities
                       and math.isclose(probe_rec["loss"], of_softmax, rel_tol=1e-4)
                       and not math.isclose(probe_rec["loss"], as_logits, rel_tol=1e-4))
    evidence["loss_applies_softmax"] = applies_softmax
    if applies_softmax:
        fail(f"{call}: the loss the script trains with applies softmax to the model's scores "
             f"before the cross-entropy: on the grader's batch it computed "
             f"{probe_rec['loss']:.4f}, the cross-entropy of softmax(scores), where the "
             f"scores' cross-entropy is "
             f"{as_logits:.4f}. That loss cannot fall below about "
             f"{floor_of(out.shape[1]):.2f} however right the model is.", call=call,
             expected="nn.CrossEntropyLoss on the raw scores", got="softmax applied twice")
    if probabilities and math.isclose(probe_rec["loss"], as_logits, rel_tol=1e-4):
        fail(f"{call}: the model's outputs are probabilities (each row between 0 and 1, "
             f"summing to 1), and the loss treats them as raw scores: it computed "
             f"{probe_rec['loss']:.4f}, the cross-entropy of a softmax of the probabilities. "
             f"That loss cannot fall below about {floor_of(out.shape[1]):.2f} however right "
             "the model is.", call=call, expected="logits for nn.CrossEntropyLoss",
             got="probabilities")


def floor_of(classes: int) -> float:
    """The smallest cross-entropy of softmax(p) over probability vectors p (a one-hot p)."""
    return math.log(classes - 1 + math.e) - 1


def verify_lr_trains(run_reference: Callable[[], list[float]], lr_text: str, call: str,
                     evidence: dict, threshold: float, *, lr: float | None = None,
                     reference_lr: float | None = None) -> None:
    curve = run_reference()
    finite = all(math.isfinite(v) for v in curve)
    evidence.update(lr=lr_text, loss_curve=rounded(curve), diverged=not finite)
    if lr is not None and reference_lr is not None:
        evidence["lr_over_reference"] = round(lr / reference_lr, 6)
    if not finite or curve[-1] > threshold:
        what = ("became nan/inf" if not finite else
                f"ended at {curve[-1]:.4g}, above {threshold:g}")
        fail(f"{call}: trained (by the grader, on well-scaled data) with the script's "
             f"optimizer settings ({lr_text}), the training loss {what}: "
             f"{rounded(curve[:8], 4)}...", call=call,
             expected=f"a finite loss below {threshold:g}", got=what)


def optimizer_settings(record: dict, call: str) -> tuple[type, dict, str]:
    """The optimizer class run() builds and the hyperparameters of its group with the largest
    learning rate (a torch.optim class: the grader rebuilds it)."""
    rep = record["optimizer"]
    if not rep.get("optimizer"):
        fail(f"{call}: run() passes train a {rep.get('type')} as the optimizer.", call=call)
    cls = getattr(torch.optim, rep["type"], None)
    if cls is None or not rep["module"].startswith("torch.optim"):
        fail(f"{call}: the optimizer is a {rep['module']}.{rep['type']}; the grader can only "
             "replay torch.optim optimizers.", call=call)
    group = max(rep["groups"], key=lambda g: g["hyper"].get("lr", 0.0))
    hyper = {k: (tuple(v) if isinstance(v, list) else v) for k, v in group["hyper"].items()
             if k in inspect_params(cls)}
    text = f"{rep['type']}(" + ", ".join(f"{k}={v!r}" for k, v in sorted(hyper.items())
                                        if k in ("lr", "momentum", "weight_decay")) + ")"
    return cls, hyper, text


def inspect_params(cls: type) -> set[str]:
    import inspect

    # The class's own __init__ is what is asked for (mypy calls reading it off a type unsound).
    init = cls.__init__  # type: ignore[misc]
    return set(inspect.signature(init).parameters) - {"self", "params"}


def quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def raised(exc: StudentRaised) -> str:
    return f"{exc.type}: {exc.raw_message}"[:500]


# --------------------------------------------------------------------------- evaluate


def verify_evaluate_over_samples(sub, case: TrainCase, batches_: list, loss: str, call: str,
                                 evidence: dict, score_weight: float = 0.0) -> None:
    """evaluate returns the loss (and, in a dict, the accuracy) averaged over the samples, not
    over the batches: the grader recomputes both from the outputs the model gave during the
    script's evaluate (each forward's rows recognised by value among the loader's samples), so
    a loop over the loader and one pass over its dataset are judged alike. `loss` is
    "cross_entropy" or "column_mse" (`evaluate(model, loader, loss_fn)`), or "two_heads"
    (`evaluate(model, loader)` on (x, y, s) batches: cross-entropy of the logits plus
    `score_weight` times the squared error of the score, the script's own loss)."""
    require(sub, "evaluate", call=call)
    rec = probe(sub, "evaluate_audit", call, model=case.model, sizes=case.sizes,
                state=case.state, batches=batches_, loss=loss, own_model=case.own_model)
    total, correct, count = _scored(rec["forwards"], batches_, loss, score_weight)
    value = rec["value"]
    got = value.get("loss") if isinstance(value, dict) else value
    evidence.update(samples_scored=count, returned=got if isinstance(got, (int, float)) else
                    str(got)[:100])
    if not count or not isinstance(got, (int, float)):
        return  # nothing to compare: the validation checks say what went wrong
    want = {"loss": total / count}
    if isinstance(value, dict) and loss != "column_mse":
        want["accuracy"] = correct / count
    evidence["over_samples"] = {k: round(v, 6) for k, v in want.items()}
    sizes = [len(b[0]) for b in batches_]
    why = (f" (batches of {sizes}: an average of the batches' averages weighs the samples "
           "of the small last batch more)" if len(set(sizes)) > 1 else "")
    for key, expected in want.items():
        returned = got if key == "loss" else value.get(key)
        if not isinstance(returned, (int, float)) or not math.isclose(
                returned, expected, rel_tol=1e-4, abs_tol=1e-6):
            fail(f"{call}: returned {key} {returned!r}; averaged over the {count} samples the "
                 f"model scored, it is {expected:.6g}{why}.",
                 call=call, expected=f"{key} {expected:.6g}", got=f"{key} {returned!r}")


def _scored(forwards: list, batches_: list, loss: str,
            score_weight: float) -> tuple[float, int, int]:
    """(summed loss, correct predictions, samples) over the forwards of the loader's samples,
    each row matched by value to its targets; forwards of anything else are left out."""
    from probes.bughunt import column_mse, row_keys

    targets: dict[Any, Any] = {}
    for batch in batches_:
        targets.update(zip(row_keys(batch[0]), zip(*(t.tolist() for t in batch[1:]))))
    total, correct, count = 0.0, 0, 0
    for x, out, *rest in forwards:
        keys = row_keys(x)
        if len(out) != len(keys) or not all(k in targets for k in keys):
            continue  # not a forward of the loader's samples
        columns = list(zip(*(targets[k] for k in keys)))
        y = torch.tensor(columns[0], dtype=batches_[0][1].dtype)
        score = rest[0].double().reshape(-1) if loss == "two_heads" else None
        if score is not None and len(score) != len(y):
            continue  # not the contract's (N,) score: nothing to compare it with
        if loss == "column_mse":
            total += float(column_mse(out.double(), y.double())) * len(y)
        else:
            total += float(F.cross_entropy(out.float(), y, reduction="sum"))
            correct += int((out.argmax(dim=1) == y).sum())
        if score is not None:
            s = torch.tensor(columns[1], dtype=torch.float64)
            total += score_weight * float(((score - s) ** 2).sum())
        count += len(y)
    return total, correct, count
