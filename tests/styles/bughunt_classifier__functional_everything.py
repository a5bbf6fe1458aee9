# A correct fix of bughunt_classifier in another style: functional everything.
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
    n = len(X)
    val_idx = torch.arange(0, n, 5)
    train_idx = torch.tensor([i for i in range(n) if i % 5 != 0])
    return (X.index_select(0, train_idx), y.index_select(0, train_idx),
            X.index_select(0, val_idx), y.index_select(0, val_idx))


def make_loaders(X_train, y_train, X_val, y_val):
    return (DataLoader(TensorDataset(X_train, y_train), BATCH_SIZE, shuffle=True),
            DataLoader(TensorDataset(X_val, y_val), 128))


class ShapeNet(nn.Module):
    def __init__(self, n_classes=len(CLASSES), dropout=DROPOUT):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.n1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.n2 = nn.BatchNorm2d(16)
        self.dropout = dropout
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x):
        x = F.conv2d(x, self.c1.weight, self.c1.bias, padding=1)
        x = F.max_pool2d(torch.relu(self.n1(x)), kernel_size=2)
        x = F.conv2d(x, self.c2.weight, self.c2.bias, padding=1)
        x = F.max_pool2d(torch.relu(self.n2(x)), kernel_size=2)
        x = F.dropout(x.flatten(start_dim=1), self.dropout, self.training)
        return F.linear(x, self.fc.weight, self.fc.bias)


def evaluate(model, loader, loss_fn):
    model.eval()
    total = correct = count = 0
    for xb, yb in loader:
        with torch.no_grad():
            out = model(xb)
        total += float(loss_fn(out, yb)) * yb.size(0)
        correct += int((out.argmax(-1) == yb).sum())
        count += yb.size(0)
    return dict(loss=total / count, accuracy=correct / count)


def step_batch(model, optimizer, loss_fn, xb, yb):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss.item()


def train(model, train_loader, val_loader, optimizer, scheduler, loss_fn, epochs):
    history = dict(train_loss=[], val_loss=[], val_accuracy=[], lr=[])
    for epoch in range(1, epochs + 1):
        history["lr"].append(optimizer.param_groups[0]["lr"])
        model.train()
        losses = [step_batch(model, optimizer, loss_fn, xb, yb) for xb, yb in train_loader]
        scheduler.step()
        history["train_loss"].append(sum(losses) / len(losses))
        m = evaluate(model, val_loader, loss_fn)
        history["val_loss"].append(m["loss"])
        history["val_accuracy"].append(m["accuracy"])
        print("epoch", epoch, "lr", round(history["lr"][-1], 5), "train loss",
              round(history["train_loss"][-1], 4), "val loss", round(m["loss"], 4),
              "val accuracy", round(m["accuracy"], 4))
    return history


def run(seed=0):
    torch.manual_seed(seed)
    X, y = make_images(seed=seed)
    X_train, y_train, X_val, y_val = split(X, y)
    train_loader, val_loader = make_loaders(X_train, y_train, X_val, y_val)
    model = ShapeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=STEP_SIZE, gamma=0.5)
    return {"model": model, "history": train(model, train_loader, val_loader, optimizer,
                                               scheduler, nn.CrossEntropyLoss(), EPOCHS)}


if __name__ == "__main__":
    run()
