# A correct fix of bughunt_classifier in another style: einsum helpers.
"""Bug hunt: an image classifier with BatchNorm, dropout and a learning-rate schedule.

The script trains a small convolutional network to tell four kinds of 8x8 grey images apart:
a horizontal bar, a vertical bar, a diagonal and a square blob, each drawn at a random place
with noise. The data comes sorted by class. The network has BatchNorm and dropout, the
learning rate halves every few epochs, and after every epoch the model is validated and one
line is printed. Run it with `python classifier.py`.

Fix every fault in place, keeping every feature: BatchNorm, dropout, the schedule, the
validation after each epoch, the history and the log.

What the grader calls (keep these names and signatures):

    make_images(n=480, seed=0) -> (X, y)  X (n, 1, 8, 8) float32 images, y (n,) int64 labels
                                          0..3, sorted by class (never needs a fix)
    split(X, y) -> (X_train, y_train, X_val, y_val)   every fifth image validates
    make_loaders(X_train, y_train, X_val, y_val) -> (train_loader, val_loader)
    ShapeNet(n_classes=4, dropout=0.3)    forward(x (N, 1, 8, 8)) -> (N, n_classes) raw scores
                                          (logits) for nn.CrossEntropyLoss
    evaluate(model, loader, loss_fn) -> {"loss": float, "accuracy": float}   over samples
    train(model, train_loader, val_loader, optimizer, scheduler, loss_fn, epochs) -> dict
        per epoch: in training mode, for every batch zero the gradients, forward, loss,
        backward, step; then scheduler.step() once; then evaluate on val_loader in eval mode
        without gradients; returns {"train_loss": [...], "val_loss": [...],
        "val_accuracy": [...], "lr": [...]} (Python floats, one per epoch; "lr" is the rate
        the epoch trained with) and prints one line per epoch
    run(seed=0) -> dict                   builds everything from the constants below and
        returns {"model": ..., "history": ...}
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = ("horizontal", "vertical", "diagonal", "blob")
EPOCHS = 8
BATCH_SIZE = 32
LR = 0.05
STEP_SIZE = 3       # the learning rate halves every STEP_SIZE epochs
DROPOUT = 0.3


def make_images(n=480, seed=0):
    """n noisy 8x8 images, n // 4 of each class, sorted by class."""
    g = torch.Generator().manual_seed(seed)
    per_class = n // len(CLASSES)
    images, labels = [], []
    for label in range(len(CLASSES)):
        for _ in range(per_class):
            img = torch.zeros(8, 8)
            i, j = torch.randint(1, 7, (2,), generator=g).tolist()
            if label == 0:
                img[i, 1:7] = 1.0
            elif label == 1:
                img[1:7, j] = 1.0
            elif label == 2:
                img[range(1, 7), range(1, 7)] = 1.0
                if torch.rand(1, generator=g) < 0.5:
                    img = img.flip(1)
            else:
                img[i - 1:i + 1, j - 1:j + 1] = 1.0
            brightness = 0.7 + 0.6 * torch.rand(1, generator=g)
            images.append(img * brightness + 0.3 * torch.randn(8, 8, generator=g))
            labels.append(label)
    return torch.stack(images).unsqueeze(1), torch.tensor(labels)


def split(X, y):
    is_val = torch.zeros(len(X), dtype=torch.bool)
    is_val[::5] = True
    return X[~is_val], y[~is_val], X[is_val], y[is_val]


def make_loaders(X_train, y_train, X_val, y_val):
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=32, shuffle=False)
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=BATCH_SIZE,
                              shuffle=True)
    return train_loader, val_loader


class ShapeNet(nn.Module):
    def __init__(self, n_classes=len(CLASSES), dropout=DROPOUT):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(dropout))
        linear = nn.Linear(64, n_classes)
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x):
        h = self.features(x)
        return torch.einsum("nf,cf->nc", h, self.weight) + self.bias


def _batch_stats(model, xb, yb, loss_fn):
    logits = model(xb)
    return loss_fn(logits, yb).item() * len(yb), (logits.argmax(1) == yb).sum().item()


def evaluate(model, loader, loss_fn):
    was = model.training
    model.train(False)
    loss_sum = hits = n = 0
    with torch.no_grad():
        for xb, yb in loader:
            l, c = _batch_stats(model, xb, yb, loss_fn)
            loss_sum += l
            hits += c
            n += yb.numel()
    return {"loss": loss_sum / n, "accuracy": hits / n}


def _train_epoch(model, loader, optimizer, loss_fn):
    model.train(True)
    losses = []
    for xb, yb in loader:
        optimizer.zero_grad()
        out = model(xb)
        loss = loss_fn(out, yb)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().item())
    return sum(losses) / len(losses)


def train(model, train_loader, val_loader, optimizer, scheduler, loss_fn, epochs):
    history = {k: [] for k in ("train_loss", "val_loss", "val_accuracy", "lr")}
    for epoch in range(epochs):
        lr = optimizer.param_groups[0]["lr"]
        tl = _train_epoch(model, train_loader, optimizer, loss_fn)
        scheduler.step()
        res = evaluate(model, val_loader, loss_fn)
        for key, value in (("train_loss", tl), ("val_loss", res["loss"]),
                           ("val_accuracy", res["accuracy"]), ("lr", lr)):
            history[key].append(float(value))
        print(f"[{epoch + 1}/{epochs}] lr {lr:g} | train {tl:.4f} | val {res['loss']:.4f} "
              f"| acc {100 * res['accuracy']:.1f}%")
    return history


def run(seed=0):
    torch.manual_seed(seed)
    X, y = make_images(seed=seed)
    parts = split(X, y)
    train_loader, val_loader = make_loaders(*parts)
    model = ShapeNet(len(CLASSES), DROPOUT)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 0.5 ** (e // STEP_SIZE))
    loss_fn = nn.CrossEntropyLoss()
    history = train(model, train_loader, val_loader, optimizer, scheduler, loss_fn, EPOCHS)
    return {"model": model, "history": history}


if __name__ == "__main__":
    run()
