"""Wrong implementations of `training_loops`: the classic mistakes, each with the checks it must
fail (see mutants/__init__.py). `fit` and `train_classifier` call the module's own
`train_epoch` and `evaluate`, so a mistake there also shows in the fit checks it changes."""

from mutants import mutant_factory

M = mutant_factory("training_loops")

FIT_ALL = ("fit_history_and_scheduler", "fit_early_stopping_restores_best",
           "fit_patience_counts_from_the_best_epoch", "fit_without_patience_restores_best")
EPOCH_STEPS = ("train_epoch_steps_like_the_reference", "train_epoch_adam_dataloader_short_batch")
CLASSIFIER = ("train_classifier_accuracy", "train_classifier_heldout_accuracy")
SEED = ("set_seed_makes_runs_identical", "set_seed_different_seeds_differ")
CHECKPOINT = ("checkpoint_resumes_sgd_momentum", "checkpoint_resumes_adam_and_batchnorm")
ACCUM = ("train_accumulated_matches_big_batches", "train_accumulated_remainders_and_momentum")

MUTANTS = [
    # ------------------------------------------------------------------ train_epoch
    M("no_zero_grad", "", *EPOCH_STEPS, *FIT_ALL,
      replace=[("        optimizer.zero_grad()          # before backward", "        # before")]),
    M("zero_grad_between_backward_and_step", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    losses = []
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)
""", *EPOCH_STEPS, *FIT_ALL, *CLASSIFIER),
    M("step_before_backward", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        optimizer.step()
        loss.backward()
        losses.append(loss.item())
    return sum(losses) / len(losses)
""", *EPOCH_STEPS, *FIT_ALL, *CLASSIFIER),
    M("train_epoch_forgets_train_mode", "", *EPOCH_STEPS,
      replace=[("def train_epoch(model, loader, optimizer, loss_fn) -> float:\n    model.train()\n",
                "def train_epoch(model, loader, optimizer, loss_fn) -> float:\n")]),
    M("train_epoch_two_backwards_per_batch", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward(retain_graph=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)
""", *EPOCH_STEPS, *FIT_ALL),
    M("train_epoch_returns_tensor", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return torch.stack(losses).mean()
""", "train_epoch_returns_mean_batch_loss", "train_epoch_adam_dataloader_short_batch", *FIT_ALL),
    M("train_epoch_returns_last_loss", "", "train_epoch_returns_mean_batch_loss",
      "train_epoch_adam_dataloader_short_batch", *FIT_ALL,
      replace=[("    return sum(losses) / len(losses)\n\n\ndef evaluate",
                "    return losses[-1]\n\n\ndef evaluate")]),
    M("train_epoch_weights_by_samples", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    total, count = 0.0, 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        count += len(y)
    return total / count
""", "train_epoch_adam_dataloader_short_batch"),
    # ------------------------------------------------------------------ evaluate
    M("evaluate_without_eval", "", "evaluate_eval_mode_without_grad",
      "evaluate_restores_mode_and_leaves_model_unchanged", "fit_without_patience_restores_best",
      replace=[("    model.eval()                       # dropout off", "    # dropout off")]),
    M("evaluate_without_no_grad", """
def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for x, y in loader:
        output = model(x)
        total_loss += loss_fn(output, y).item() * len(y)
        correct += (output.argmax(dim=1) == y).sum().item()
        count += len(y)
    model.train(was_training)
    return {"loss": total_loss / count, "accuracy": correct / count}
""", "evaluate_eval_mode_without_grad"),
    M("evaluate_batch_mean_loss", """
def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    losses, correct, count = [], 0, 0
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            losses.append(loss_fn(output, y).item())
            correct += (output.argmax(dim=1) == y).sum().item()
            count += len(y)
    model.train(was_training)
    return {"loss": sum(losses) / len(losses), "accuracy": correct / count}
""", "evaluate_averages_over_samples", "evaluate_uses_the_given_loss", *FIT_ALL),
    M("evaluate_batch_mean_accuracy", """
def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    total_loss, accuracies, count = 0.0, [], 0
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            total_loss += loss_fn(output, y).item() * len(y)
            accuracies.append((output.argmax(dim=1) == y).float().mean().item())
            count += len(y)
    model.train(was_training)
    return {"loss": total_loss / count, "accuracy": sum(accuracies) / len(accuracies)}
""", "evaluate_averages_over_samples", "evaluate_uses_the_given_loss", *FIT_ALL),
    M("evaluate_leaves_eval_mode", "", "evaluate_eval_mode_without_grad",
      "evaluate_restores_mode_and_leaves_model_unchanged",
      replace=[("        model.train(was_training)\n    return {", "        pass\n    return {")]),
    M("evaluate_always_back_to_train", "", "evaluate_restores_mode_and_leaves_model_unchanged",
      replace=[("        model.train(was_training)\n    return {",
                "        model.train()\n    return {")]),
    M("evaluate_ignores_loss_fn", """
def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            total_loss += nn.functional.cross_entropy(output, y, reduction="sum").item()
            correct += (output.argmax(dim=1) == y).sum().item()
            count += len(y)
    model.train(was_training)
    return {"loss": total_loss / count, "accuracy": correct / count}
""", "evaluate_uses_the_given_loss"),
    M("evaluate_returns_tensors", """
def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            total_loss += loss_fn(output, y) * len(y)
            correct += (output.argmax(dim=1) == y).sum()
            count += len(y)
    model.train(was_training)
    return {"loss": total_loss / count, "accuracy": correct / count}
""", "evaluate_averages_over_samples", "evaluate_eval_mode_without_grad",
       "evaluate_uses_the_given_loss", *FIT_ALL),
    # ------------------------------------------------------------------ fit
    M("scheduler_per_batch", """
def fit(model, train_loader, val_loader, optimizer, loss_fn, epochs, scheduler=None,
        patience=None):
    history = {"train_loss": [], "val_loss": [], "val_accuracy": [], "lr": []}
    best_loss, best_state, waited = math.inf, None, 0
    for _ in range(epochs):
        history["lr"].append(optimizer.param_groups[0]["lr"])
        model.train()
        losses = []
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            losses.append(loss.item())
        history["train_loss"].append(sum(losses) / len(losses))
        metrics = evaluate(model, val_loader, loss_fn)
        history["val_loss"].append(metrics["loss"])
        history["val_accuracy"].append(metrics["accuracy"])
        if metrics["loss"] < best_loss:
            best_loss, waited = metrics["loss"], 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            waited += 1
            if patience is not None and waited >= patience:
                break
    model.load_state_dict(best_state)
    return history
""", "fit_history_and_scheduler", "fit_patience_counts_from_the_best_epoch"),
    M("scheduler_before_training", "", "fit_history_and_scheduler",
      "fit_patience_counts_from_the_best_epoch",
      replace=[("        history[\"train_loss\"].append(train_epoch(model, train_loader, optimizer, "
                "loss_fn))\n        if scheduler is not None:\n            scheduler.step()  ",
                "        if scheduler is not None:\n            scheduler.step()\n        "
                "history[\"train_loss\"].append(train_epoch(model, train_loader, optimizer, "
                "loss_fn))  ")]),
    M("lr_recorded_after_scheduler_step", "", "fit_history_and_scheduler",
      "fit_patience_counts_from_the_best_epoch",
      replace=[("        history[\"lr\"].append(optimizer.param_groups[0][\"lr\"])\n", ""),
               ("        metrics = evaluate(model, val_loader, loss_fn)\n",
                "        history[\"lr\"].append(optimizer.param_groups[0][\"lr\"])\n"
                "        metrics = evaluate(model, val_loader, loss_fn)\n")]),
    M("no_best_weights_restore", "", "fit_early_stopping_restores_best",
      "fit_patience_counts_from_the_best_epoch", "fit_without_patience_restores_best",
      replace=[("        model.load_state_dict(best_state)\n    return history",
                "        pass\n    return history")]),
    M("best_weights_kept_by_reference", "", "fit_early_stopping_restores_best",
      "fit_patience_counts_from_the_best_epoch", "fit_without_patience_restores_best",
      replace=[("best_state = copy.deepcopy(model.state_dict())",
                "best_state = model.state_dict()")]),
    M("restore_only_when_stopping_early", """
def fit(model, train_loader, val_loader, optimizer, loss_fn, epochs, scheduler=None,
        patience=None):
    history = {"train_loss": [], "val_loss": [], "val_accuracy": [], "lr": []}
    best_loss, best_state, waited = math.inf, None, 0
    for _ in range(epochs):
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["train_loss"].append(train_epoch(model, train_loader, optimizer, loss_fn))
        if scheduler is not None:
            scheduler.step()
        metrics = evaluate(model, val_loader, loss_fn)
        history["val_loss"].append(metrics["loss"])
        history["val_accuracy"].append(metrics["accuracy"])
        if metrics["loss"] < best_loss:
            best_loss, waited = metrics["loss"], 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            waited += 1
            if patience is not None and waited >= patience:
                model.load_state_dict(best_state)
                break
    return history
""", "fit_without_patience_restores_best"),
    M("patience_off_by_one", "", "fit_early_stopping_restores_best",
      "fit_patience_counts_from_the_best_epoch",
      replace=[("epochs_without_improvement >= patience",
                "epochs_without_improvement > patience")]),
    M("patience_counts_rises_from_previous_epoch", """
def fit(model, train_loader, val_loader, optimizer, loss_fn, epochs, scheduler=None,
        patience=None):
    history = {"train_loss": [], "val_loss": [], "val_accuracy": [], "lr": []}
    best_loss, best_state, previous, rises = math.inf, None, math.inf, 0
    for _ in range(epochs):
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["train_loss"].append(train_epoch(model, train_loader, optimizer, loss_fn))
        if scheduler is not None:
            scheduler.step()
        metrics = evaluate(model, val_loader, loss_fn)
        history["val_loss"].append(metrics["loss"])
        history["val_accuracy"].append(metrics["accuracy"])
        if metrics["loss"] < best_loss:
            best_loss = metrics["loss"]
            best_state = copy.deepcopy(model.state_dict())
        rises = rises + 1 if metrics["loss"] > previous else 0
        previous = metrics["loss"]
        if patience is not None and rises >= patience:
            break
    model.load_state_dict(best_state)
    return history
""", "fit_patience_counts_from_the_best_epoch"),
    M("fit_tie_counts_as_a_new_best", "", "fit_patience_counts_from_the_best_epoch",
      replace=[('if metrics["loss"] < best_loss:', 'if metrics["loss"] <= best_loss:')]),
    M("fit_wait_count_never_reset", "", "fit_patience_counts_from_the_best_epoch",
      replace=[('best_loss, epochs_without_improvement = metrics["loss"], 0',
                'best_loss = metrics["loss"]')]),
    M("fit_breaks_without_patience", "", "fit_without_patience_restores_best",
      replace=[("if patience is not None and epochs_without_improvement >= patience:",
                "if epochs_without_improvement >= patience:")]),
    M("fit_needs_a_scheduler", "", "fit_early_stopping_restores_best",
      "fit_without_patience_restores_best",
      replace=[("        if scheduler is not None:\n            scheduler.step()  ",
                "        if True:\n            scheduler.step()  ")]),
    # ------------------------------------------------------------------ train_accumulated
    M("accumulation_unscaled", "", *ACCUM,
      replace=[("(loss / chunk_size).backward()", "loss.backward()")]),
    M("accumulation_without_remainder_step", """
def train_accumulated(model, loader, optimizer, loss_fn, accum_steps):
    model.train()
    losses = []
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        (loss / accum_steps).backward()
        losses.append(loss.item())
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return sum(losses) / len(losses)
""", *ACCUM),
    M("accumulation_remainder_divided_by_accum_steps", """
def train_accumulated(model, loader, optimizer, loss_fn, accum_steps):
    model.train()
    losses = []
    n = len(loader)
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        (loss / accum_steps).backward()
        losses.append(loss.item())
        if (i + 1) % accum_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
    return sum(losses) / len(losses)
""", *ACCUM),
    M("accumulation_steps_every_batch", "", *ACCUM,
      replace=[("        if i + 1 == chunk_start + chunk_size:\n            optimizer.step()",
                "        if True:\n            optimizer.step()")]),
    M("accumulation_returns_scaled_losses", "", *ACCUM,
      replace=[("        (loss / chunk_size).backward()   # grads add up to the gradient of the "
                "chunk's mean loss\n        losses.append(loss.item())",
                "        loss = loss / chunk_size\n        loss.backward()\n"
                "        losses.append(loss.item())")]),
    # ------------------------------------------------------------------ checkpoints
    M("optimizer_state_not_checkpointed", """
def save_checkpoint(path, model, optimizer, epoch):
    torch.save({"model": model.state_dict(), "epoch": epoch}, path)


def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path)
    model.load_state_dict(checkpoint["model"])
    return checkpoint["epoch"]
