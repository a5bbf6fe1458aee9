"""The shipped curriculum's evidence keys and diagnosis rules (docs/AUTHORING.md, "Evidence,
probes and diagnoses"): what its checks record beyond the grader's own keys, and which catalogued
fault (faults.toml) the evidence of a failing check points to.

A rule is a plain function of one `CheckResult` (its evidence, status, message and targets),
declared with `@rule(fault_id)`; a test keeps rules and catalogue in step, and proves every fault
is diagnosed on a faulty variant of a reference. Rules read facts the checks measured (through
the keys declared here and in `grader.evidence.E`) or, for faults whose symptom is an error
raised by torch, the text of that error. They are specific: a rule fires on the measurement that
characterises its fault, not on a failure in general, so that a failing check without such
evidence gets no diagnosis rather than a wrong one.
"""

from __future__ import annotations

import math

from grader import evidence
from grader.evidence import (Count, Flag, Json, Key, Names, Number, Series, Steps, Text,
                             ev, flags, numbers, rule, says, targets)
from grader.models import CheckResult


class E(evidence.E):
    """The curriculum's own keys, by theme (the grader's are inherited): meaning first, then the
    check modules that write it."""

    # ----------------------------------------------------------- training steps and gradients
    steps = Key(Count | list[Count], "parameter updates seen (training_loops accumulation: one "
                "count per case)", "bughunt_common", "training_loops_verify", shown_only=True)
    backwards_per_step = Key(list[Count], "backward passes before each update",
                             "bughunt_common", "training_loops_verify")
    empty_grad_steps = Key(Steps, "updates whose p.grad was (nearly) empty",
                           "bughunt_common", "training_loops_verify")
    accumulated_steps = Key(Steps, "updates whose p.grad summed earlier batches' gradients",
                            "bughunt_common", "training_loops_verify")
    repeated_backward_steps = Key(Steps, "updates after two backward passes of one loss",
                                  "bughunt_common")
    freed_graph_reused_steps = Key(Steps, "updates after a backward through a freed graph",
                                   "bughunt_common")
    weight_error = Key(Json, "largest difference between the weights after training and "
                       "the reference's", "training_loops_verify", shown_only=True)
    optimizer_state_entries = Key(Count, "entries of the optimizer state loaded from the "
                                  "checkpoint", "training_loops_verify", shown_only=True)

    # ----------------------------------------------------------- losses and learning rates
    steps_per_epoch = Key(Count, "updates (batches) per epoch", "bughunt_common",
                          "training_loops_verify")
    expected_lr_per_epoch = Key(Series, "the schedule's learning rate per epoch",
                                "bughunt_common")
    run_lr_per_epoch = Key(Series, "the learning rate run() used per epoch",
                           "bughunt_classifier_verify_hidden", shown_only=True)
    run_expected_lr_per_epoch = Key(Series, "the contract's learning rate per epoch",
                                    "bughunt_classifier_verify_hidden", shown_only=True)
    loss = Key(Number | Series, "the loss computed (evaluate: one per case)",
               "bughunt_common", "training_loops_verify")
    reference_loss = Key(Series, "the reference's loss, one per case", "training_loops_verify",
                         shown_only=True)
    loss_if_logits = Key(Number, "the loss had the outputs been taken as logits",
                         "bughunt_common")
    lr = Key(Text, "the learning rate tried, as text", "bughunt_common", shown_only=True)
    lr_over_reference = Key(Number, "the script's learning rate over the fixed script's",
                            "bughunt_common")
    diverged = Key(Flag, "a reference run at the script's settings became nan/inf",
                   "bughunt_common")
    group_lrs = Key(dict[str, list[Json]], "learning rates of the optimizer's parameter groups, "
                    "by layer", "bughunt_finetune_verify_hidden", shown_only=True)

    # ----------------------------------------------------------- train / eval modes, history
    forward_modes = Key(list[Json], "[training, grad enabled] of each forward pass",
                        "training_loops_verify")
    val_forward_modes = Key(list[Json], "model.training at each validation forward pass",
                            "bughunt_common")
    val_forward_grad_enabled = Key(list[Json], "grad mode at each validation forward pass",
                                   "bughunt_common")
    train_forward_modes = Key(list[Json], "model.training at each training forward pass",
                              "bughunt_common")
    val_forwards = Key(Count, "validation forward passes", "bughunt_common", shown_only=True)
    val_samples_seen = Key(Count, "validation samples through the model in all epochs",
                           "bughunt_common", shown_only=True)
    history_tensor_entries = Key(Count, "history entries that are tensors, not floats",
                                 "bughunt_common")
    history_requires_grad = Key(Count, "history entries that are tensors with a graph",
                                "bughunt_common", shown_only=True)
    returned_tensor = Key(Flag, "the function returned a tensor where a float was due",
                          "training_loops_verify")
    printed_tensors = Key(Flag, "the log printed tensors (tensor(...), grad_fn)",
                          "bughunt_common")
    printed_lines = Key(Count, "printed lines holding numbers", "bughunt_common",
                        shown_only=True)
    params_changed = Key(Flag, "a manual update changed the parameters in place",
                         "test_bughunt_regression_hidden")

    # ----------------------------------------------------------- the model
    parameter_count = Key(Count, "scalar parameters registered", "bughunt_common",
                          "test_parameters")
    expected_parameter_count = Key(Count, "scalar parameters the model should have",
                                   "bughunt_common", "test_parameters")
    unregistered_leaves = Key(Count, "tensors requiring grad the output depends on that are no "
                              "registered parameter", "bughunt_common", "parameters_verify_hidden")
    parameters_without_grad = Key(Count, "registered parameters left without a gradient",
                                  "parameters_verify_hidden", shown_only=True)
    module_lists = Key(list[Json], "layers held in plain Python lists or dicts",
                       "bughunt_common", "parameters_verify_hidden", "test_parameters")
    bare_tensors = Key(list[Json], "weights held as plain tensors, not nn.Parameter",
                       "bughunt_common", "parameters_verify_hidden", "test_parameters")
    modules_created_in_forward = Key(Json, "layers built inside forward()", "bughunt_common",
                                     "parameters_verify_hidden", "test_parameters_hidden")
    unregistered_modules_called = Key(Json, "layers called that the model does not register",
                                      "bughunt_common")
    weight_draws_in_eval = Key(Json, "random weights drawn in forward() in eval mode",
                               "bughunt_common")
    active_dropout_in_eval = Key(Json, "dropout still active in eval mode", "bughunt_common")
    eval_outputs_differ = Key(Flag, "two eval-mode forward passes of one input differ",
                              "bughunt_common", "test_parameters_hidden")
    train_outputs_differ = Key(Json, "two train-mode forward passes of one input differ",
                               "bughunt_common", shown_only=True)
    linear_layers = Key(list[Json], "(in, out) features of the registered Linear layers",
                        "parameters_verify")
    kept_share = Key(Number, "share of activations dropout kept in training mode",
                     "parameters_verify_hidden", shown_only=True)
    expected_kept_share = Key(Number, "the share dropout should keep",
                              "parameters_verify_hidden", shown_only=True)
    lstsq_residual = Key(Number, "residual of the dropout-factor fit", "parameters_verify_hidden",
                         shown_only=True)
    step = Key(Count, "the step (of a running-statistics sequence) that failed",
               "parameters_verify", shown_only=True)
    mode = Key(Json, "train or eval at that step", "parameters_verify", shown_only=True)
    quantity = Key(Text, "what differed at that step (output or a statistic)",
                   "parameters_verify", shown_only=True)
    problem = Key(Text, "what is wrong with the optimizer's parameter groups "
                  "(e.g. old_head_in_optimizer)", "parameters_verify")
    returned = Key(Json, "what the student's function returned (a number, or its text)",
                   "bughunt_common", "parameters_verify", shown_only=True)
    expected = Key(Json, "what it should have returned", "parameters_verify", shown_only=True)
    head_changed = Key(Flag, "training changed the new head's weights",
                       "test_bughunt_finetune_hidden")
    optimizer_foreign_parameters = Key(Count, "optimizer parameters that are not the model's",
                                       "test_bughunt_finetune_hidden")
    logits_shape = Key(Json, "shape of the head's outputs", "test_bughunt_finetune_hidden",
                       shown_only=True)
    frozen_changed = Key(Names, "frozen layers' parameters training changed",
                         "test_bughunt_finetune_hidden")
    frozen_requires_grad = Key(Names, "frozen layers' parameters left requiring grad",
                               "test_bughunt_finetune_hidden")
    fine_tuned_unchanged = Key(Names, "layers to fine-tune that training left unchanged",
                               "test_bughunt_finetune_hidden", shown_only=True)

    # ----------------------------------------------------------- losses and outputs
    loss_input_probabilities = Key(Count, "loss calls given probabilities, not logits",
                                   "bughunt_common")
    loss_applies_softmax = Key(Flag, "the loss value matches cross-entropy of softmax outputs",
                               "bughunt_common")
    outputs_are_probabilities = Key(Flag, "the model's outputs all lie in [0, 1]",
                                    "bughunt_common")
    broadcast_shapes = Key(list[Json], "operations of the loss that built a (batch, batch) "
                           "tensor", "test_bughunt_regression_hidden")
    matches_broadcast_loss = Key(Flag, "the loss equals the mean over every pair of rows",
                                 "test_bughunt_regression_hidden")
    target_dtype = Key(Text | None, "dtype of the labels given to the loss", "bughunt_common")
    nonfinite = Key(Flag, "softmax_cross_entropy returned nan or inf", "manual_backward_verify")
    max_abs_logit = Key(Number, "the largest |logit| of that case", "manual_backward_verify")
    loss_is_inf = Key(Flag, "that loss was inf (not nan)", "manual_backward_verify")
    single_precision = Key(Flag, "the values agree with the expected ones to float32's "
                           "precision only", "manual_backward_verify")
    softmax_over_columns = Key(Flag, "the loss is the one of a softmax down each column "
                               "(axis=0)", "manual_backward_verify")
    grad_finite = Key(Flag, "that gradient was finite", "manual_backward_verify")
    samples_scored = Key(Count, "samples evaluate() scored", "bughunt_common", shown_only=True)
    over_samples = Key(dict[str, Number], "loss (and accuracy) averaged over samples",
                       "bughunt_common", shown_only=True)
    test_accuracy = Key(Number, "accuracy on held-out data", "training_loops_verify",
                        shown_only=True)
    unseeded_generators = Key(Names, "generators set_seed left unseeded",
                              "test_training_loops", shown_only=True)
    seeds_differ = Key(Flag, "runs with different seeds differ", "test_training_loops_hidden",
                       shown_only=True)
    seed_repeats = Key(Flag, "runs with the same seed are identical",
                       "test_training_loops_hidden", shown_only=True)

    # ----------------------------------------------------------- the data
    feature_mean = Key(Series, "per-feature mean of the training features the model sees",
                       "bughunt_common")
    feature_std = Key(Series, "per-feature std of those features", "bughunt_common")
    feature_deviation = Key(Number, "distance of the training features from standardised ones",
                            "bughunt_common", shown_only=True)
    val_feature_deviation = Key(Number, "the same for the validation features",
                                "bughunt_common", shown_only=True)
    normaliser_fit_on = Key(Text | None, "the data the standardisation's statistics came from "
                            "(training split, validation split, all data)", "bughunt_common")
    normaliser_skips = Key(Text | None, "centring or scaling left out of the standardisation",
                           "bughunt_common")
    normaliser_mean_from = Key(Text | None, "the data the mean came from", "bughunt_common")
    normaliser_std_from = Key(Text | None, "the data the std came from", "bughunt_common")
    val_normaliser_fit_on = Key(Text | None, "normaliser_fit_on, of the validation features",
                                "bughunt_common")
    val_normaliser_skips = Key(Text | None, "normaliser_skips, of the validation features",
                               "bughunt_common")
    val_normaliser_mean_from = Key(Text | None, "normaliser_mean_from, of the validation "
                                   "features", "bughunt_common")
    val_normaliser_std_from = Key(Text | None, "normaliser_std_from, of the validation "
                                  "features", "bughunt_common")
    input_modified = Key(Flag, "the function wrote into its input array",
                         "test_bughunt_pipeline_hidden")
    batch_sizes = Key(list[Json], "sizes of the training loader's batches", "bughunt_common")
    batchnorm_layers = Key(Count, "BatchNorm layers of the model", "bughunt_common")
    single_class_batches = Key(Count, "training batches holding one class only",
                               "bughunt_common")
    batches = Key(Count, "training batches of one pass", "bughunt_common")
    val_samples = Key(Count, "validation samples run() validated on",
                      "test_bughunt_classifier_hidden", "test_bughunt_finetune_hidden",
                      shown_only=True)
    expected_val_samples = Key(Count, "samples of the validation split",
                               "test_bughunt_classifier_hidden", "test_bughunt_finetune_hidden",
                               shown_only=True)

    # ----------------------------------------------------------- a bug hunt's visible checks
    run_keys = Key(list[Json], "keys of the dict run() returned", "bughunt_visible",
                   shown_only=True)
    history_lengths = Key(Names, "length of each history list run() returned",
                          "bughunt_visible", shown_only=True)
    non_finite = Key(Names, "history entries that are nan or inf", "bughunt_visible",
                     shown_only=True)
    output_shapes = Key(list[Json], "shapes of the model's outputs", "bughunt_visible",
                        shown_only=True)

    # ----------------------------------------------------------- gradients of manual_backward
    eps = Key(list[Number], "finite-difference steps tried", "test_manual_backward_hidden",
              shown_only=True)
    max_error = Key(list[Number], "worst error of the numerical gradient at each step",
                    "test_manual_backward_hidden", shown_only=True)
    error_ratios = Key(list[Number], "ratios of successive errors (4 for central differences)",
                       "test_manual_backward_hidden", shown_only=True)
    default_step = Key(Json, "the default finite-difference step", "test_manual_backward_hidden",
                       shown_only=True)

    # ----------------------------------------------------------- shapes and strides
    cpu_us_per_row = Key(list[Number | None], "CPU microseconds per row of each timed call",
                         "strides_broadcasting_verify_hidden", shown_only=True)
    one_call_per_row_us = Key(Number, "what a loop calling numpy once per row costs, per row",
                              "strides_broadcasting_verify_hidden", shown_only=True)


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
