"""Variants of the bug hunt `bughunt_pipeline` (solutions/bughunt/pipeline.py): see
bughunt_regression.py for the four kinds (catalogue_, second_, deleted_, correct_)."""

from mutants import (RUN_RAISES, catalogue_mutants, mutant_factory,
                     visible_mutants)

M = mutant_factory("bughunt_pipeline")
VALIDATION = ("validation_without_graph", "validation_in_eval_mode", "training_mode_restored")

MUTANTS = catalogue_mutants("bughunt_pipeline") + [
    M("second_extra_head_built_in_forward", "", "parameters_registered", replace=[(
        "        return self.out(self.body(x))\n",
        "        head = nn.Linear(self.out.in_features, self.out.out_features)\n"
        "        return head(self.body(x))\n")], diagnoses=["layer-created-in-forward"]),
    M("second_fit_on_all_readings", "", "features_standardized", replace=[(
        "    mean, std = fit_normalizer(X_train)\n", "    mean, std = fit_normalizer(X)\n")],
      diagnoses=["normaliser-fit-on-validation"]),
    M("second_as_tensor", "", "standardize_leaves_input_alone", replace=[(
        "    x = torch.tensor(X, dtype=torch.float32)\n", "    x = torch.as_tensor(X)\n")],
      diagnoses=["numpy-alias-mutation"]),
    M("second_shuffle_dropped", "", "training_batches_mixed", replace=[(
        "shuffle=True, drop_last=True", "drop_last=True")], diagnoses=["no-shuffle-sorted-data"]),
    M("second_identity_normaliser", "", "features_standardized", replace=[(
        "    return X.mean(axis=0), X.std(axis=0)\n",
        "    return np.zeros(X.shape[1], np.float32), np.ones(X.shape[1], np.float32)\n")],
      diagnoses=["unnormalised-features"]),
    M("second_running_plus_tensor", "", "history_holds_floats", replace=[(
        "            running += loss.item()\n", "            running = running + loss\n")],
      diagnoses=["loss-history-tensors"]),
    M("second_print_loss_tensor", "", "log_prints_numbers", replace=[(
        "        print(f\"epoch {epoch + 1:2d}  train loss",
        "        print(\"epoch\", epoch + 1, \"loss\", loss)\n"
        "        print(f\"epoch {epoch + 1:2d}  train loss")], diagnoses=["print-tensor-logging"]),
    M("second_labels_as_float_tensor", "", "labels_are_class_indices", replace=[(
        "    return torch.from_numpy(y).long()\n", "    return torch.tensor(y, dtype=torch.float)\n")],
      diagnoses=["float-labels"]),
    M("second_drop_last_false", "", "no_batch_of_one", replace=[(
        "drop_last=True", "drop_last=False")], diagnoses=["batchnorm-batch-of-one"]),
    M("second_log_softmax_then_cross_entropy", "", "outputs_are_logits", replace=[(
        "        return self.out(self.body(x))\n",
        "        return nn.functional.softmax(self.out(self.body(x)), -1)\n")],
      diagnoses=["softmax-before-cross-entropy"]),

    M("second_functional_dropout", "", "dropout_off_in_eval", replace=[(
        "nn.ReLU(), nn.Dropout(0.2))", "nn.ReLU())"), (
        "        return self.out(self.body(x))\n",
        "        return self.out(nn.functional.dropout(self.body(x), 0.2))\n")],
      diagnoses=["dropout-always-on"]),
    # Min-max scaling is no catalogued fault: it fails, and no fault is named for it.
    M("min_max_scaling_instead", "", "features_standardized", replace=[(
        "    return X.mean(axis=0), X.std(axis=0)\n",
        "    return X.min(axis=0), X.max(axis=0) - X.min(axis=0)\n")]),

    M("deleted_batchnorm", "", "no_batch_of_one", "parameters_registered", replace=[(
        "nn.Linear(n_features, hidden), nn.BatchNorm1d(hidden),", "nn.Linear(n_features, hidden),")]),
    M("deleted_dropout", "", "dropout_off_in_eval", replace=[(
        "nn.ReLU(), nn.Dropout(0.2))", "nn.ReLU())")]),
    M("deleted_validation", "", *VALIDATION, replace=[(
        "        metrics = evaluate(model, val_loader, loss_fn)\n",
        "        metrics = {\"loss\": 0.0, \"accuracy\": 0.0}\n")]),

    M("correct_copy_before_from_numpy", "", replace=[(
        "    x = torch.tensor(X, dtype=torch.float32)\n", "    x = torch.from_numpy(X.copy())\n")]),
    M("correct_out_of_place_standardize", "", replace=[(
        "    x -= torch.from_numpy(mean)\n    x /= torch.from_numpy(std)\n    return x\n",
        "    return (x - torch.from_numpy(mean)) / torch.from_numpy(std)\n")]),
    M("correct_random_sampler", "", replace=[(
        "batch_size=BATCH_SIZE,\n                              shuffle=True, drop_last=True)",
        "batch_size=BATCH_SIZE,\n                              "
        "sampler=torch.utils.data.RandomSampler(x_train), drop_last=True)")]),
    M("correct_labels_with_tensor_long", "", replace=[(
        "    return torch.from_numpy(y).long()\n", "    return torch.tensor(y, dtype=torch.long)\n")]),
]