""", *CHECKPOINT),
    M("checkpoint_optimizer_state_without_its_groups", "",
      "checkpoint_resumes_adam_and_batchnorm",
      replace=[('    optimizer.load_state_dict(checkpoint["optimizer"])   # momentum buffers, Adam '
                'moments, step',
                '    fresh = optimizer.state_dict()\n'
                '    fresh["state"] = checkpoint["optimizer"]["state"]  # the groups (lr) stay fresh\n'
                '    optimizer.load_state_dict(fresh)')]),
    M("checkpoint_model_not_loaded", "", *CHECKPOINT,
      replace=[("    model.load_state_dict(checkpoint[\"model\"])\n", "")]),
    M("load_checkpoint_returns_nothing", "", *CHECKPOINT,
      replace=[("    return checkpoint[\"epoch\"]", "    return None")]),
    M("checkpoint_kept_in_memory", """
_SAVED = {}


def save_checkpoint(path, model, optimizer, epoch):
    _SAVED[str(path)] = (model.state_dict(), optimizer.state_dict(), epoch)


def load_checkpoint(path, model, optimizer):
    model_state, optimizer_state, epoch = _SAVED[str(path)]
    model.load_state_dict(model_state)
    optimizer.load_state_dict(optimizer_state)
    return epoch
""", *CHECKPOINT),
    M("checkpoint_parameters_only", """
