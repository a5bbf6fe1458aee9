"""Diagnosis rules one by one (grader/scoring/diagnose.py), on CheckResults built by hand: each
rule fires on the evidence that characterises its fault (keys and shapes as the checks write them,
see grader/checks/bughunt_common.py and test_training_loops.py), and not on evidence a step away
from it. No grading: the fast tier. (tests/test_faults.py proves the same rules on real graded
faulty variants, in a sandbox.)"""

from __future__ import annotations

import pytest

from grader.course.faults import catalogue
from grader.models import CheckResult, SubmissionResult
from grader.course.knowledge import knowledge
from grader.scoring.diagnose import diagnose, diagnose_check

RULES = dict(knowledge().rules)  # the shipped curriculum's (checks/diagnoses.py), in order

pytestmark = pytest.mark.fast


def check(evidence=None, *, message="f(...) did something else.", targets=("train",),
          status="failed", **fields) -> CheckResult:
    return CheckResult(id="ex.check", exercise="ex", targets=list(targets), visibility="hidden",
                       points=0, max_points=1, status=status, message=message,
                       evidence=evidence or {}, **fields)


# fault id -> cases, each (evidence, extra fields) that mean this fault.
FIRES: dict[str, list[tuple[dict, dict]]] = {
    "grad-not-zeroed": [
        ({"accumulated_steps": [2, 3]}, {}),
        # some parameters reset, others not: first update right, later ones off
        ({"backwards_per_step": [1, 1, 1], "grad_ratio": [1.0, 1.6, 2.1]}, {}),
    ],
    "zero-grad-after-backward": [
        ({"empty_grad_steps": [1, 2, 3], "backwards_per_step": [1, 1, 1]}, {}),
    ],
    "double-backward": [
        ({}, {"message": "train(...) raised RuntimeError: Trying to backward through the graph "
                         "a second time (or directly access saved tensors after they have "
                         "already been freed)."}),
        ({"error": "RuntimeError: Trying to backward through the graph a second time"}, {}),
        ({"repeated_backward_steps": [2]}, {}),
        ({"freed_graph_reused_steps": [1]}, {}),
        ({"backwards_per_step": [2, 2], "grad_ratio": [2.0, 2.01]}, {}),
    ],
    "scheduler-stepped-per-batch": [
        ({"lr_per_step": [0.1, 0.05, 0.025, 0.0125], "steps_per_epoch": 2}, {}),
        # a burst at the end of each epoch: constant within, factor**batches between epochs
        ({"lr_per_step": [0.1, 0.1, 0.025, 0.025, 0.00625, 0.00625], "steps_per_epoch": 2,
          "expected_lr_per_epoch": [0.1, 0.05, 0.025]}, {}),
    ],
    "validation-without-eval": [
        ({"val_forward_modes": [True, True]}, {}),
        ({"forward_modes": [[True, False]]}, {"targets": ("evaluate",)}),
    ],
    "validation-without-no-grad": [
        ({"val_forward_grad_enabled": [False, True]}, {}),
        ({"forward_modes": [[False, True]]}, {"targets": ("evaluate",)}),
    ],
    "train-mode-not-restored": [
        ({"train_forward_modes": [True, False]}, {}),
        ({"forward_modes": [[False, True]]}, {"targets": ("train_epoch",)}),
    ],
    "loss-history-tensors": [
        ({"history_tensor_entries": 3}, {}),
        ({"returned_tensor": True}, {}),
    ],
    "print-tensor-logging": [({"printed_tensors": True}, {})],
    "manual-update-rebinds": [({"params_changed": False}, {})],
    "inplace-update-outside-no-grad": [
        ({}, {"message": "RuntimeError: a leaf Variable that requires grad is being used in an "
                         "in-place operation."}),
    ],
    "inplace-on-saved-tensor": [
        ({}, {"message": "RuntimeError: one of the variables needed for gradient computation has "
                         "been modified by an inplace operation: [torch.FloatTensor [3]], which "
                         "is output 0 of SinBackward0, is at version 1; expected version 0"}),
    ],
    "softmax-before-cross-entropy": [
        ({"loss_input_probabilities": True}, {}),
        ({"loss_applies_softmax": True}, {}),
        ({"outputs_are_probabilities": True, "loss": 1.5, "loss_if_logits": 1.5004}, {}),
    ],
    "layers-in-plain-list": [
        ({"module_lists": ["layers"], "parameter_count": 10, "expected_parameter_count": 50}, {}),
    ],
    "layer-created-in-forward": [
        ({"modules_created_in_forward": 2}, {}),
        ({"weight_draws_in_eval": 2, "parameter_count": 10, "expected_parameter_count": 50}, {}),
    ],
    "tensor-not-parameter": [
        ({"bare_tensors": ["w"], "parameter_count": 0, "expected_parameter_count": 8}, {}),
        ({"unregistered_leaves": 1}, {}),
    ],
    "detach-on-path": [
        ({"params_without_grad": 2}, {}),
        ({}, {"message": "RuntimeError: element 0 of tensors does not require grad and does "
                         "not have a grad_fn"}),
    ],
    "dropout-always-on": [
        ({"active_dropout_in_eval": 1}, {}),
        ({"eval_outputs_differ": True, "linear_layers": [[4, 8], [8, 1]]}, {}),
    ],
    "optimizer-before-head-replaced": [
        ({"problem": "old_head_in_optimizer"}, {}),
        ({"optimizer_foreign_parameters": 2, "head_changed": False}, {}),
    ],
    "backbone-not-frozen": [
        ({"frozen_changed": ["backbone.0.weight"]}, {}),
        ({"frozen_requires_grad": 3}, {}),
    ],
    "lr-too-high": [
        ({"diverged": True}, {}),
        ({"lr_over_reference": 10.0}, {}),
    ],
    "loss-broadcast": [
        ({"broadcast_shapes": [["sub", [16, 1], [16], [16, 16]]]}, {}),
        ({"matches_broadcast_loss": True}, {}),
    ],
    "float-labels": [
        ({"target_dtype": "float32"}, {}),
        ({}, {"message": "RuntimeError: expected scalar type Long but found Float"}),
    ],
    "unstable-softmax": [({"nonfinite": True, "max_abs_logit": 1000.0}, {}),
                         ({"nonfinite": True, "max_abs_logit": 1000.0, "loss_is_inf": False,
                           "grad_finite": False}, {})],
    "log-of-rounded-softmax": [({"nonfinite": True, "max_abs_logit": 1000.0,
                                 "loss_is_inf": True, "grad_finite": True}, {})],
    "softmax-over-columns": [({"softmax_over_columns": True}, {})],
    "single-precision": [({"single_precision": True}, {})],
    "unnormalised-features": [
        ({"feature_std": [1.0, 250.0], "feature_mean": [0.0, 3.0]}, {}),
        ({"feature_std": [1.0, 1.0], "feature_mean": [40.0, 0.0]}, {}),
        ({"normaliser_skips": "centring"}, {}),
        ({"val_normaliser_skips": "scaling"}, {}),
    ],
    "normaliser-fit-on-validation": [
        ({"normaliser_fit_on": "validation split"}, {}),
        ({"val_normaliser_fit_on": "all data"}, {}),
        ({"normaliser_mean_from": "training split", "normaliser_std_from": "validation split"},
         {}),
    ],
    "numpy-alias-mutation": [
        ({"input_modified": True}, {}),
        ({"shares_memory_with_input": True}, {}),
    ],
    "batchnorm-batch-of-one": [
        ({"batch_sizes": [32, 32, 1], "batchnorm_layers": 1}, {}),
        ({}, {"message": "ValueError: Expected more than 1 value per channel when training, "
                         "got input size torch.Size([1, 8])"}),
    ],
    "no-shuffle-sorted-data": [({"single_class_batches": 8, "batches": 10}, {})],
    "validation-leak": [({"val_samples_in_training": 80, "training_samples_in_validation": 0},
                         {}),
                        ({"val_samples_in_training": 0, "training_samples_in_validation": 3},
                         {})],
    "labels-separated-from-samples": [({"train_wrong_labels": 412, "val_wrong_labels": 0}, {}),
                                      ({"train_wrong_labels": 0, "val_wrong_labels": 5}, {})],
}