# Issue 18, one mutant per mechanism the probes once got wrong (the correct fixes in the same
# idioms are tests/styles/bughunt_pipeline__*.py).
MUTANTS += [
    # Validation features standardised with their own statistics (the training ones right).
    M("validation_standardised_on_its_own", "", "features_standardized", replace=[(
        "    x_val = standardize(X_val, mean, std)\n",
        "    x_val = standardize(X_val, *fit_normalizer(X_val))\n")],
      diagnoses=["normaliser-fit-on-validation"]),
    # The first layer through torch.einsum: its input is found by value, here fitted on all.
    M("einsum_layer_normaliser_on_all_data", "", "features_standardized", replace=[(
        "        return self.out(self.body(x))\n",
        "        lin = self.body[0]\n"
        "        h = torch.einsum(\"nf,hf->nh\", x, lin.weight) + lin.bias\n"
        "        return self.out(self.body[3](self.body[2](self.body[1](h))))\n"), (
        "    mean, std = fit_normalizer(X_train)\n", "    mean, std = fit_normalizer(X)\n")],
      diagnoses=["normaliser-fit-on-validation"]),
    # Recognised by value: the validation set stacked from the loader's dataset, in one pass
    # and in training mode.
    M("stacked_evaluate_in_training_mode", "", "validation_in_eval_mode", replace=[(
        "    model.eval()\n    total, correct, count = 0.0, 0, 0\n    with torch.no_grad():\n"
        "        for xb, yb in loader:\n",
        "    total, correct, count = 0.0, 0, 0\n    with torch.no_grad():\n"
        "        for xb, yb in [(torch.stack([x for x, _ in loader.dataset]),\n"
        "                        torch.stack([t for _, t in loader.dataset]))]:\n")],
      diagnoses=["validation-without-eval"]),
]
# What run(seed=0) returns, broken five ways: each fails visible checks only.
MUTANTS += visible_mutants(
    "bughunt_pipeline", '    return {"model": model, "history": history}\n')
# Mutants whose run(seed=0) raises, or whose history stops being finite, fail visible checks too.
VISIBLE_FAILS = {
    "catalogue_float-labels": RUN_RAISES,
    "catalogue_batchnorm-batch-of-one": RUN_RAISES,
    "second_labels_as_float_tensor": RUN_RAISES,
    "second_drop_last_false": RUN_RAISES,
}
# Held-out idioms of the seeded faults, each diagnosed from the evidence recorded.
MUTANTS += [
    M("std_from_the_validation_split", "", "features_standardized", replace=[(
        "    mean, std = fit_normalizer(X_train)\n",
        "    mean, std = fit_normalizer(X_train)[0], fit_normalizer(X_val)[1]\n")],
      diagnoses=["normaliser-fit-on-validation"]),
    M("fresh_random_output_weight", "", "parameters_registered", replace=[
        ("        self.out = nn.Linear(hidden, n_classes)\n",
         "        self.hidden, self.n_classes = hidden, n_classes\n"),
        ("        return self.out(self.body(x))\n",
         "        w = torch.randn(self.n_classes, self.hidden) / self.hidden ** 0.5\n"
         "        return nn.functional.linear(self.body(x), w)\n")],
      diagnoses=["layer-created-in-forward"]),
]
# train() may rely on the script's own model (its attributes): the contract states no model
# structure, so the train checks run it on the script's model.
MUTANTS += [
    M("correct_train_zeroes_own_layers", "", replace=[(
        "            optimizer.zero_grad()\n",
        "            model.body.zero_grad()\n            model.out.zero_grad()\n")]),
]
