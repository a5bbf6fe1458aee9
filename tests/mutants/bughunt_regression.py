"""Variants of the bug hunt `bughunt_regression` (solutions/bughunt/regression.py).

- `catalogue_*`: every fault of faults.toml injected the catalogue's way;
- `second_*`: the same faults written another way (the instructors' judge injects faults in
  its own way: detection must be behavioural, not a match of the catalogue's text);
- `deleted_*`: "fixes" that delete a feature (validation, the log, the update): they fail;
- `correct_*`: fixes written differently from the reference: they pass every check.
"""

from mutants import (NOT_FINITE, RUN_RAISES, catalogue_mutants, mutant_factory,
                     visible_mutants)

M = mutant_factory("bughunt_regression")
VALIDATION = ("validation_without_graph", "validation_in_eval_mode", "training_mode_restored")
UPDATE = ('''
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad
''')

MUTANTS = catalogue_mutants("bughunt_regression") + [
    M("second_zeroed_once_per_epoch", "", "steps_use_fresh_gradients", replace=[(
        "        total, count = 0.0, 0\n        for xb, yb in train_loader:\n"
        "            model.zero_grad()\n",
        "        total, count = 0.0, 0\n        model.zero_grad()\n"
        "        for xb, yb in train_loader:\n")], diagnoses=["grad-not-zeroed"]),
    M("second_grads_set_to_none_after_backward", "", "steps_use_fresh_gradients", replace=[(
        "            loss.backward()\n            sgd_step(",
        "            loss.backward()\n            for p in model.parameters():\n"
        "                p.grad = None\n            sgd_step(")],
      diagnoses=["zero-grad-after-backward"]),
    M("second_requires_grad_attribute", "", "parameters_registered", replace=[(
        "        self.w1 = nn.Parameter(torch.randn(n_features, hidden) * (2 / n_features) ** 0.5)\n",
        "        w1 = torch.randn(n_features, hidden) * (2 / n_features) ** 0.5\n"
        "        w1.requires_grad = True\n        self.w1 = w1\n")],
      diagnoses=["tensor-not-parameter"]),
    M("second_functional_mse_loss", "", "loss_matches_mse", replace=[(
        "    return ((pred.squeeze(1) - target) ** 2).mean()\n",
        "    return nn.functional.mse_loss(pred, target)\n")], diagnoses=["loss-broadcast"]),
    M("second_target_as_a_row", "", "loss_matches_mse", replace=[(
        "    return ((pred.squeeze(1) - target) ** 2).mean()\n",
        "    diff = pred - target.reshape(1, -1)\n    return diff.pow(2).mean()\n")],
      diagnoses=["loss-broadcast"]),
    M("second_centred_not_scaled", "", "features_standardized", replace=[(
        "        return (X - self.mean) / self.std\n", "        return X - self.mean\n")],
      diagnoses=["unnormalised-features"]),
    M("second_scaled_not_centred", "", "features_standardized", replace=[(
        "        return (X - self.mean) / self.std\n", "        return X / self.std\n")],
      diagnoses=["unnormalised-features"]),
    M("second_fit_on_all_data", "", "features_standardized", replace=[(
        "    scaler = Standardizer().fit(X_train)\n", "    scaler = Standardizer().fit(X)\n")],
      diagnoses=["normaliser-fit-on-validation"]),
    M("second_enable_grad", "", "validation_without_graph", replace=[(
        "    with torch.no_grad():\n        for xb, yb in loader:\n",
        "    with torch.enable_grad():\n        for xb, yb in loader:\n")],
      diagnoses=["validation-without-no-grad"]),
    M("second_running_sum_of_tensors", "", "history_holds_floats", replace=[(
        "            total += loss.item() * len(yb)\n",
        "            total = total + loss * len(yb)\n")], diagnoses=["loss-history-tensors"]),
    M("second_percent_s_of_a_tensor", "", "log_prints_numbers", replace=[(
        "        print(f\"epoch {epoch + 1:3d}  train loss",
        "        print(\"epoch %d  train loss %s\" % (epoch + 1, loss))\n"
        "        print(f\"epoch {epoch + 1:3d}  train loss")], diagnoses=["print-tensor-logging"]),
    M("second_list_of_new_tensors", "", "sgd_step_updates_parameters", replace=[(
        UPDATE, "\n    params = [p - lr * p.grad for p in params if p.grad is not None]\n")],
      diagnoses=["manual-update-rebinds"]),
    M("second_sub_underscore", "", "sgd_step_updates_parameters", replace=[(
        UPDATE, "\n    for p in params:\n        if p.grad is not None:\n"
        "            p.sub_(lr * p.grad)\n")], diagnoses=["inplace-update-outside-no-grad"]),
    M("second_lr_multiplied_in_run", "", "learning_rate_trains", replace=[(
        "loss, lr=LR, epochs=EPOCHS)", "loss, lr=LR * 40, epochs=EPOCHS)")],
      diagnoses=["lr-too-high"]),
    M("second_eval_without_call", "", "validation_in_eval_mode", replace=[(
        "    model.eval()\n    total, count = 0.0, 0\n",
        "    model.eval\n    total, count = 0.0, 0\n")], diagnoses=["validation-without-eval"]),
    M("second_train_mode_never_set", "", "training_mode_restored", replace=[(
        "        model.train()\n        total, count = 0.0, 0\n",
        "        total, count = 0.0, 0\n")], diagnoses=["train-mode-not-restored"]),

    M("deleted_validation", "", *VALIDATION, replace=[(
        "history[\"val_loss\"].append(evaluate(model, val_loader, loss_fn))",
        "history[\"val_loss\"].append(history[\"train_loss\"][-1])")]),
    M("deleted_log", "", "log_prints_numbers", replace=[(
        "        print(f\"epoch {epoch + 1:3d}  train loss {history['train_loss'][-1]:.4f}  \"\n"
        "              f\"val loss {history['val_loss'][-1]:.4f}\")\n", "")]),
    # Parameters unchanged after the step: the symptom of a rebinding update, named as such.
    M("deleted_update", "", "sgd_step_updates_parameters", replace=[(UPDATE, "\n    pass\n")],
      diagnoses=["manual-update-rebinds"]),

    M("correct_grads_set_to_none", "", replace=[(
        "            model.zero_grad()\n",
        "            for p in model.parameters():\n                p.grad = None\n")]),
    M("correct_register_parameter", "", replace=[(
        "        self.w1 = nn.Parameter(torch.randn(n_features, hidden) * (2 / n_features) ** 0.5)\n",
        "        self.register_parameter(\n            \"w1\", nn.Parameter(torch.randn(n_features, "
        "hidden) * (2 / n_features) ** 0.5))\n")]),
    M("correct_functional_mse_of_a_column", "", replace=[(
        "    return ((pred.squeeze(1) - target) ** 2).mean()\n",
        "    return nn.functional.mse_loss(pred, target.unsqueeze(1))\n")]),
    M("correct_standardised_by_hand", "", replace=[(
        "    X_train, X_val = scaler.transform(X_train), scaler.transform(X_val)\n",
        "    mu, sd = X_train.mean(dim=0, keepdim=True), X_train.std(dim=0, unbiased=False, "
        "keepdim=True)\n    X_train, X_val = (X_train - mu) / sd, (X_val - mu) / sd\n")]),
    M("correct_update_with_data", "", replace=[(
        UPDATE, "\n    for p in params:\n        if p.grad is not None:\n"
        "            p.data.add_(p.grad, alpha=-lr)\n")]),
    M("correct_inference_mode_validation", "", replace=[(
        "    with torch.no_grad():\n        for xb, yb in loader:\n",
        "    with torch.inference_mode():\n        for xb, yb in loader:\n")]),
]