# fault id -> evidence a step away from the fault: measured, but not the fault's signature.
SILENT: dict[str, list[tuple[dict, dict]]] = {
    "grad-not-zeroed": [
        ({"backwards_per_step": [1, 1, 1], "grad_ratio": [1.0, 1.0, 1.0]}, {}),
        ({"accumulated_steps": []}, {}),
        # p.grad emptied after backward is another fault, though the ratios are off
        ({"backwards_per_step": [1, 1, 1], "grad_ratio": [1.0, 0.0, 0.0],
          "empty_grad_steps": [2, 3]}, {}),
    ],
    "zero-grad-after-backward": [
        # empty because step() came before any backward(): another mistake
        ({"empty_grad_steps": [1], "backwards_per_step": [0, 1, 1]}, {}),
    ],
    "double-backward": [
        ({"backwards_per_step": [2, 2], "grad_ratio": [1.0, 1.0]}, {}),
        ({"backwards_per_step": [1, 1], "grad_ratio": [2.0, 2.0]}, {}),
    ],
    "scheduler-stepped-per-batch": [
        ({"lr_per_step": [0.1, 0.1, 0.05, 0.05, 0.025, 0.025], "steps_per_epoch": 2,
          "expected_lr_per_epoch": [0.1, 0.05, 0.025]}, {}),
        ({"lr_per_step": [0.1, 0.05, 0.025], "steps_per_epoch": 1}, {}),
    ],
    "validation-without-eval": [
        ({"val_forward_modes": [False, False]}, {}),
        ({"forward_modes": [[False, False]]}, {"targets": ("evaluate",)}),
        ({"forward_modes": [[True, True]]}, {"targets": ("train_epoch",)}),
    ],
    "validation-without-no-grad": [
        ({"val_forward_grad_enabled": [False, False]}, {}),
        ({"forward_modes": [[False, False]]}, {"targets": ("evaluate",)}),
    ],
    "train-mode-not-restored": [
        ({"train_forward_modes": [True, True]}, {}),
        ({"forward_modes": [[True, True]]}, {"targets": ("train_epoch",)}),
    ],
    "loss-history-tensors": [({"returned_tensor": False, "history_tensor_entries": 0}, {})],
    "print-tensor-logging": [({"printed_tensors": False}, {})],
    "manual-update-rebinds": [({"params_changed": True}, {}), ({}, {})],
    "inplace-update-outside-no-grad": [
        ({}, {"message": "RuntimeError: mat1 and mat2 shapes cannot be multiplied"}),
    ],
    "inplace-on-saved-tensor": [
        ({}, {"message": "RuntimeError: a leaf Variable that requires grad is being used in an "
                         "in-place operation."}),
        ({}, {"message": "RuntimeError: Trying to backward through the graph a second time"}),
    ],
    "softmax-before-cross-entropy": [
        ({"outputs_are_probabilities": True, "loss": 1.5, "loss_if_logits": 0.9}, {}),
        ({"outputs_are_probabilities": False, "loss": 1.5, "loss_if_logits": 1.5}, {}),
    ],
    "layers-in-plain-list": [
        ({"module_lists": ["layers"], "parameter_count": 50, "expected_parameter_count": 50}, {}),
        ({"module_lists": [], "parameter_count": 10, "expected_parameter_count": 50}, {}),
    ],
    "layer-created-in-forward": [
        ({"weight_draws_in_eval": 2, "parameter_count": 50, "expected_parameter_count": 50}, {}),
        ({"modules_created_in_forward": 0}, {}),
    ],
    "tensor-not-parameter": [
        ({"unregistered_leaves": 1, "module_lists": ["layers"]}, {}),
        ({"bare_tensors": ["w"], "parameter_count": 8, "expected_parameter_count": 8}, {}),
    ],
    "detach-on-path": [({"params_without_grad": 0}, {})],
    "dropout-always-on": [
        ({"eval_outputs_differ": True, "modules_created_in_forward": 1}, {}),
        ({"eval_outputs_differ": True, "linear_layers": []}, {}),
        ({"eval_outputs_differ": False, "active_dropout_in_eval": 0}, {}),
    ],
    "optimizer-before-head-replaced": [
        ({"optimizer_foreign_parameters": 2, "head_changed": True}, {}),
        ({"problem": "frozen_backbone_changed"}, {}),
    ],
    "backbone-not-frozen": [({"frozen_changed": [], "frozen_requires_grad": 0}, {})],
    "lr-too-high": [({"lr_over_reference": 1.0, "diverged": False}, {})],
    "loss-broadcast": [({"matches_broadcast_loss": False, "broadcast_shapes": []}, {})],
    "float-labels": [({"target_dtype": "int64"}, {})],
    "unstable-softmax": [
        ({"nonfinite": True, "max_abs_logit": 10.0}, {}),
        ({"nonfinite": False, "max_abs_logit": 1000.0}, {}),
        # log() of a probability that rounded to 0: the softmax itself was stable
        ({"nonfinite": True, "max_abs_logit": 1000.0, "loss_is_inf": True,
          "grad_finite": True}, {}),
    ],
    "softmax-over-columns": [({"softmax_over_columns": False}, {})],
    "single-precision": [({"single_precision": False}, {})],
    "log-of-rounded-softmax": [
        ({"nonfinite": True, "max_abs_logit": 1000.0, "loss_is_inf": False,
          "grad_finite": True}, {}),
        ({"nonfinite": True, "max_abs_logit": 1000.0, "loss_is_inf": True,
          "grad_finite": False}, {}),
    ],
    "unnormalised-features": [
        ({"feature_std": [1.0, 0.98], "feature_mean": [0.01, -0.02],
          "normaliser_skips": None, "val_normaliser_skips": None}, {}),
    ],
    "normaliser-fit-on-validation": [
        ({"normaliser_fit_on": "training split", "val_normaliser_fit_on": "training split"}, {}),
        ({"normaliser_fit_on": None}, {}),
    ],
    "numpy-alias-mutation": [({"input_modified": False, "shares_memory_with_input": False}, {})],
    "batchnorm-batch-of-one": [
        ({"batch_sizes": [32, 32, 1], "batchnorm_layers": 0}, {}),
        ({"batch_sizes": [32, 32, 16], "batchnorm_layers": 1}, {}),
    ],
    "no-shuffle-sorted-data": [
        ({"single_class_batches": 2, "batches": 10}, {}),
        ({"single_class_batches": 0, "batches": 0}, {}),
    ],
    "validation-leak": [({"val_samples_in_training": 0, "training_samples_in_validation": 0},
                         {})],
    "labels-separated-from-samples": [({"train_wrong_labels": 0, "val_wrong_labels": 0}, {})],
}


