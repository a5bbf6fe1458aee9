"""Bug hunt: fine-tuning a pretrained network for a new task.

This copy holds no faults: it is the reference solution.

A network pretrained on a source task (10 classes, plus a quality score) is adapted to a new
task with 3 classes and the same kind of score: its class head is replaced by a new one, the
first encoder layer is frozen, and the rest (second encoder layer, both heads) is fine-tuned
on the sum of a cross-entropy and a weighted mean squared error that share the encoder. After
every epoch the model is validated and one line is printed. Run it with `python finetune.py`.

Fix every fault in place, keeping every feature: the new head, the frozen first layer, the
fine-tuned second layer, both losses, the validation after each epoch, the history and the log.

What the grader calls (keep these names and signatures):

    load_pretrained(seed=0) -> PretrainedNet   the pretrained weights (never needs a fix)
    make_task(seed=0) -> (X, y, s)        X (400, 12) float32, y (400,) int64 classes 0..2,
                                          s (400,) float32 scores (never needs a fix)
    PretrainedNet                         .encoder (Linear, ReLU, Linear, ReLU), .head,
                                          .score_head; forward(x) -> (logits (N, C), score (N,))
    adapt(model, n_classes) -> model      a new class head with n_classes outputs; the first
                                          encoder layer frozen, everything else trainable
    make_optimizer(model) -> optimizer    SGD over the trainable parameters (the encoder's
                                          at a tenth of the heads' learning rate)
    evaluate(model, loader) -> {"loss": float, "accuracy": float}
    train(model, train_loader, val_loader, optimizer, epochs) -> dict
        loaders yield (x, y, s); per epoch: in training mode, for every batch zero the
        gradients, forward, loss = cross_entropy(logits, y) + SCORE_WEIGHT * mse(score, s),
        backward, step; then evaluate on val_loader in eval mode without gradients; returns
        {"train_loss": [...], "val_loss": [...], "val_accuracy": [...]} (Python floats, one
        per epoch) and prints one line per epoch
    run(seed=0) -> dict                   the whole fine-tuning (the first 320 samples of
        make_task train, the last 80 validate); returns {"model": ..., "history": ...}
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SOURCE_CLASSES = 10
N_CLASSES = 3
SCORE_WEIGHT = 0.5
EPOCHS = 10
BATCH_SIZE = 32
LR = 0.05
ENCODER_LR_FACTOR = 0.1


class PretrainedNet(nn.Module):
    def __init__(self, n_features=12, n_classes=SOURCE_CLASSES):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_features, 48), nn.ReLU(), nn.Linear(48, 32),
                                     nn.ReLU())
        self.head = nn.Linear(32, n_classes)
        self.score_head = nn.Linear(32, 1)

    def forward(self, x):
        h = self.encoder(x)
        return self.head(h), self.score_head(h).squeeze(1)


def load_pretrained(seed=0):
    """Stands in for downloading a checkpoint: the same weights every time."""
    g = torch.Generator().manual_seed(1000 + seed)
    model = PretrainedNet()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.5 / p.shape[-1]) ** 0.5)
    return model


def make_task(seed=0):
    """The new task: 3 classes and a score, both read off the pretrained encoder's features
    (which is why fine-tuning from them works); ambiguous samples are left out."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(1200, 12, generator=g)
    with torch.no_grad():
        h = load_pretrained(seed).encoder(X)
    h = (h - h.mean(0)) / (h.std(0) + 1e-6)
    z = h[:, :4] @ torch.randn(4, N_CLASSES, generator=g)
    top = z.topk(2, dim=1).values
    keep = (top[:, 0] - top[:, 1] > 1.0).nonzero().squeeze(1)[:400]
    y = z[keep].argmax(dim=1)
    s = h[keep] @ torch.randn(32, generator=g) * 0.2 + 0.1 * torch.randn(400, generator=g)
    return X[keep], y, s


def adapt(model, n_classes):
    """A new class head for the new task; the first encoder layer keeps its weights."""
    model.head = nn.Linear(model.head.in_features, n_classes)
    for p in model.encoder[0].parameters():
        p.requires_grad_(False)
    return model


def make_optimizer(model):
    """SGD over the trainable parameters; the pretrained encoder learns 10x slower."""
    encoder = [p for p in model.encoder.parameters() if p.requires_grad]
    heads = [p for name, p in model.named_parameters()
             if p.requires_grad and not name.startswith("encoder.")]
    return torch.optim.SGD([{"params": encoder, "lr": LR * ENCODER_LR_FACTOR},
                            {"params": heads}], lr=LR, momentum=0.9)


def evaluate(model, loader):
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb, sb in loader:
            logits, score = model(xb)
            loss = F.cross_entropy(logits, yb) + SCORE_WEIGHT * F.mse_loss(score, sb)
            total += loss.item() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum().item()
            count += len(yb)
    return {"loss": total / count, "accuracy": correct / count}


def train(model, train_loader, val_loader, optimizer, epochs):
    history = {"train_loss": [], "val_loss": [], "val_accuracy": []}
    for epoch in range(epochs):
        model.train()
        total, count = 0.0, 0
        for xb, yb, sb in train_loader:
            logits, score = model(xb)
            loss = F.cross_entropy(logits, yb) + SCORE_WEIGHT * F.mse_loss(score, sb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(yb)
            count += len(yb)
        metrics = evaluate(model, val_loader)
        history["train_loss"].append(total / count)
        history["val_loss"].append(metrics["loss"])
        history["val_accuracy"].append(metrics["accuracy"])
        print(f"epoch {epoch + 1:2d}  train loss {history['train_loss'][-1]:.3f}  "
              f"val loss {metrics['loss']:.3f}  val accuracy {metrics['accuracy']:.1%}")
    return history


def run(seed=0):
    torch.manual_seed(seed)
    X, y, s = make_task(seed)
    train_set = TensorDataset(X[:320], y[:320], s[:320])
    val_set = TensorDataset(X[320:], y[320:], s[320:])
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=80)
    model = adapt(load_pretrained(seed), N_CLASSES)
    optimizer = make_optimizer(model)
    history = train(model, train_loader, val_loader, optimizer, EPOCHS)
    return {"model": model, "history": history}


if __name__ == "__main__":
    run()
