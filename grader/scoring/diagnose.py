"""Diagnoses: which catalogued faults the evidence of a failing check points to.

A pipeline step between the checks and the outputs, for every exercise: `diagnose(result)`
fills `CheckResult.diagnoses` of every check that did not pass with the ids of the faults whose
rule matches it. A rule is a plain function of one `CheckResult` (its evidence, status, message
and targets), registered under a fault id of `grader/course/faults.toml`; a test keeps rules and
catalogue in step, and proves every fault is diagnosed on a faulty variant of a reference.

Rules read facts the checks measured (through the evidence keys declared, with their meaning
and the checks that write them, in `grader.evidence.E`) or, for
faults whose symptom is an error raised by torch, the text of that error. They are specific:
a rule fires on the measurement that characterises its fault, not on a failure in general, so
that a failing check without such evidence gets no diagnosis rather than a wrong one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from grader.course.faults import catalogue
from grader.evidence import E, Key
from grader.models import CheckResult, SubmissionResult

Rule = Callable[[CheckResult], bool]
RULES: dict[str, Rule] = {}


def rule(fault_id: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        if fault_id in RULES:
            raise ValueError(f"two rules for {fault_id}")
        RULES[fault_id] = fn
        return fn
    return register


def diagnose(result: SubmissionResult) -> SubmissionResult:
    """`result` with the diagnoses of every check that did not pass filled in (in place; the
    same object is returned). Passed checks get none."""
    known = catalogue()
    for check in result.checks:
        # A check may name the fault it found itself (`fail(..., fault=ID)`): kept when the
        # course's catalogue has it, before what the rules find.
        named = [f for f in check.diagnoses if f in known]
        check.diagnoses = [] if check.status == "passed" else \
            list(dict.fromkeys(named + diagnose_check(check)))
    return result


def diagnose_check(check: CheckResult) -> list[str]:
    """The ids of the faults whose rules match `check`, in catalogue order of the rules."""
    return [fid for fid, matches in RULES.items() if _safe(matches, check)]


def _safe(matches: Rule, check: CheckResult) -> bool:
    try:
        return bool(matches(check))
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
        return False  # evidence of another shape than the rule expects: no diagnosis


# --------------------------------------------------------------------------- reading evidence


def ev(check: CheckResult, key: Key, default: Any = None) -> Any:
    """The evidence `check` recorded under `key` (declared in `grader.evidence.E`), as
    recorded; rules cope with any shape (a wrong one is a TypeError, hence no diagnosis)."""
    return key.get(check.evidence, default)


def says(check: CheckResult, *phrases: str) -> bool:
    """The check's message or recorded error contains one of `phrases` (torch's own error
    texts, which are stable)."""
    text = f"{check.message}\n{ev(check, E.error, '')}"
    return any(p in text for p in phrases)


def numbers(values: Any) -> list[float]:
    """The numbers of a flat evidence list (non-numbers skipped)."""
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes, dict)):
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def targets(check: CheckResult, name: str) -> bool:
    return name in check.targets


def flags(values: Any) -> list:
    return list(values) if isinstance(values, list) else []


# --------------------------------------------------------------------------- the training loop


@rule("grad-not-zeroed")
def _grad_not_zeroed(c: CheckResult) -> bool:
    # p.grad at a step held the gradients of earlier batches too (bug hunts, training_loops).
    if ev(c, E.accumulated_steps):
        return True
    # Gradients reset for some parameters only: no step's p.grad is a whole sum of earlier
    # batches, but the first update (nothing to accumulate yet) used its own batch's gradient
    # exactly and later ones, each after exactly one backward, did not.
    backs, ratios = numbers(ev(c, E.backwards_per_step)), numbers(ev(c, E.grad_ratio))
    clean = not any(ev(c, k) for k in (E.empty_grad_steps, E.repeated_backward_steps,
                                       E.freed_graph_reused_steps, E.params_without_grad))
    return bool(clean and len(ratios) >= 2 and backs and all(b == 1 for b in backs)
            and math.isclose(ratios[0], 1.0, abs_tol=1e-3)
            and any(not math.isclose(r, 1.0, abs_tol=1e-3) for r in ratios[1:]))


@rule("zero-grad-after-backward")
def _zero_grad_after_backward(c: CheckResult) -> bool:
    # p.grad empty at a step right after a backward; a step with no backward before it at all
    # is another mistake (step() before backward()), which also leaves p.grad empty.
    backs = numbers(ev(c, E.backwards_per_step))
    return bool(ev(c, E.empty_grad_steps)) and 0 not in backs


@rule("double-backward")
def _double_backward(c: CheckResult) -> bool:
    if says(c, "Trying to backward through the graph a second time"):
        return True
    if ev(c, E.repeated_backward_steps) or ev(c, E.freed_graph_reused_steps):
        return True
    # training_loops: two backward passes before a step, and p.grad twice the newest one.
    backs = numbers(ev(c, E.backwards_per_step))
    ratios = numbers(ev(c, E.grad_ratio))
    return any(b >= 2 for b in backs) and any(abs(r - 2) < 0.05 for r in ratios)


@rule("inplace-on-saved-tensor")
def _inplace_on_saved_tensor(c: CheckResult) -> bool:
    # torch's own refusal, whichever check's call raised it. (The other faults of the autograd
    # graph have no rule: the checks of autograd_graph name them, fail(..., fault=ID).)
    return says(c, "needed for gradient computation has been modified by an inplace operation")


@rule("scheduler-stepped-per-batch")
def _scheduler_per_batch(c: CheckResult) -> bool:
    lrs = numbers(ev(c, E.lr_per_step))
    per_epoch = ev(c, E.steps_per_epoch)
    if not lrs or not isinstance(per_epoch, int) or per_epoch < 2:
        return False
    # The rate changed between two updates of one epoch.
    if any(not math.isclose(lrs[i], lrs[i + 1], rel_tol=1e-9)
           for i in range(len(lrs) - 1) if (i + 1) % per_epoch):
        return True
    # Or stepped once per batch in a burst (a loop over the loader's length at the end of an
    # epoch): constant within an epoch, but from one epoch to the next the rate moved by the
    # schedule's factor to the power of the batches per epoch.
    expected = numbers(ev(c, E.expected_lr_per_epoch))
    firsts = lrs[::per_epoch]
    if len(expected) < 2 or len(firsts) < 2 or not expected[0] or not firsts[0]:
        return False
    factor = (expected[1] / expected[0]) ** per_epoch
    return factor != 1 and math.isclose(firsts[0], expected[0], rel_tol=1e-3) and all(
        math.isclose(b / a, factor, rel_tol=1e-2) for a, b in zip(firsts, firsts[1:]))


@rule("validation-without-eval")
def _validation_without_eval(c: CheckResult) -> bool:
    if any(m is not False for m in flags(ev(c, E.val_forward_modes))):
        return True
    # training_loops.evaluate: forward_modes are [training, grad_enabled] pairs.
    modes = flags(ev(c, E.forward_modes))
    return targets(c, "evaluate") and any(isinstance(m, list) and m[0] is not False
                                          for m in modes)


@rule("validation-without-no-grad")
def _validation_without_no_grad(c: CheckResult) -> bool:
    if any(flags(ev(c, E.val_forward_grad_enabled))):
        return True
    modes = flags(ev(c, E.forward_modes))
    return targets(c, "evaluate") and any(isinstance(m, list) and m[1] is True for m in modes)


@rule("train-mode-not-restored")
def _train_mode_not_restored(c: CheckResult) -> bool:
    if any(m is not True for m in flags(ev(c, E.train_forward_modes))):
        return True
    modes = flags(ev(c, E.forward_modes))
    return targets(c, "train_epoch") and any(isinstance(m, list) and m[0] is not True
                                             for m in modes)


@rule("loss-history-tensors")
def _loss_history_tensors(c: CheckResult) -> bool:
    return bool(ev(c, E.history_tensor_entries)) or ev(c, E.returned_tensor) is True


@rule("print-tensor-logging")
def _print_tensor_logging(c: CheckResult) -> bool:
    return ev(c, E.printed_tensors) is True


@rule("manual-update-rebinds")
def _manual_update_rebinds(c: CheckResult) -> bool:
    return ev(c, E.params_changed) is False


@rule("inplace-update-outside-no-grad")
def _inplace_update(c: CheckResult) -> bool:
    return says(c, "a leaf Variable that requires grad is being used in an in-place operation")


# --------------------------------------------------------------------------- the model


@rule("softmax-before-cross-entropy")
def _softmax_before_cross_entropy(c: CheckResult) -> bool:
    if ev(c, E.loss_input_probabilities) or ev(c, E.loss_applies_softmax) is True:
        return True
    loss, as_logits = ev(c, E.loss), ev(c, E.loss_if_logits)
    return (ev(c, E.outputs_are_probabilities) is True and isinstance(loss, (int, float))
            and isinstance(as_logits, (int, float))
            and math.isclose(loss, as_logits, rel_tol=1e-3))


def _unregistered(c: CheckResult) -> bool:
    count, expected = ev(c, E.parameter_count), ev(c, E.expected_parameter_count)
    short = isinstance(count, int) and isinstance(expected, int) and count < expected
    return short or bool(ev(c, E.unregistered_leaves))


@rule("layers-in-plain-list")
def _layers_in_plain_list(c: CheckResult) -> bool:
    return bool(ev(c, E.module_lists)) and _unregistered(c)


@rule("layer-created-in-forward")
def _layer_created_in_forward(c: CheckResult) -> bool:
    # A layer built in forward(), or its weight drawn there (F.linear(x, torch.randn(...))):
    # the network is short of parameters and forward() draws random weights.
    if ev(c, E.modules_created_in_forward):
        return True
    count, expected = ev(c, E.parameter_count), ev(c, E.expected_parameter_count)
    return (bool(ev(c, E.weight_draws_in_eval)) and isinstance(count, int)
            and isinstance(expected, int) and count < expected)


@rule("tensor-not-parameter")
def _tensor_not_parameter(c: CheckResult) -> bool:
    if ev(c, E.bare_tensors):
        return _unregistered(c)
    # A weight held where model.parameters() does not look (a buffer, a dict, a tuple) and
    # no module hidden anywhere: the output depends on a leaf that is no parameter.
    return (bool(ev(c, E.unregistered_leaves)) and not ev(c, E.module_lists)
            and not ev(c, E.modules_created_in_forward)
            and not ev(c, E.unregistered_modules_called) and not ev(c, E.weight_draws_in_eval))


@rule("detach-on-path")
def _detach_on_path(c: CheckResult) -> bool:
    return bool(ev(c, E.params_without_grad)) or says(
        c, "does not require grad and does not have a grad_fn")


@rule("validation-leak")
def _validation_leak(c: CheckResult) -> bool:
    # A bug hunt's end-to-end run: samples of one split among those the other loader yields.
    return bool(ev(c, E.val_samples_in_training)) or bool(ev(c, E.training_samples_in_validation))


@rule("labels-separated-from-samples")
def _labels_separated(c: CheckResult) -> bool:
    return bool(ev(c, E.train_wrong_labels)) or bool(ev(c, E.val_wrong_labels))


@rule("dropout-always-on")
def _dropout_always_on(c: CheckResult) -> bool:
    if ev(c, E.active_dropout_in_eval):
        return True
    # Layers model.modules() cannot see (a plain list) miss model.eval() too: their dropout
    # stays on, but the cause is the registration, not F.dropout.
    return (ev(c, E.eval_outputs_differ) is True and not ev(c, E.modules_created_in_forward)
            and not ev(c, E.weight_draws_in_eval) and ev(c, E.linear_layers) != [])


# --------------------------------------------------------------------------- set-up


@rule("optimizer-before-head-replaced")
def _optimizer_before_head(c: CheckResult) -> bool:
    if ev(c, E.problem) == "old_head_in_optimizer":
        return True
    return bool(ev(c, E.optimizer_foreign_parameters)) and ev(c, E.head_changed) is False


@rule("backbone-not-frozen")
def _backbone_not_frozen(c: CheckResult) -> bool:
    return bool(ev(c, E.frozen_changed)) or bool(ev(c, E.frozen_requires_grad))


@rule("lr-too-high")
def _lr_too_high(c: CheckResult) -> bool:
    # A reference run at the script's settings, on well-scaled data, diverged, or failed to
    # train with a learning rate above the fixed script's.
    ratio = ev(c, E.lr_over_reference)
    return ev(c, E.diverged) is True or (isinstance(ratio, (int, float)) and ratio > 1.5)


# --------------------------------------------------------------------------- losses


@rule("loss-broadcast")
def _loss_broadcast(c: CheckResult) -> bool:
    return bool(ev(c, E.broadcast_shapes)) or ev(c, E.matches_broadcast_loss) is True


@rule("float-labels")
def _float_labels(c: CheckResult) -> bool:
    dtype = ev(c, E.target_dtype)
    return (isinstance(dtype, str) and dtype.startswith(("float", "double", "half"))) or says(
        c, "expected target dtype to be Long", "expected scalar type Long")


def _log_of_zero(c: CheckResult) -> bool:
    # A loss of inf beside a finite gradient: the softmax was computed stably (its gradient,
    # softmax - one_hot, is fine) and log() met a probability that rounded to 0.
    return ev(c, E.loss_is_inf) is True and ev(c, E.grad_finite) is True


@rule("unstable-softmax")
def _unstable_softmax(c: CheckResult) -> bool:
    return (ev(c, E.nonfinite) is True and ev(c, E.max_abs_logit, 0) >= 100
            and not _log_of_zero(c))


@rule("single-precision")
def _single_precision(c: CheckResult) -> bool:
    return ev(c, E.single_precision) is True


@rule("softmax-over-columns")
def _softmax_over_columns(c: CheckResult) -> bool:
    return ev(c, E.softmax_over_columns) is True


@rule("log-of-rounded-softmax")
def _log_of_rounded_softmax(c: CheckResult) -> bool:
    return ev(c, E.nonfinite) is True and ev(c, E.max_abs_logit, 0) >= 100 and _log_of_zero(c)


# --------------------------------------------------------------------------- the data


def _feature_scale(c: CheckResult) -> float | None:
    values = numbers(ev(c, E.feature_std)) + [abs(v) for v in numbers(ev(c, E.feature_mean))]
    return max(values) if values else None


@rule("unnormalised-features")
def _unnormalised_features(c: CheckResult) -> bool:
    # Raw scales reach the model, or the standardisation leaves out its centring or scaling.
    # Either split counts: training features standardised but validation ones left raw (or
    # only centred, or only scaled) is the same fault seen from the validation side.
    scale = _feature_scale(c)
    return ((scale is not None and scale > 5.0) or ev(c, E.normaliser_skips) is not None
            or ev(c, E.val_normaliser_skips) is not None)


@rule("normaliser-fit-on-validation")
def _normaliser_fit_elsewhere(c: CheckResult) -> bool:
    # Standardised with the statistics of the validation split or of all the data: the
    # training features, or the validation features (each split with its own statistics).
    # Or only one of the two statistics from elsewhere (the mean of the training split, the
    # standard deviation of the validation split).
    elsewhere = ("validation split", "all data")
    return any(ev(c, key) in elsewhere for key in (
        E.normaliser_fit_on, E.normaliser_mean_from, E.normaliser_std_from,
        E.val_normaliser_fit_on, E.val_normaliser_mean_from, E.val_normaliser_std_from))


@rule("numpy-alias-mutation")
def _numpy_alias(c: CheckResult) -> bool:
    return ev(c, E.input_modified) is True or ev(c, E.shares_memory_with_input) is True


@rule("batchnorm-batch-of-one")
def _batchnorm_batch_of_one(c: CheckResult) -> bool:
    sizes = numbers(ev(c, E.batch_sizes))
    if 1 in sizes and ev(c, E.batchnorm_layers):
        return True
    return says(c, "Expected more than 1 value per channel when training")


@rule("no-shuffle-sorted-data")
def _no_shuffle(c: CheckResult) -> bool:
    single, total = ev(c, E.single_class_batches), ev(c, E.batches)
    return bool(isinstance(single, int) and isinstance(total, int) and total
                and single > total / 2)
