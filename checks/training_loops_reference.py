"""The grader's own reference runs for the `training_loops` checks (grader side only).

Each function builds the objects a case describes with the same builders the probe uses, runs
the loop the contract describes, and returns what a correct submission must reproduce. The
grader and the workers both run torch single-threaded, so a correct submission lands on these
numbers bit for bit in practice; checks still compare with small tolerances (see there).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from training_loops_cases import (AccumulatedCase, CheckpointCase, EvaluateCase,
                                                FitCase, Setup, TrainEpochCase)
from grader.checking.memo import reference_cache
from probes.training_loops import (build_loader, build_loss, build_model,
                                          build_optimizer, build_scheduler, set_mode, state_of)


def _objects(case: Setup):
    model = build_model(case.model, case.sizes, case.state)
    return model, build_optimizer(case.optimizer, model.parameters()), build_loss(case.loss)


def _epoch(model, loader, optimizer, loss_fn, grads: list | None = None) -> list[float]:
    """One epoch of the contract's loop; with `grads`, each step's gradient (all parameters
    flattened and concatenated, as the probe's step audit records it) is appended there."""
    model.train()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if grads is not None:
            grads.append(torch.cat([p.grad.detach().reshape(-1).float().clone()
                                    for p in model.parameters()]))
        optimizer.step()
        losses.append(loss.item())
    return losses


def _evaluate(model, loader, loss_fn) -> tuple[float, float, float]:
    """(sample-mean loss, accuracy, mean of the batch losses) in eval mode without gradients;
    the model's mode is restored."""
    was_training = model.training
    model.eval()
    total, correct, count, batch_losses = 0.0, 0, 0, []
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss = loss_fn(out, y).item()
            total += loss * len(y)
            correct += int((out.argmax(dim=1) == y).sum())
            count += len(y)
            batch_losses.append(loss)
    model.train(was_training)
    return total / count, correct / count, sum(batch_losses) / len(batch_losses)


# --------------------------------------------------------------------------- train_epoch


@dataclass
class EpochReference:
    state: dict[str, torch.Tensor]
    batch_losses: list[float]
    mean_loss: float
    sample_mean_loss: float  # what a sample-weighted mean would give (for messages)
    edge_grads: list[torch.Tensor]  # the first and the last step's flat gradient (report)


@reference_cache
def train_epoch(case: TrainEpochCase) -> EpochReference:
    model, optimizer, loss_fn = _objects(case)
    set_mode(model, case.start_mode)
    grads: list[torch.Tensor] = []
    losses = _epoch(model, build_loader(case.batches, case.loader), optimizer, loss_fn, grads)
    sizes = [len(y) for _, y in case.batches]
    return EpochReference(state_of(model), losses, sum(losses) / len(losses),
                          sum(loss * n for loss, n in zip(losses, sizes)) / sum(sizes),
                          [grads[0], grads[-1]] if grads else [])


# --------------------------------------------------------------------------- evaluate


@dataclass
class EvaluateReference:
    loss: float
    accuracy: float
    batch_mean_loss: float  # the mean of the batch losses (a wrong answer, for messages)
    batch_mean_accuracy: float
    train_mode_loss: float  # the loss with the model left in training mode (for messages)
    plain_loss: float       # plain cross-entropy instead of the given loss (for messages)


@reference_cache
def evaluate(case: EvaluateCase) -> EvaluateReference:
    model = build_model(case.model, case.sizes, case.state)
    loss_fn = build_loss(case.loss)
    loss, accuracy, batch_mean = _evaluate(model, case.batches, loss_fn)
    plain_loss, _, _ = _evaluate(model, case.batches, build_loss("cross_entropy"))
    model.eval()
    with torch.no_grad():
        accuracies = [float((model(x).argmax(1) == y).float().mean()) for x, y in case.batches]
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        model.train()
        train_mode = sum(loss_fn(model(x), y).item() * len(y) for x, y in case.batches)
    return EvaluateReference(loss, accuracy, batch_mean, sum(accuracies) / len(accuracies),
                             train_mode / sum(len(y) for _, y in case.batches), plain_loss)


# --------------------------------------------------------------------------- fit


@dataclass
class FitReference:
    train_loss: list[float]
    val_loss: list[float]
    val_accuracy: list[float]
    lr: list[float]            # per epoch run
    step_lrs: list[float]      # per optimizer step
    best_epoch: int            # index into the lists
    best_state: dict[str, torch.Tensor]
    last_state: dict[str, torch.Tensor]
    margin: float              # smallest relative gap between the best val loss and any other


@reference_cache
def fit(case: FitCase) -> FitReference:
    model, optimizer, loss_fn = _objects(case)
    scheduler = build_scheduler(case.scheduler, optimizer)
    history: dict[str, list[float]] = {"train_loss": [], "val_loss": [], "val_accuracy": [],
                                       "lr": []}
    step_lrs: list[float] = []
    best_loss, best_epoch, best_state, since_best = float("inf"), -1, None, 0
    for epoch in range(case.epochs):
        lr = optimizer.param_groups[0]["lr"]
        history["lr"].append(lr)
        losses = _epoch(model, case.batches, optimizer, loss_fn)
        step_lrs += [lr] * len(losses)
        history["train_loss"].append(sum(losses) / len(losses))
        if scheduler is not None:
            scheduler.step()
        val_loss, val_accuracy, _ = _evaluate(model, case.val_batches, loss_fn)
        history["val_loss"].append(val_loss)
        history["val_accuracy"].append(val_accuracy)
        if val_loss < best_loss:
            best_loss, best_epoch, since_best = val_loss, epoch, 0
            best_state = copy.deepcopy(state_of(model))
        else:
            since_best += 1
            if case.patience is not None and since_best >= case.patience:
                break
    # Exact ties come only from epochs at learning rate 0, where the student's run ties exactly
    # too (same weights, same evaluation): no rounding can put them on the other side.
    others = [v for i, v in enumerate(history["val_loss"]) if i != best_epoch and v != best_loss]
    margin = min((abs(v - best_loss) / best_loss for v in others), default=float("inf"))
    assert best_state is not None  # the first epoch's finite loss is below inf
    return FitReference(history["train_loss"], history["val_loss"], history["val_accuracy"],
                        history["lr"], step_lrs, best_epoch, best_state, state_of(model), margin)


# --------------------------------------------------------------------------- train_accumulated


@dataclass
class AccumulatedReference:
    state: dict[str, torch.Tensor]
    step_grads: list[torch.Tensor]  # flattened gradient each step must use
    mean_loss: float


@reference_cache
def train_accumulated(case: AccumulatedCase) -> AccumulatedReference:
    """One step per chunk on the chunk's batches concatenated (equal batch sizes: the mean loss
    over the concatenation is the mean of the batch losses)."""
    model, optimizer, loss_fn = _objects(case)
    model.train()
    grads, losses = [], []
    for chunk in case.chunks():
        x = torch.cat([case.batches[i][0] for i in chunk])
        y = torch.cat([case.batches[i][1] for i in chunk])
        with torch.no_grad():
            losses += [loss_fn(model(case.batches[i][0]), case.batches[i][1]).item()
                       for i in chunk]
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        optimizer.step()
    return AccumulatedReference(state_of(model), grads, sum(losses) / len(losses))


# --------------------------------------------------------------------------- checkpoints


@dataclass
class CheckpointReference:
    saved_state: dict[str, torch.Tensor]           # the model when it was saved
    saved_optimizer: dict[int, dict[str, torch.Tensor]]
    final_state: dict[str, torch.Tensor]           # after two epochs without interruption


@reference_cache
def checkpoint(case: CheckpointCase) -> CheckpointReference:
    model, optimizer, loss_fn = _objects(case)
    _epoch(model, case.batches, optimizer, loss_fn)
    if case.decayed_lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = case.decayed_lr
    saved = state_of(model)
    saved_optimizer = {int(k): {n: (v.detach().clone() if isinstance(v, torch.Tensor) else v)
                                for n, v in s.items()}
                       for k, s in optimizer.state_dict()["state"].items()}
    _epoch(model, case.batches, optimizer, loss_fn)
    return CheckpointReference(saved, saved_optimizer, state_of(model))
