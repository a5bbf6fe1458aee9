"""Variants of the bug hunt `bughunt_finetune` (solutions/bughunt/finetune.py): see
bughunt_regression.py for the four kinds (catalogue_, second_, deleted_, correct_)."""

from mutants import (NOT_FINITE, RUN_RAISES, catalogue_mutants, mutant_factory,
                     visible_mutants)

M = mutant_factory("bughunt_finetune")
VALIDATION = ("validation_without_graph", "validation_in_eval_mode", "training_mode_restored")
FREEZE = ("    for p in model.encoder[0].parameters():\n"
          "        p.requires_grad_(False)\n")

MUTANTS = catalogue_mutants("bughunt_finetune") + [
    M("second_zeroed_once_per_epoch", "", "steps_use_fresh_gradients", replace=[(
        "        total, count = 0.0, 0\n        for xb, yb, sb in train_loader:\n",
        "        total, count = 0.0, 0\n        optimizer.zero_grad()\n"
        "        for xb, yb, sb in train_loader:\n"), (
        "            optimizer.zero_grad()\n            loss.backward()\n",
        "            loss.backward()\n")], diagnoses=["grad-not-zeroed"]),
    M("second_retain_graph_twice", "", "steps_use_fresh_gradients", replace=[(
        "            optimizer.zero_grad()\n            loss.backward()\n",
        "            optimizer.zero_grad()\n            loss.backward(retain_graph=True)\n"
        "            loss.backward()\n")], diagnoses=["double-backward"]),
    M("second_set_grad_enabled", "", "validation_without_graph", replace=[(
        "    with torch.no_grad():\n        for xb, yb, sb in loader:\n",
        "    with torch.set_grad_enabled(True):\n        for xb, yb, sb in loader:\n")],
      diagnoses=["validation-without-no-grad"]),
    M("second_detached_tensor_totals", "", "history_holds_floats", replace=[(
        "            total += loss.item() * len(yb)\n            count += len(yb)\n"
        "        metrics = evaluate(model, val_loader)\n",
        "            total = total + loss.detach() * len(yb)\n            count += len(yb)\n"
        "        metrics = evaluate(model, val_loader)\n")], diagnoses=["loss-history-tensors"]),
    M("second_encoder_under_no_grad", "", "trainable_layers_get_gradients", replace=[(
        "        h = self.encoder(x)\n        return self.head(h)",
        "        with torch.no_grad():\n            h = self.encoder(x)\n        return self.head(h)")],
      diagnoses=["detach-on-path"]),
    M("second_adapted_in_place_after_the_optimizer", "", "new_head_is_trained", replace=[(
        "    model = adapt(load_pretrained(seed), N_CLASSES)\n    optimizer = make_optimizer(model)\n",
        "    model = load_pretrained(seed)\n    optimizer = make_optimizer(model)\n"
        "    adapt(model, N_CLASSES)\n")], diagnoses=["optimizer-before-head-replaced"]),
    M("second_eval_instead_of_freezing", "", "frozen_layers_stay_frozen", replace=[(
        FREEZE, "    model.encoder[0].eval()\n")], diagnoses=["backbone-not-frozen"]),
    M("second_head_group_learning_rate", "", "learning_rate_trains", replace=[(
        "{\"params\": heads}], lr=LR", "{\"params\": heads, \"lr\": 20.0}], lr=LR")],
      diagnoses=["lr-too-high"]),
    M("second_print_of_a_tensor", "", "log_prints_numbers", replace=[(
        "        print(f\"epoch {epoch + 1:2d}  train loss",
        "        print(\"loss\", loss)\n        print(f\"epoch {epoch + 1:2d}  train loss")],
      diagnoses=["print-tensor-logging"]),
    M("second_class_logits_detached_in_the_loop", "", "steps_use_fresh_gradients", replace=[(
        "            loss = F.cross_entropy(logits, yb) + SCORE_WEIGHT * F.mse_loss(score, sb)\n"
        "            optimizer.zero_grad()\n",
        "            loss = F.cross_entropy(logits.detach(), yb) + SCORE_WEIGHT * "
        "F.mse_loss(score, sb)\n            optimizer.zero_grad()\n")],
      diagnoses=["detach-on-path"]),
    M("second_learning_rate_constant", "", "learning_rate_trains", replace=[(
        "LR = 0.05\n", "LR = 3.0\n")], diagnoses=["lr-too-high"]),

    M("deleted_freezing", "", "frozen_layers_stay_frozen", replace=[(FREEZE, "")],
      diagnoses=["backbone-not-frozen"]),
    M("deleted_validation", "", *VALIDATION, replace=[(
        "        metrics = evaluate(model, val_loader)\n",
        "        metrics = {\"loss\": 0.0, \"accuracy\": 0.0}\n")]),

    M("correct_freeze_the_module", "", replace=[(
        FREEZE, "    model.encoder[0].requires_grad_(False)\n")]),
    M("correct_optimizer_built_again", "", replace=[(
        "    model = adapt(load_pretrained(seed), N_CLASSES)\n    optimizer = make_optimizer(model)\n",
        "    model = load_pretrained(seed)\n    optimizer = make_optimizer(model)\n"
        "    model = adapt(model, N_CLASSES)\n    optimizer = make_optimizer(model)\n")]),
    M("correct_no_grad_decorator", "", replace=[(
        "def evaluate(model, loader):\n", "@torch.no_grad()\ndef evaluate(model, loader):\n"), (
        "    with torch.no_grad():\n        for xb, yb, sb in loader:\n",
        "    if True:\n        for xb, yb, sb in loader:\n")]),
    M("correct_two_losses_summed", "", replace=[(
        "            loss = F.cross_entropy(logits, yb) + SCORE_WEIGHT * F.mse_loss(score, sb)\n"
        "            optimizer.zero_grad()\n",
        "            class_loss = F.cross_entropy(logits, yb)\n"
        "            loss = class_loss + SCORE_WEIGHT * F.mse_loss(score, sb)\n"
        "            optimizer.zero_grad()\n")]),
]

