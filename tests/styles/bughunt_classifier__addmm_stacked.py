# A correct fix of bughunt_classifier in another style: addmm stacked.
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
    keep = [i for i in range(len(X)) if i % 5]
    hold = list(range(0, len(X), 5))
    return X[keep], y[keep], X[hold], y[hold]


def make_loaders(X_train, y_train, X_val, y_val):
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=BATCH_SIZE,
                              shuffle=True)
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=50)
    return train_loader, val_loader


class ShapeNet(nn.Module):
    def __init__(self, n_classes=len(CLASSES), dropout=DROPOUT):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(p=dropout)
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        h = self.drop(x.reshape(x.shape[0], -1))
        return torch.addmm(self.fc.bias, h, self.fc.weight.t())


def evaluate(model, loader, loss_fn):
    """Scores every validation image at once: stacks the loader's dataset."""
    model.eval()
    ds = loader.dataset
    with torch.inference_mode():
        xs = torch.stack([x for x, _ in ds])
        ys = torch.stack([t for _, t in ds])
        logits = model(xs)
        loss = loss_fn(logits, ys).item()
        acc = (logits.argmax(dim=-1) == ys).sum().item() / len(ys)
    return {"loss": loss, "accuracy": acc}


def train(model, train_loader, val_loader, optimizer, scheduler, loss_fn, epochs):
    history = {"train_loss": [], "val_loss": [], "val_accuracy": [], "lr": []}
    for epoch in range(epochs):
        model.train()
        history["lr"].append(float(scheduler.get_last_lr()[0]))
        batch_losses = []
        for xb, yb in train_loader:
            for p in model.parameters():
                p.grad = None
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            batch_losses.append(float(loss))
        scheduler.step()
        m = evaluate(model, val_loader, loss_fn)
        history["train_loss"].append(sum(batch_losses) / len(batch_losses))
        history["val_loss"].append(m["loss"])
        history["val_accuracy"].append(m["accuracy"])
        print("epoch %d lr %.4f train loss %.3f val loss %.3f val accuracy %.3f"
              % (epoch + 1, history["lr"][-1], history["train_loss"][-1], m["loss"],
                 m["accuracy"]))
    return history


def run(seed=0):
    torch.manual_seed(seed)
    loaders = make_loaders(*split(*make_images(seed=seed)))
    model = ShapeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=list(range(STEP_SIZE, EPOCHS, STEP_SIZE)), gamma=0.5)
    history = train(model, *loaders, optimizer, scheduler, nn.CrossEntropyLoss(), EPOCHS)
    return {"model": model, "history": history}


if __name__ == "__main__":
    run()