# Issue 18, one mutant per mechanism the probes once got wrong (each is a fault written in an
# idiom the probes had to learn to observe; tests/styles/bughunt_regression__*.py hold the
# correct fixes in the same idioms).
ONE_PASS_EVALUATE = (
    "    model.eval()\n    total, count = 0.0, 0\n    with torch.no_grad():\n"
    "        for xb, yb in loader:\n"
    "            total += loss_fn(model(xb), yb).item() * len(yb)\n"
    "            count += len(yb)\n    return total / count\n")
MUTANTS += [
    # Recognised by value: the whole validation set in one pass, with gradients tracked.
    M("one_pass_evaluate_with_graph", "", "validation_without_graph", replace=[(
        ONE_PASS_EVALUATE, "    model.eval()\n    X, y = loader.dataset.tensors\n"
        "    return loss_fn(model(X), y).item()\n")], diagnoses=["validation-without-no-grad"]),
    # The first layer as torch.addmm(bias, x, w): its input is x (not the bias), here raw.
    M("addmm_layer_unscaled_features", "", "features_standardized", replace=[(
        "        h = torch.relu(x @ self.w1 + self.b1)\n",
        "        h = torch.relu(torch.addmm(self.b1, x, self.w1))\n"), (
        "    X_train, X_val = scaler.transform(X_train), scaler.transform(X_val)\n", "")],
      diagnoses=["unnormalised-features"]),
    # The script's own sgd_step runs in the audit: it resets the gradients after the update,
    # but on a generator the first loop used up, so nothing is reset and they accumulate.
    M("reset_in_update_on_a_used_generator", "", "steps_use_fresh_gradients", replace=[(
        "            model.zero_grad()\n", ""), (
        UPDATE, UPDATE + "    for p in params:\n        p.grad = None\n")],
      diagnoses=["grad-not-zeroed"]),
    # The update written inline in train (recorded from how the parameters move), without
    # zeroing the gradients.
    M("inline_update_never_zeroed", "", "steps_use_fresh_gradients", replace=[(
        "            model.zero_grad()\n", ""), (
        "            sgd_step(model.parameters(), lr)\n",
        "            with torch.no_grad():\n                for p in model.parameters():\n"
        "                    p -= lr * p.grad\n")], diagnoses=["grad-not-zeroed"]),
    # Validation features standardised with their own statistics.
    M("validation_standardised_on_its_own", "", "features_standardized", replace=[(
        "    X_train, X_val = scaler.transform(X_train), scaler.transform(X_val)\n",
        "    X_train, X_val = scaler.transform(X_train), Standardizer().fit(X_val).transform("
        "X_val)\n")], diagnoses=["normaliser-fit-on-validation"]),
]
# What run(seed=0) returns, broken five ways: each fails visible checks only.
MUTANTS += visible_mutants(
    "bughunt_regression", '    return {"model": model, "history": history, "scaler": scaler}\n')
