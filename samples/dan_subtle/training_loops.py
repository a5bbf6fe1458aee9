"""Training loops: the loss goes down at first, so it must be right?"""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_epoch(model, loader, optimizer, loss_fn) -> float:
    model.train()
    losses = []
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())     # a float: keeping the tensor would keep its graph alive
    return sum(losses) / len(losses)


def evaluate(model, loader, loss_fn) -> dict:
    was_training = model.training
    model.eval()                       # dropout off, BatchNorm uses its running statistics
    total_loss, correct, count = 0.0, 0, 0
    try:
        with torch.no_grad():          # no graph: nothing here is differentiated
            for x, y in loader:
                output = model(x)
                total_loss += loss_fn(output, y).item() * len(y)   # back to a sum over samples
                correct += (output.argmax(dim=1) == y).sum().item()
                count += len(y)
    finally:
        model.train(was_training)
    return {"loss": total_loss / count, "accuracy": correct / count}


def fit(model, train_loader, val_loader, optimizer, loss_fn, epochs: int, scheduler=None,
        patience: int | None = None) -> dict:
    history = {"train_loss": [], "val_loss": [], "val_accuracy": [], "lr": []}
    best_loss, best_state, epochs_without_improvement = math.inf, None, 0
    for _ in range(epochs):
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["train_loss"].append(train_epoch(model, train_loader, optimizer, loss_fn))
        if scheduler is not None:
            scheduler.step()           # once per epoch, after the optimizer's steps
        metrics = evaluate(model, val_loader, loss_fn)
        history["val_loss"].append(metrics["loss"])
        history["val_accuracy"].append(metrics["accuracy"])
        if metrics["loss"] < best_loss:
            best_loss, epochs_without_improvement = metrics["loss"], 0
            best_state = copy.deepcopy(model.state_dict())   # a copy, not live references
        else:
            epochs_without_improvement += 1
            if patience is not None and epochs_without_improvement >= patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    return history


def train_accumulated(model, loader, optimizer, loss_fn, accum_steps: int) -> float:
    model.train()
    n_batches = len(loader)
    losses = []
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        chunk_start = i - i % accum_steps
        chunk_size = min(accum_steps, n_batches - chunk_start)   # the remainder is shorter
        loss = loss_fn(model(x), y)
        (loss / chunk_size).backward()   # grads add up to the gradient of the chunk's mean loss
        losses.append(loss.item())
        if i + 1 == chunk_start + chunk_size:
            optimizer.step()
            optimizer.zero_grad()
    return sum(losses) / len(losses)


def save_checkpoint(path, model, optimizer, epoch: int) -> None:
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch}, path)


def load_checkpoint(path, model, optimizer) -> int:
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])   # momentum buffers, Adam moments, step
    return checkpoint["epoch"]


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Standardize(nn.Module):
    """(x - mean) / std with statistics of the training set, kept as buffers."""

    def __init__(self, x: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", x.mean(dim=0))
        self.register_buffer("std", x.std(dim=0) + 1e-6)

    def forward(self, x):
        return (x - self.mean) / self.std


def train_classifier(X_train, y_train, X_val, y_val) -> nn.Module:
    set_seed(0)
    classes = int(y_train.max()) + 1
    model = nn.Sequential(Standardize(X_train), nn.Linear(X_train.shape[1], 64), nn.ReLU(),
                          nn.Linear(64, classes))
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=500)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.3)
    fit(model, train_loader, val_loader, optimizer, nn.CrossEntropyLoss(), epochs=30,
        scheduler=scheduler, patience=5)
    return model.eval()
