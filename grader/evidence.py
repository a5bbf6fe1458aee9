"""The evidence keys: every fact a check may record, declared once (name, type, meaning, writers).

Checks record evidence (`fail(..., evidence={...})`, or the `evidence` fixture dict) that the
grader reads after them: diagnosis rules (`grader.scoring.diagnose`), report pictures
(`grader.outputs.plots`)
and report facts (`grader.outputs.report`). This module is the contract between those steps:

- a key is a class attribute of `E`, so its name is written once: `E.loss_curve` is the key
  "loss_curve", and `E.loss_curve.get(evidence)` reads it (its value as recorded, never
  converted: a reader still copes with any shape, evidence is no verdict);
- readers go through `E` (an attribute that is not declared is an AttributeError, and
  `tests/test_evidence.py` finds every `E.<name>` a reader names), never through a string, so
  an undeclared key cannot be read silently;
- `problems(evidence)` names the keys of a recorded dict that are undeclared or of another
  type than declared; `grader.checking.plugin` calls it where a check's evidence is recorded (see
  `grader.checking.plugin.check_evidence`), and `tests/test_evidence.py` scans every writer and
  reader.

Types describe what the check's own code records. Values a check copies from student code or
from a worker's record (`returned`, curves returned by the student) are declared loosely:
such a value may be anything, and it must never turn a check's verdict.

Imports only the standard library and pydantic: this module describes data, it runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

# Shapes of evidence values (JSON as results.json holds them: tuples are lists there).
Number = float  # an int is a number too
Count = int
Flag = bool
Text = str
Series = list[float | str | None]  # numbers; None or "nan"/"inf" text where not finite
Steps = list[int]  # 1-based step (update) numbers
Names = list[str]
Shape = list[int]
Json = Any  # plain data of any shape (often copied from student code or a worker's record)


class Key:
    """One evidence key. Its name is the attribute it is bound to in `E`.

    `writers`: the check modules (a course's `checks/<name>.py`) or grader modules that record it.
    `drawn`: a report picture (`grader.outputs.plots`) shows it, so the report does not repeat it
    as a
    text fact. `shown_only`: no rule or picture reads it; the report shows it as a fact."""

    def __init__(self, type_: Any, meaning: str, *writers: str, drawn: bool = False,
                 shown_only: bool = False):
        self.type = type_
        self.meaning = meaning
        self.writers = writers
        self.drawn = drawn
        self.shown_only = shown_only
        self.name = ""
        self._adapter: TypeAdapter | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Key({self.name!r})"

    def get(self, evidence: Mapping[str, Any], default: Any = None) -> Any:
        """The value recorded under this key (as recorded), or `default`."""
        return evidence.get(self.name, default)

    def problem(self, value: Any) -> str | None:
        """Why `value` is not of this key's type, or None when it is."""
        if self._adapter is None:
            self._adapter = TypeAdapter(self.type)
        try:
            self._adapter.validate_python(_as_json(value), strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return (f"evidence {self.name!r} is not {_type_name(self.type)}"
                    f"{f' (at {where})' if where else ''}: {first['msg']}")
        return None


def _as_json(value: Any) -> Any:
    """`value` as results.json will hold it: tuples become lists."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


class E:
    """Every evidence key, by theme. Meaning first, then the modules that write it."""

    # ----------------------------------------------------------- training steps and gradients
    steps = Key(Count | list[Count], "parameter updates seen (training_loops accumulation: one "
                "count per case)", "bughunt_common", "training_loops_verify", shown_only=True)
    backwards_per_step = Key(list[Count], "backward passes before each update",
                             "bughunt_common", "training_loops_verify")
    grad_ratio = Key(float | str | None | Series | list[Series],
                     "p.grad at each update over the newest batch's gradient (1 right, 2 for "
                     "two batches summed); manual_backward: the constant factor between the "
                     "gradient returned and the right one", "bughunt_common",
                     "manual_backward_verify", "training_loops_verify", drawn=True)
    empty_grad_steps = Key(Steps, "updates whose p.grad was (nearly) empty",
                           "bughunt_common", "training_loops_verify")
    accumulated_steps = Key(Steps, "updates whose p.grad summed earlier batches' gradients",
                            "bughunt_common", "training_loops_verify")
    repeated_backward_steps = Key(Steps, "updates after two backward passes of one loss",
                                  "bughunt_common")
    freed_graph_reused_steps = Key(Steps, "updates after a backward through a freed graph",
                                   "bughunt_common")
    params_without_grad = Key(Count | Names, "trainable parameters no backward pass reached "
                              "(a count, or their names)", "bughunt_common", "bughunt_e2e",
                              "test_bughunt_finetune_hidden")
    grad_histograms = Key(dict[str, Json], "per parameter tensor (at most 8), the distribution of "
                          "log10|grad| at the first and the last optimizer step, yours and the "
                          "reference's on the same data: {steps, reference_steps, layers: [{name, "
                          "yours_first, yours_last, reference_first, reference_last}]}, each a "
                          "grader.checking.compare.grad_histogram", "bughunt_common",
                          "training_loops_verify", drawn=True)
    weight_error = Key(Json, "largest difference between the weights after training and "
                       "the reference's", "training_loops_verify", shown_only=True)
    optimizer_state_entries = Key(Count, "entries of the optimizer state loaded from the "
                                  "checkpoint", "training_loops_verify", shown_only=True)

    # ----------------------------------------------------------- losses and learning rates
    loss_curve = Key(list[Json], "the loss at each step or batch, as the student's code gave "
                     "it", "bughunt_common", "manual_backward_verify", "training_loops_verify",
                     drawn=True)
    reference_loss_curve = Key(Series, "the reference's loss at each step or batch",
                               "manual_backward_verify", "training_loops_verify", drawn=True)
    val_loss_curve = Key(list[Json], "the validation loss per epoch (fit's history)",
                         "training_loops_verify", drawn=True)
    reference_val_loss_curve = Key(Series, "the reference's validation loss per epoch",
                                   "training_loops_verify", drawn=True)
    lr_per_step = Key(list[Json], "the learning rate at each update", "bughunt_common",
                      "training_loops_verify", drawn=True)
    reference_lr_per_step = Key(Series, "the reference's learning rate at each update",
                                "training_loops_verify", drawn=True)
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
    error = Key(Text, "the error student code raised (torch's text, read by rules)",
                "bughunt_common", "test_bughunt_regression_hidden")
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
    shares_memory_with_input = Key(Flag, "the result is a view of the input", "compare")
    changed_inputs = Key(Names, "inputs (shared arrays) the call wrote into", "student",
                         "data_pipeline_verify", shown_only=True)
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
    grad_errors = Key(list[dict[str, Json]], "per gradient: its name, worst error and the "
                      "tolerance there (grader.checking.compare.error_evidence)",
                      "manual_backward_verify", "test_parameters_hidden", drawn=True)
    descent_path = Key(list[list[Number] | None], "(w, b) after each step of the student's "
                       "gradient descent", "manual_backward_verify", drawn=True)
    reference_descent_path = Key(list[list[Number]], "(w, b) after each reference step",
                                 "manual_backward_verify", drawn=True)
    loss_surface = Key(dict[str, Number], "the five moments that fix L(w, b) of the descent "
                       "picture", "manual_backward_verify", drawn=True)
    lr_sweep = Key(dict[str, Json], "fit_linear_gd at three learning rates on a one-feature "
                   "problem: {surface: the five moments of its loss, steps, runs: [{lr, yours: "
                   "(w, b) per step or None, reference: the same, problem: why yours is "
                   "missing}]}", "manual_backward_verify", drawn=True)
    eps = Key(list[Number], "finite-difference steps tried", "test_manual_backward_hidden",
              shown_only=True)
    max_error = Key(list[Number], "worst error of the numerical gradient at each step",
                    "test_manual_backward_hidden", shown_only=True)
    error_ratios = Key(list[Number], "ratios of successive errors (4 for central differences)",
                       "test_manual_backward_hidden", shown_only=True)
    default_step = Key(Json, "the default finite-difference step", "test_manual_backward_hidden",
                       shown_only=True)

    # ----------------------------------------------------------- shapes and strides
    shapes = Key(list[Shape], "the shapes broadcast (or the shape and the target)",
                 "strides_broadcasting_verify", drawn=True)
    shape_labels = Key(Names, "labels of those shapes", "strides_broadcasting_verify",
                       drawn=True)
    expected_shape = Key(Shape | None, "the broadcast shape (None: incompatible)",
                         "strides_broadcasting_verify", drawn=True)
    got_shape = Key(list[Json], "the shape the student's function returned",
                    "test_strides_broadcasting", "test_strides_broadcasting_hidden", drawn=True)
    expected_strides = Key(list[Json], "the strides of the broadcast view",
                           "strides_broadcasting_verify", drawn=True)
    got_strides = Key(list[Json], "the strides the student's function returned",
                      "test_strides_broadcasting", "test_strides_broadcasting_hidden",
                      drawn=True)
    cpu_us_per_row = Key(list[Number | None], "CPU microseconds per row of each timed call",
                         "strides_broadcasting_verify_hidden", shown_only=True)
    one_call_per_row_us = Key(Number, "what a loop calling numpy once per row costs, per row",
                              "strides_broadcasting_verify_hidden", shown_only=True)

    # ----------------------------------------------------------- bug hunts' end-to-end runs
    params_unchanged = Key(Names, "parameter tensors run() left at their initial values "
                           "(beyond those with negligible gradients)", "bughunt_e2e",
                           shown_only=True)
    unchanged_elements = Key(Count, "parameter elements run() left at their initial values",
                             "bughunt_e2e", shown_only=True)
    frozen_elements = Key(Count, "parameter elements the contract freezes", "bughunt_e2e",
                          shown_only=True)
    learnable_elements = Key(Count, "elements of the parameters (and tensors that require grad) "
                             "of the model run() trains", "bughunt_e2e", shown_only=True)
    expected_elements = Key(Count, "elements of the parameters of the contract's network",
                            "bughunt_e2e", shown_only=True)
    distinct_train_samples = Key(Count, "distinct samples the training loader yields in two "
                                 "passes", "bughunt_e2e", shown_only=True)
    distinct_val_samples = Key(Count, "distinct samples the validation loader yields",
                               "bughunt_e2e", shown_only=True)
    val_samples_in_training = Key(Count, "validation samples the training loader yields",
                                  "bughunt_e2e")
    training_samples_in_validation = Key(Count, "training samples the validation loader yields",
                                         "bughunt_e2e")
    unrecognised_rows = Key(Count, "rows the loaders yield that are no sample of the data",
                            "bughunt_e2e", shown_only=True)
    train_wrong_labels = Key(Count, "training samples yielded with another sample's label",
                             "bughunt_e2e")
    val_wrong_labels = Key(Count, "validation samples yielded with another sample's label",
                           "bughunt_e2e")
    outcome = Key(Number | None, "accuracy (or mean squared error) of the model run() returned "
                  "on the validation samples", "bughunt_e2e", shown_only=True)
    reference_outcome = Key(Number, "the same of the fixed script's run", "bughunt_e2e",
                            shown_only=True)
    outcome_metric = Key(Text, "accuracy or mse", "bughunt_e2e", shown_only=True)
    script_data_differs = Key(Flag, "the script's data function gave other samples than the "
                              "contract's: its outcome is not compared", "bughunt_e2e",
                              shown_only=True)

    # ----------------------------------------------------------- written by the grader itself
    omitted = Key(Text, "evidence too large for its result, dropped whole", "models",
                  shown_only=True)


KEYS: dict[str, Key] = {k.name: k for k in vars(E).values() if isinstance(k, Key)}


def undeclared(evidence: Mapping[str, Any]) -> list[str]:
    """The keys of `evidence` not declared in `E`."""
    return [name for name in evidence if name not in KEYS]


def problems(evidence: Mapping[str, Any]) -> list[str]:
    """What is wrong with a check's recorded evidence: keys not declared in `E`, values not of
    their key's type. Empty when all is declared."""
    out = []
    for name, value in evidence.items():
        key = KEYS.get(name)
        if key is None:
            out.append(f"evidence key {name!r} is not declared in grader.evidence.E")
            continue
        problem = key.problem(value)
        if problem:
            out.append(problem)
    return out