def save_checkpoint(path, model, optimizer, epoch):
    torch.save({"params": {n: p.detach() for n, p in model.named_parameters()},
                "optimizer": optimizer.state_dict(), "epoch": epoch}, path)


def load_checkpoint(path, model, optimizer):
    checkpoint = torch.load(path)
    model.load_state_dict(checkpoint["params"], strict=False)
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]
""", "checkpoint_resumes_adam_and_batchnorm"),
    # ------------------------------------------------------------------ set_seed
    M("numpy_not_seeded", "", *SEED, replace=[("    np.random.seed(seed)\n", "")]),
    M("random_not_seeded", "", *SEED, replace=[("    random.seed(seed)\n", "")]),
    M("torch_not_seeded", "", *SEED, replace=[("    torch.manual_seed(seed)\n", "")]),
    M("numpy_seeded_with_a_private_generator", "", *SEED,
      replace=[("    np.random.seed(seed)\n", "    rng = np.random.default_rng(seed)\n")]),
    M("best_parameters_without_buffers", "", "fit_without_patience_restores_best",
      replace=[("best_state = copy.deepcopy(model.state_dict())   # a copy, not live references",
                "best_state = {k: p.detach().clone() for k, p in model.named_parameters()}"),
               ("        model.load_state_dict(best_state)",
                "        model.load_state_dict(best_state, strict=False)")]),
    M("torch_seeded_with_a_constant", "", "set_seed_different_seeds_differ",
      replace=[("    torch.manual_seed(seed)\n", "    torch.manual_seed(42)\n")]),
    M("seed_argument_ignored", """
