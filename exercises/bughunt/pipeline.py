"""Bug hunt: a data pipeline, from numpy arrays to normalised batches.

This copy holds 4 faults: find and fix them.

Readings of six sensors (temperatures around 300 K, pressures around 100 kPa, a humidity in
percent, three vibration amplitudes) come as numpy arrays exported from a database, sorted by
the machine's state (0 ok, 1 worn, 2 failing). The pipeline splits them, standardises the
features with the statistics of the training split, turns them into tensors and batches, and
trains a small network with BatchNorm and dropout that predicts the state. It prints a short
data report and one line per epoch. Run it with `python pipeline.py`.

Fix every fault in place, keeping every feature: the standardisation, the loaders, BatchNorm,
dropout, the validation after each epoch, the history and the log.

What the grader calls (keep these names and signatures):

    load_readings(seed=0) -> (X, y)       numpy: X (602, 6) float32, y (602,) int64 states,
                                          sorted by state (never needs a fix)
    split(X, y) -> (X_train, y_train, X_val, y_val)   numpy; every fifth reading validates
    fit_normalizer(X) -> (mean, std)      numpy, per feature, of the rows of X
    standardize(X, mean, std) -> tensor   float32 tensor (X - mean) / std; X is not modified
    to_labels(y) -> tensor                the states as a tensor of class indices
    make_loaders(x_train, y_train, x_val, y_val) -> (train_loader, val_loader)
    SensorNet(n_features=6, n_classes=3)  forward(x (N, n_features)) -> (N, n_classes) logits
    evaluate(model, loader, loss_fn) -> {"loss": float, "accuracy": float}   over samples
    train(model, train_loader, val_loader, optimizer, loss_fn, epochs) -> dict
        per epoch: in training mode, for every batch zero the gradients, forward, loss,
        backward, step; then evaluate on val_loader in eval mode without gradients; returns
        {"train_loss": [...], "val_loss": [...], "val_accuracy": [...]} (Python floats, one
        per epoch) and prints one line per epoch
    run(seed=0) -> dict                   the whole pipeline; trains on features standardised
        with the training split's statistics and returns {"model": ..., "history": ...}
"""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SENSORS = ("temperature_K", "pressure_kPa", "humidity_pct", "vibration_x", "vibration_y",
           "vibration_z")
EPOCHS = 12
BATCH_SIZE = 32
LR = 0.01


def load_readings(seed=0):
    """602 readings, sorted by state. Failing machines run hotter and vibrate more."""
    rng = np.random.default_rng(seed)
    y = np.sort(rng.integers(0, 3, 602))
    centre = np.array([300.0, 101.0, 45.0, 1.0, 1.0, 1.0])
    spread = np.array([6.0, 2.5, 12.0, 0.4, 0.4, 0.4])
    shift = np.array([9.0, -3.5, 16.0, 0.55, 0.5, 0.45])
    X = centre + shift * y[:, None] + spread * rng.standard_normal((602, 6))
    return X.astype(np.float32), y.astype(np.int64)


def split(X, y):
    """Every fifth reading validates (the data is sorted: each state is in both parts)."""
    val = np.arange(len(X)) % 5 == 0
    return X[~val], y[~val], X[val], y[val]


def fit_normalizer(X):
    return X.mean(axis=0), X.std(axis=0)


def standardize(X, mean, std):
    """(X - mean) / std as a float32 tensor; X itself is left as it was."""
    x = torch.from_numpy(X)
    x -= torch.from_numpy(mean)
    x /= torch.from_numpy(std)
    return x


def to_labels(y):
    return torch.from_numpy(y).long()


def make_loaders(x_train, y_train, x_val, y_val):
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH_SIZE,
                              shuffle=False, drop_last=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=64)
    return train_loader, val_loader


class SensorNet(nn.Module):
    def __init__(self, n_features=len(SENSORS), n_classes=3, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_features, hidden), nn.BatchNorm1d(hidden),
                                  nn.ReLU(), nn.Dropout(0.2))
        self.hidden, self.n_classes = hidden, n_classes

    def forward(self, x):
        out = nn.Linear(self.hidden, self.n_classes)
        return out(self.body(x))


def evaluate(model, loader, loss_fn):
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in loader:
            logits = model(xb)
            total += loss_fn(logits, yb).item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return {"loss": total / count, "accuracy": correct / count}


def train(model, train_loader, val_loader, optimizer, loss_fn, epochs):
    history = {"train_loss": [], "val_loss": [], "val_accuracy": []}
    for epoch in range(epochs):
        model.train()
        running = 0.0
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            running += loss.item()
        metrics = evaluate(model, val_loader, loss_fn)
        history["train_loss"].append(running / len(train_loader))
        history["val_loss"].append(metrics["loss"])
        history["val_accuracy"].append(metrics["accuracy"])
        print(f"epoch {epoch + 1:2d}  train loss {history['train_loss'][-1]:.3f}  "
              f"val loss {metrics['loss']:.3f}  val accuracy {metrics['accuracy']:.1%}")
    return history


def run(seed=0):
    torch.manual_seed(seed)
    X, y = load_readings(seed)
    X_train, y_train, X_val, y_val = split(X, y)
    mean, std = fit_normalizer(X_val)
    x_train = standardize(X_train, mean, std)
    x_val = standardize(X_val, mean, std)
    print(f"{len(X_train)} training readings, feature means {np.round(X_train.mean(axis=0), 2)}")
    train_loader, val_loader = make_loaders(x_train, to_labels(y_train), x_val,
                                            to_labels(y_val))
    model = SensorNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    history = train(model, train_loader, val_loader, optimizer, nn.CrossEntropyLoss(), EPOCHS)
    return {"model": model, "history": history}


if __name__ == "__main__":
    run()
