"""Bug hunt: house prices, a regression with a hand-written loss and hand-written SGD.

This copy holds no faults: it is the reference solution.

The script predicts the price of a house (in units of 100,000 EUR) from four features: living
area (m2), rooms, age (years) and the distance to the city centre (km). It trains a small
two-layer network with a hand-written mean squared error and a hand-written gradient-descent
step, validates on the most recent listings after every epoch and prints one line per epoch.
Run it with `python regression.py`.

Fix every fault in place, keeping every feature: the scaling of the features, the loss, the
update step, the validation after each epoch, the history and the log.

What the grader calls (keep these names and signatures):

    make_data(seed=0) -> (X, y)           X (480, 4) float32 raw features, y (480,) prices,
                                          ordered by listing date (never needs a fix)
    split_by_date(X, y) -> (X_train, y_train, X_val, y_val)   the newest 20 % for validation
    Standardizer().fit(X) / .transform(X) per-feature standardisation
    mse_loss(pred, target) -> tensor      mean squared error of pred (N, 1) against target (N,)
    PriceNet(n_features, hidden)          forward(x (N, n_features)) -> (N, 1)
    sgd_step(params, lr) -> None          p <- p - lr * p.grad for every parameter, in place
    evaluate(model, loader, loss_fn) -> float      mean loss over the samples of `loader`
    train(model, train_loader, val_loader, loss_fn, lr, epochs) -> dict
        per epoch: zero the gradients, forward, loss, backward and sgd_step for every batch
        (model in training mode), then evaluate on val_loader; returns
        {"train_loss": [...], "val_loss": [...]} (Python floats, one per epoch) and prints one
        line per epoch with both numbers
    run(seed=0) -> dict                   builds everything from the constants below, trains on
        standardised features (statistics of the training split only) and returns
        {"model": ..., "history": ..., "scaler": ...}
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 30
BATCH_SIZE = 32
LR = 0.05
HIDDEN = 32


def make_data(seed=0):
    """480 listings, oldest first. Newer listings are newer, larger flats further out."""
    g = torch.Generator().manual_seed(seed)
    n = 480
    when = torch.linspace(0, 1, n)
    area = 60 + 80 * when + 35 * torch.rand(n, generator=g) * 2
    rooms = torch.clamp(torch.round(area / 35 + torch.randn(n, generator=g) * 0.6), 1, 7)
    age = torch.clamp(60 * (1 - when) + 12 * torch.randn(n, generator=g), 0, 90)
    distance = 2 + 14 * when + 5 * torch.rand(n, generator=g)
    price = (0.5 + 0.021 * area + 0.12 * rooms - 0.011 * age - 0.07 * distance
             + 0.9 * torch.exp(-distance / 4) + 0.15 * torch.randn(n, generator=g))
    X = torch.stack([area, rooms, age, distance], dim=1)
    return X, price


def split_by_date(X, y):
    """The newest 20 % of the listings validate the model trained on the older ones."""
    n_val = len(X) // 5
    return X[:-n_val], y[:-n_val], X[-n_val:], y[-n_val:]


class Standardizer:
    """Per-feature (x - mean) / std, with the statistics of the data it was fitted on."""

    def fit(self, X):
        self.mean = X.mean(dim=0)
        self.std = X.std(dim=0)
        return self

    def transform(self, X):
        return (X - self.mean) / self.std


def mse_loss(pred, target):
    """Mean squared error of the predictions pred (N, 1) against the prices target (N,)."""
    return ((pred.squeeze(1) - target) ** 2).mean()


class PriceNet(nn.Module):
    """relu(x @ w1 + b1), then a linear output layer: (N, n_features) -> (N, 1)."""

    def __init__(self, n_features, hidden=HIDDEN):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n_features, hidden) * (2 / n_features) ** 0.5)
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.relu(x @ self.w1 + self.b1)
        return self.out(h)


def sgd_step(params, lr):
    """Plain gradient descent, in place: p <- p - lr * p.grad."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad


def evaluate(model, loader, loss_fn):
    """The loss averaged over every sample of `loader`."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in loader:
            total += loss_fn(model(xb), yb).item() * len(yb)
            count += len(yb)
    return total / count


def train(model, train_loader, val_loader, loss_fn, lr, epochs):
    history = {"train_loss": [], "val_loss": []}
    for epoch in range(epochs):
        model.train()
        total, count = 0.0, 0
        for xb, yb in train_loader:
            model.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            sgd_step(model.parameters(), lr)
            total += loss.item() * len(yb)
            count += len(yb)
        history["train_loss"].append(total / count)
        history["val_loss"].append(evaluate(model, val_loader, loss_fn))
        print(f"epoch {epoch + 1:3d}  train loss {history['train_loss'][-1]:.4f}  "
              f"val loss {history['val_loss'][-1]:.4f}")
    return history


def run(seed=0):
    torch.manual_seed(seed)
    X, y = make_data(seed)
    X_train, y_train, X_val, y_val = split_by_date(X, y)
    scaler = Standardizer().fit(X_train)
    X_train, X_val = scaler.transform(X_train), scaler.transform(X_val)
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=BATCH_SIZE,
                              shuffle=True)
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=256)
    model = PriceNet(X.shape[1], HIDDEN)
    history = train(model, train_loader, val_loader, mse_loss, lr=LR, epochs=EPOCHS)
    return {"model": model, "history": history, "scaler": scaler}


if __name__ == "__main__":
    run()
