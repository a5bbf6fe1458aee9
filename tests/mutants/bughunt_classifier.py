"""Variants of the bug hunt `bughunt_classifier` (solutions/bughunt/classifier.py): see
bughunt_regression.py for the four kinds (catalogue_, second_, deleted_, correct_)."""

from mutants import (RUN_RAISES, catalogue_mutants, mutant_factory,
                     visible_mutants)

M = mutant_factory("bughunt_classifier")
VALIDATION = ("validation_without_graph", "validation_in_eval_mode", "training_mode_restored")
STEP = ("            loss.backward()\n            optimizer.step()\n"
        "            losses.append(loss.item())\n        scheduler.step()\n")

MUTANTS = catalogue_mutants("bughunt_classifier") + [
    M("second_zero_grad_not_called", "", "steps_use_fresh_gradients", replace=[(
        "            optimizer.zero_grad()\n", "            optimizer.zero_grad\n")],
      diagnoses=["grad-not-zeroed"]),
    M("second_model_zero_grad_before_step", "", "steps_use_fresh_gradients", replace=[(
        "            loss.backward()\n            optimizer.step()\n",
        "            loss.backward()\n            model.zero_grad()\n"
        "            optimizer.step()\n")], diagnoses=["zero-grad-after-backward"]),
    M("second_scheduler_before_the_optimizer", "", "scheduler_per_epoch", replace=[(
        STEP, "            loss.backward()\n            scheduler.step()\n"
        "            optimizer.step()\n            losses.append(loss.item())\n")],
      diagnoses=["scheduler-stepped-per-batch"]),
    M("second_eval_without_call", "", "validation_in_eval_mode", replace=[(
        "    model.eval()\n    total, correct, count", "    model.eval\n    total, correct, count")],
      diagnoses=["validation-without-eval"]),
    M("second_train_never_called", "", "training_mode_restored", replace=[(
        "        history[\"lr\"].append(optimizer.param_groups[0][\"lr\"])\n        model.train()\n",
        "        history[\"lr\"].append(optimizer.param_groups[0][\"lr\"])\n")],
      diagnoses=["train-mode-not-restored"]),
    M("second_softmax_layer_in_the_head", "", "outputs_are_logits", replace=[(
        "        self.head = nn.Linear(16 * 2 * 2, n_classes)\n",
        "        self.head = nn.Sequential(nn.Linear(16 * 2 * 2, n_classes), nn.Softmax(dim=1))\n")],
      diagnoses=["softmax-before-cross-entropy"]),
    M("second_softmax_in_the_training_loop", "", "outputs_are_logits", replace=[(
        "            loss = loss_fn(model(xb), yb)\n            loss.backward()\n",
        "            probs = torch.softmax(model(xb), dim=1)\n            loss = loss_fn(probs, yb)\n"
        "            loss.backward()\n")], diagnoses=["softmax-before-cross-entropy"]),
    M("second_tuple_of_blocks", "", "parameters_registered", replace=[(
        "        self.blocks = nn.ModuleList([conv_block(1, 8), conv_block(8, 16)])\n",
        "        self.blocks = (conv_block(1, 8), conv_block(8, 16))\n")],
      diagnoses=["layers-in-plain-list"]),
    M("second_dropout_forced_into_training", "", "dropout_off_in_eval", replace=[(
        "        h = self.dropout(x.flatten(1))\n",
        "        self.dropout.train()\n        h = self.dropout(x.flatten(1))\n")],
      diagnoses=["dropout-always-on"]),
    M("second_float_label_tensor", "", "labels_are_class_indices", replace=[(
        "torch.tensor(labels)\n", "torch.tensor(labels, dtype=torch.float32)\n")],
      diagnoses=["float-labels"]),
    M("second_shuffle_argument_dropped", "", "training_batches_mixed", replace=[(
        "batch_size=BATCH_SIZE,\n                              shuffle=True)",
        "batch_size=BATCH_SIZE)")], diagnoses=["no-shuffle-sorted-data"]),
    M("second_running_tensor_total", "", "history_holds_floats", replace=[(
        "            losses.append(loss.item())\n", "            losses.append(loss.detach())\n")],
      diagnoses=["loss-history-tensors"]),
    M("second_softmax_inside_the_loss_function", "", "outputs_are_logits", replace=[(
        "                    nn.CrossEntropyLoss(), EPOCHS)",
        "                    lambda out, y: F.cross_entropy(F.softmax(out, dim=1), y), EPOCHS)")],
      diagnoses=["softmax-before-cross-entropy"]),

    M("deleted_scheduler", "", "scheduler_per_epoch", replace=[(
        STEP, "            loss.backward()\n            optimizer.step()\n"
        "            losses.append(loss.item())\n")]),
    M("deleted_dropout", "", "dropout_off_in_eval", replace=[(
        "        self.dropout = nn.Dropout(dropout)\n", "        self.dropout = nn.Identity()\n")]),
    M("deleted_validation", "", *VALIDATION, replace=[(
        "        metrics = evaluate(model, val_loader, loss_fn)\n",
        "        metrics = {\"loss\": 0.0, \"accuracy\": 0.0}\n")]),
    M("deleted_batchnorm", "", "parameters_registered", replace=[(
        "nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out),",
        "nn.Conv2d(c_in, c_out, 3, padding=1),")]),

    M("correct_train_false_for_eval", "", replace=[(
        "    model.eval()\n    total, correct, count", "    model.train(False)\n    total, correct, count")]),
    M("correct_scheduler_after_validation", "", replace=[(
        "        scheduler.step()\n        metrics = evaluate(model, val_loader, loss_fn)\n",
        "        metrics = evaluate(model, val_loader, loss_fn)\n        scheduler.step()\n")]),
    M("correct_sequential_blocks", "", replace=[(
        "        self.blocks = nn.ModuleList([conv_block(1, 8), conv_block(8, 16)])\n",
        "        self.blocks = nn.Sequential(conv_block(1, 8), conv_block(8, 16))\n")]),
    M("correct_probabilities_with_nll_loss", "", replace=[(
        "        return self.head(h)\n", "        return F.softmax(self.head(h), dim=1)\n"), (
        "                    nn.CrossEntropyLoss(), EPOCHS)",
        "                    lambda p, y: F.nll_loss(torch.log(p + 1e-12), y), EPOCHS)"), (
        "            correct += (logits.argmax(dim=1) == yb).sum().item()\n",
        "            correct += (logits.argmax(dim=1) == yb).sum().item()  # probabilities\n")]),
    M("correct_functional_dropout_with_training_flag", "", replace=[(
        "        h = self.dropout(x.flatten(1))\n",
        "        h = F.dropout(x.flatten(1), self.dropout.p, training=self.training)\n")]),
    M("correct_set_to_none_zero_grad", "", replace=[(
        "            optimizer.zero_grad()\n", "            optimizer.zero_grad(set_to_none=True)\n"
        "            model.zero_grad()\n")]),
]