# Issue 18: a freeze too broad (the score head forgotten when unfreezing) trains less than
# the contract says; validation in one pass through the loader's dataset is recognised by
# value.
MUTANTS += [
    M("freeze_everything_but_encoder_and_new_head", "", "frozen_layers_stay_frozen", replace=[(
        FREEZE, "    model.requires_grad_(False)\n    model.encoder[2].requires_grad_(True)\n"
        "    model.head.requires_grad_(True)\n")]),
    M("one_pass_evaluate_with_graph", "", "validation_without_graph", replace=[(
        "    with torch.no_grad():\n        for xb, yb, sb in loader:\n",
        "    if True:\n        for xb, yb, sb in [loader.dataset.tensors]:\n")],
      diagnoses=["validation-without-no-grad"]),
]
# What run(seed=0) returns, broken five ways: each fails visible checks only.
MUTANTS += visible_mutants(
    "bughunt_finetune", '    return {"model": model, "history": history}\n')
# Mutants whose run(seed=0) raises, or whose history stops being finite, fail visible checks too.
VISIBLE_FAILS = {
    "catalogue_double-backward": RUN_RAISES,
    "catalogue_lr-too-high": NOT_FINITE,
    "second_head_group_learning_rate": NOT_FINITE,
}
# Held-out wrong fixes, each judged against the fixed script's contract.
MUTANTS += [
    # The score loss no longer trains the shared encoder.
    M("score_head_fed_detached_features", "", "trainable_layers_get_gradients", replace=[(
        "        return self.head(h), self.score_head(h).squeeze(1)\n",
        "        return self.head(h), self.score_head(h.detach()).squeeze(1)\n")],
      diagnoses=["detach-on-path"]),
    # make_optimizer: one learning rate for all, or the factor on the wrong group.
    M("one_learning_rate_for_all", "", "learning_rate_trains", replace=[(
        "    return torch.optim.SGD([{\"params\": encoder, \"lr\": LR * ENCODER_LR_FACTOR},\n"
        "                            {\"params\": heads}], lr=LR, momentum=0.9)\n",
        "    return torch.optim.SGD(encoder + heads, lr=LR, momentum=0.9)\n")]),
    M("learning_rate_factor_on_the_heads", "", "learning_rate_trains", replace=[(
        "    return torch.optim.SGD([{\"params\": encoder, \"lr\": LR * ENCODER_LR_FACTOR},\n"
        "                            {\"params\": heads}], lr=LR, momentum=0.9)\n",
        "    return torch.optim.SGD([{\"params\": encoder},\n"
        "                            {\"params\": heads, \"lr\": LR * ENCODER_LR_FACTOR}], lr=LR,\n"
        "                           momentum=0.9)\n")]),
    # adapt leaves the first layer trainable; only the optimizer leaves it out.
    M("frozen_only_by_the_optimizer", "", "frozen_layers_stay_frozen", replace=[
        ("    for p in model.encoder[0].parameters():\n        p.requires_grad_(False)\n", ""),
        ("    encoder = [p for p in model.encoder.parameters() if p.requires_grad]\n",
         "    encoder = [p for p in model.encoder[2].parameters()]\n")],
      diagnoses=["backbone-not-frozen"]),
]