# Mutants whose run(seed=0) raises, or whose history stops being finite, fail visible checks too.
VISIBLE_FAILS = {
    "catalogue_grad-not-zeroed": NOT_FINITE,
    "catalogue_inplace-update-outside-no-grad": RUN_RAISES,
    "catalogue_lr-too-high": NOT_FINITE,
    "catalogue_normaliser-fit-on-validation": NOT_FINITE,
    "second_centred_not_scaled": NOT_FINITE,
    "second_sub_underscore": RUN_RAISES,
    "second_lr_multiplied_in_run": NOT_FINITE,
    "reset_in_update_on_a_used_generator": NOT_FINITE,
    "inline_update_never_zeroed": NOT_FINITE,
}

# Issue 18 (held-out): train() may rely on the script's own model (its attributes): the
# contract states no model structure, so the train checks run it on the script's model.
MUTANTS += [
    M("correct_train_names_own_parameters", "", replace=[(
        "            sgd_step(model.parameters(), lr)\n",
        "            sgd_step([model.w1, model.b1, *model.out.parameters()], lr)\n")]),
]
# Held-out idioms of the seeded faults, each diagnosed from the evidence already recorded.
MUTANTS += [
    M("weight_in_a_buffer", "", "parameters_registered", replace=[(
        "        self.w1 = nn.Parameter(torch.randn(n_features, hidden) * (2 / n_features) ** 0.5)\n",
        "        self.register_buffer(\"w1\", (torch.randn(n_features, hidden)\n"
        "                                     * (2 / n_features) ** 0.5).requires_grad_())\n")],
      diagnoses=["tensor-not-parameter"]),
    M("weight_in_a_dict", "", "parameters_registered", replace=[
        ("        self.w1 = nn.Parameter(torch.randn(n_features, hidden) * (2 / n_features) ** 0.5)\n",
         "        self.params = {\"w1\": (torch.randn(n_features, hidden)\n"
         "                               * (2 / n_features) ** 0.5).requires_grad_()}\n"),
        ("        h = torch.relu(x @ self.w1 + self.b1)\n",
         "        h = torch.relu(x @ self.params[\"w1\"] + self.b1)\n")],
      diagnoses=["tensor-not-parameter"]),
    M("grads_reset_for_biases_only", "", "steps_use_fresh_gradients", replace=[(
        "            model.zero_grad()\n",
        "            for p in model.parameters():\n                if p.ndim == 1:\n"
        "                    p.grad = None\n")], diagnoses=["grad-not-zeroed"]),
]
MUTANTS += [
    M("evaluate_mean_of_batch_means", "", "evaluate_averages_over_samples", replace=[(
        "            total += loss_fn(model(xb), yb).item() * len(yb)\n"
        "            count += len(yb)\n",
        "            total += loss_fn(model(xb), yb).item()\n            count += 1\n")]),
]
VISIBLE_FAILS["grads_reset_for_biases_only"] = NOT_FINITE