# step() before backward(): no catalogued fault, and not diagnosed as zero_grad misplaced.
MUTANTS.append(M("step_before_backward", "", "steps_use_fresh_gradients", replace=[(
    "            loss.backward()\n            optimizer.step()\n",
    "            optimizer.step()\n            loss.backward()\n")]))

# Issue 18: validation in one pass through the loader's dataset is recognised by value (here
# without model.eval()); a head written with torch.addmm still registers its weights.
MUTANTS += [
    M("one_pass_evaluate_in_training_mode", "", "validation_in_eval_mode", replace=[(
        "    model.eval()\n    total, correct, count = 0.0, 0, 0\n    with torch.no_grad():\n"
        "        for xb, yb in loader:\n",
        "    total, correct, count = 0.0, 0, 0\n    with torch.no_grad():\n"
        "        for xb, yb in [loader.dataset.tensors]:\n")],
      diagnoses=["validation-without-eval"]),
    M("addmm_head_of_a_bare_tensor", "", "parameters_registered", replace=[(
        "        self.head = nn.Linear(16 * 2 * 2, n_classes)\n",
        "        self.head_w = torch.randn(n_classes, 16 * 2 * 2, requires_grad=True)\n"
        "        self.head_b = nn.Parameter(torch.zeros(n_classes))\n"), (
        "        return self.head(h)\n",
        "        return torch.addmm(self.head_b, h, self.head_w.t())\n")],
      diagnoses=["tensor-not-parameter"]),
]
# What run(seed=0) returns, broken five ways: each fails visible checks only.
MUTANTS += visible_mutants(
    "bughunt_classifier", '    return {"model": model, "history": history}\n')
# Mutants whose run(seed=0) raises, or whose history stops being finite, fail visible checks too.
VISIBLE_FAILS = {
    "catalogue_float-labels": RUN_RAISES,
    "second_float_label_tensor": RUN_RAISES,
}
# Held-out idiom: the scheduler stepped once per batch, all at the end of the epoch.
MUTANTS += [
    M("scheduler_stepped_len_loader_times", "", "scheduler_per_epoch", replace=[(
        "        scheduler.step()\n",
        "        for _ in range(len(train_loader)):\n            scheduler.step()\n")],
      diagnoses=["scheduler-stepped-per-batch"]),
]
# Held-out wrong fixes judged against run()'s and evaluate's contract.
MUTANTS += [
    M("validates_on_the_training_loader", "", "validates_on_the_validation_split", replace=[(
        "    history = train(model, train_loader, val_loader, optimizer, scheduler,\n",
        "    history = train(model, train_loader, train_loader, optimizer, scheduler,\n")]),
    M("step_size_changed_in_run", "", "scheduler_per_epoch", replace=[(
        "StepLR(optimizer, step_size=STEP_SIZE, gamma=0.5)",
        "StepLR(optimizer, step_size=1, gamma=0.5)")]),
    M("evaluate_mean_of_batch_means", "", "evaluate_averages_over_samples", replace=[(
        "            total += loss_fn(logits, yb).item() * len(yb)\n"
        "            correct += (logits.argmax(dim=1) == yb).sum().item()\n"
        "            count += len(yb)\n",
        "            total += loss_fn(logits, yb).item()\n"
        "            correct += (logits.argmax(dim=1) == yb).float().mean().item()\n"
        "            count += 1\n")]),
]
# train() may rely on the script's own model (its attributes): the contract states no model
# structure, so the train checks run it on the script's model.
MUTANTS += [
    M("correct_train_zeroes_own_layers", "", replace=[(
        "            optimizer.zero_grad()\n",
        "            model.blocks.zero_grad()\n            model.head.zero_grad()\n")]),
]
