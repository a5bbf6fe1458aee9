"""training_loops written out by hand: zero_grad after step, running sums, explicit chunks,
cloned best state, checkpoints through file objects, a hand-written MLP classifier with
shuffled mini-batches and SGD with momentum."""

import math
import random

import numpy as np
import torch
from torch import nn


def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    optimizer.zero_grad(set_to_none=False)
    total, n_batches = 0.0, 0
    for x, y in loader:
        output = model(x)
        loss = loss_fn(output, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        total += loss.detach().item()
        n_batches += 1
    return total / n_batches


def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64)
    correct = count = 0
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            loss_sum += loss_fn(output, y).double() * y.size(0)
            correct += (output.argmax(1) == y).sum().item()
            count += y.size(0)
    if was_training:
        model.train()
    else:
        model.eval()
    return {"loss": loss_sum.item() / count, "accuracy": correct / count}


def fit(model, train_loader, val_loader, optimizer, loss_fn, epochs, scheduler=None,
        patience=None):
    train_losses, val_losses, val_accuracies, lrs = [], [], [], []
    best, best_state, bad_epochs = math.inf, None, 0
    epoch = 0
    while epoch < epochs:
        lrs.append(optimizer.param_groups[0]["lr"])
        train_losses.append(train_epoch(model, train_loader, optimizer, loss_fn))
        if scheduler is not None:
            scheduler.step()
        result = evaluate(model, val_loader, loss_fn)
        val_losses.append(result["loss"])
        val_accuracies.append(result["accuracy"])
        if result["loss"] < best:
            best = result["loss"]
            best_state = {name: t.detach().clone() for name, t in model.state_dict().items()}
            bad_epochs = 0
        else:
            bad_epochs += 1
        epoch += 1
        if patience is not None and bad_epochs >= patience:
            break
    model.load_state_dict(best_state)
    return {"train_loss": train_losses, "val_loss": val_losses,
            "val_accuracy": val_accuracies, "lr": lrs}


def train_accumulated(model, loader, optimizer, loss_fn, accum_steps):
    model.train()
    batches = list(loader)
    losses = []
    for start in range(0, len(batches), accum_steps):
        chunk = batches[start:start + accum_steps]
        optimizer.zero_grad()
        for x, y in chunk:
            loss = loss_fn(model(x), y)
            (loss / len(chunk)).backward()
            losses.append(loss.item())
        optimizer.step()
    return sum(losses) / len(losses)


def save_checkpoint(path, model, optimizer, epoch):
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "optim": optimizer.state_dict(),
                    "epoch": epoch}, f)


def load_checkpoint(path, model, optimizer):
    with open(path, "rb") as f:
        state = torch.load(f)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optim"])
    return state["epoch"]


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.random.manual_seed(seed)


class Classifier(nn.Module):
    def __init__(self, mean, std, d_in, classes):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.hidden = nn.Linear(d_in, 32)
        self.out = nn.Linear(32, classes)

    def forward(self, x):
        return self.out(torch.relu(self.hidden((x - self.mean) / self.std)))


def train_classifier(X_train, y_train, X_val, y_val):
    set_seed(123)
    model = Classifier(X_train.mean(0), X_train.std(0), X_train.shape[1], 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(15):
        order = torch.randperm(len(X_train))
        batches = [(X_train[order[i:i + 32]], y_train[order[i:i + 32]])
                   for i in range(0, len(X_train), 32)]
        train_epoch(model, batches, optimizer, loss_fn)
    return model