def set_seed(seed):
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
""", "set_seed_different_seeds_differ"),
    # ------------------------------------------------------------------ train_classifier
    M("classifier_not_trained", """
def train_classifier(X_train, y_train, X_val, y_val):
    return nn.Sequential(nn.Linear(X_train.shape[1], 64), nn.ReLU(), nn.Linear(64, 10))
""", *CLASSIFIER),
    M("classifier_returns_predictions", """
_train_classifier = train_classifier


def train_classifier(X_train, y_train, X_val, y_val):
    return _train_classifier(X_train, y_train, X_val, y_val)(X_val).argmax(dim=1)
""", *CLASSIFIER),
    M("classifier_undertrained", """
def train_classifier(X_train, y_train, X_val, y_val):
    set_seed(0)
    model = nn.Sequential(nn.Linear(X_train.shape[1], 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    train_epoch(model, [(X_train, y_train)], optimizer, nn.CrossEntropyLoss())
    return model
""", *CLASSIFIER),
]

# Correct variants (they must fail nothing): styles a strict check could wrongly reject.
MUTANTS += [
    M("correct_model_zero_grad", "", replace=[(
        "        optimizer.zero_grad()          # before backward",
        "        model.zero_grad()              # before backward")]),
    M("correct_zero_grad_keeps_zero_tensors", "", replace=[(
        "        optimizer.zero_grad()          # before backward",
        "        optimizer.zero_grad(set_to_none=False)  # before backward")]),
    M("correct_float_of_loss", "", replace=[("losses.append(loss.item())     # a float",
                                             "losses.append(float(loss))     # a float")]),
    M("correct_inference_mode", "", replace=[("        with torch.no_grad():          # no graph",
                                              "        with torch.inference_mode():   # no graph")]),
    M("correct_mode_restored_with_if", "", replace=[(
        "        model.train(was_training)\n    return {",
        "        if was_training:\n            model.train()\n    return {")]),
    M("correct_best_model_deepcopy", "", replace=[
        ("best_state = copy.deepcopy(model.state_dict())", "best_model = copy.deepcopy(model)"),
        ("best_loss, best_state, epochs_without_improvement = math.inf, None, 0",
         "best_loss, best_model, epochs_without_improvement = math.inf, None, 0"),
        ("    if best_state is not None:\n        model.load_state_dict(best_state)",
         "    if best_model is not None:\n        model.load_state_dict(best_model.state_dict())")]),
    M("correct_best_state_cloned", "", replace=[(
        "best_state = copy.deepcopy(model.state_dict())",
        "best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}")]),
    M("correct_scheduler_after_evaluate", "", replace=[
        ("        if scheduler is not None:\n            scheduler.step()           # once per "
         "epoch, after the optimizer's steps\n", ""),
        ("        history[\"val_accuracy\"].append(metrics[\"accuracy\"])\n",
         "        history[\"val_accuracy\"].append(metrics[\"accuracy\"])\n"
         "        if scheduler is not None:\n            scheduler.step()\n")]),
    M("correct_step_with_a_closure", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    losses = []
    for x, y in loader:
        def closure():
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss
        losses.append(optimizer.step(closure).item())
    return sum(losses) / len(losses)
"""),
    M("correct_evaluate_with_sum_reduction", """
def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    reduction, loss_fn.reduction = loss_fn.reduction, "sum"
    total, correct, count = 0.0, 0, 0
    try:
        with torch.no_grad():
            for x, y in loader:
                output = model(x)
                total += loss_fn(output, y).item()
                correct += (output.argmax(1) == y).sum().item()
                count += len(y)
    finally:
        loss_fn.reduction = reduction
        model.train(was_training)
    return {"loss": total / count, "accuracy": correct / count}
"""),
    M("correct_zero_grad_after_step", """
def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    total = 0.0
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total += loss.item()
    return total / len(loader)
"""),
]

# Catalogued faults (grader/course/faults.toml) these mutants hold: their failing checks must say so.
DIAGNOSES = {
    "no_zero_grad": ["grad-not-zeroed"],
    "zero_grad_between_backward_and_step": ["zero-grad-after-backward"],
    "train_epoch_forgets_train_mode": ["train-mode-not-restored"],
    "train_epoch_two_backwards_per_batch": ["double-backward"],
    "train_epoch_returns_tensor": ["loss-history-tensors"],
    "evaluate_returns_tensors": ["loss-history-tensors"],
    "evaluate_without_eval": ["validation-without-eval"],
    "evaluate_without_no_grad": ["validation-without-no-grad"],
    "scheduler_per_batch": ["scheduler-stepped-per-batch"],
}