def cases(table):
    return [pytest.param(fault, evidence, fields, id=f"{fault}-{i}")
            for fault, rows in table.items() for i, (evidence, fields) in enumerate(rows)]


def test_every_rule_has_cases_both_ways():
    """A new rule gets its evidence here too (and every rule is a fault of the catalogue)."""
    assert set(FIRES) == set(RULES) == set(SILENT)
    assert set(RULES) <= set(catalogue())


@pytest.mark.parametrize("fault, evidence, fields", cases(FIRES))
def test_rule_fires_on_its_fault_s_evidence(fault, evidence, fields):
    assert fault in diagnose_check(check(evidence, **fields))


@pytest.mark.parametrize("fault, evidence, fields", cases(SILENT))
def test_rule_stays_silent_a_step_away_from_it(fault, evidence, fields):
    assert fault not in diagnose_check(check(evidence, **fields))


def test_a_failure_without_evidence_gets_no_diagnosis():
    assert diagnose_check(check({}, message="f(x) returned 1; expected 2.")) == []


@pytest.mark.parametrize("junk", [None, "text", 3, -1.5, [None, "a"], {"a": 1}, [[1, 2]]])
def test_evidence_of_another_shape_never_raises(junk):
    """Student-controlled values can reach evidence: a rule that cannot read them says
    nothing rather than breaking the diagnosis of the whole submission."""
    keys = {key for rows in FIRES.values() for evidence, _ in rows for key in evidence}
    diagnoses = diagnose_check(check({key: junk for key in keys}))
    assert set(diagnoses) <= set(RULES)


def test_diagnose_fills_failed_checks_and_clears_passed_ones():
    evidence = {"accumulated_steps": [2, 3]}
    failed, errored = check(evidence), check(evidence, status="error")
    passed = check(evidence, status="passed", diagnoses=["grad-not-zeroed"])
    result = SubmissionResult(student="s", grader_version="t", checks=[failed, errored, passed])
    assert diagnose(result) is result
    assert failed.diagnoses == ["grad-not-zeroed"] and errored.diagnoses == ["grad-not-zeroed"]
    assert passed.diagnoses == []


def test_diagnoses_come_in_rule_order():
    """Two faults at once: both named, in the order of the catalogue's rules."""
    both = diagnose_check(check({"input_modified": True, "accumulated_steps": [2]}))
    assert both == [f for f in RULES if f in ("numpy-alias-mutation", "grad-not-zeroed")]
