"""The training loop, in the right order.

Every batch goes through the same five steps, and their order is the whole point:

    optimizer.zero_grad()          # 1. forget the previous batch's gradients (backward ADDS)
    output = model(x)              # 2. forward, with the model in training mode (model.train())
    loss = loss_fn(output, y)      # 3. the batch's mean loss
    loss.backward()                # 4. p.grad = d loss / d p for every parameter
    optimizer.step()               # 5. update the parameters with p.grad

Evaluation is the other mode: model.eval() (dropout off, BatchNorm uses running statistics)
inside torch.no_grad() (no graph), then back to the mode the model was in. Around the loop:
a learning-rate scheduler steps once per epoch, early stopping keeps the best weights,
checkpoints save the optimizer's state too, and seeding makes a run repeatable.

Loaders yield (x, y) batches: a list of (x, y) tuples or a torch DataLoader both work.
`loss_fn(output, y)` returns the mean over the batch (like nn.CrossEntropyLoss()).

Fill in every function below. Each docstring is the contract the grader checks; run
`torchgrade check training_loops.py` to see how you are doing.
"""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_epoch(model, loader, optimizer, loss_fn) -> float:
    """One pass over `loader` in training mode; returns the mean of the batch losses.

    Put the model in training mode, then for every batch: optimizer.zero_grad() (before
    backward), forward, loss, loss.backward(), optimizer.step() (once per batch). Return the
    mean of the batch losses as a Python float (loss.item()), not a tensor.

    >>> model = nn.Linear(2, 2)
    >>> loader = [(torch.randn(4, 2), torch.tensor([0, 1, 0, 1]))] * 3     # 3 batches
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> loss = train_epoch(model, loader, optimizer, nn.CrossEntropyLoss())  # 3 steps
    >>> type(loss)
    <class 'float'>
    """
    # TODO
    raise NotImplementedError("train_epoch")


def evaluate(model, loader, loss_fn) -> dict:
    """{"loss": float, "accuracy": float} of `model` on `loader`, without training it.

    "loss" is averaged over samples: a short last batch weighs less (loss_fn gives a batch
    mean; multiply it by the batch size, sum, divide by the number of samples). "accuracy" is
    the share (0 to 1) of samples whose output.argmax(dim=1) equals y. Runs in eval mode with
    gradient tracking off (torch.no_grad()), and leaves the model in the mode it found it in
    (training or eval).

    >>> batches = [(x1, y1), (x2, y2)]          # 10 samples, then 2; batch losses 0.5 and 2.0
    >>> evaluate(model, batches, nn.CrossEntropyLoss())["loss"]   # (10*0.5 + 2*2.0) / 12
    0.75
    """
    # TODO
    raise NotImplementedError("evaluate")


def fit(model, train_loader, val_loader, optimizer, loss_fn, epochs: int, scheduler=None,
        patience: int | None = None) -> dict:
    """Up to `epochs` epochs of train_epoch then evaluate; returns the history.

    Per epoch: note the learning rate the epoch uses (optimizer.param_groups[0]["lr"]), run
    train_epoch on train_loader, then scheduler.step() if a scheduler is given (once per
    epoch, after training), then evaluate on val_loader. Returns
    {"train_loss": [...], "val_loss": [...], "val_accuracy": [...], "lr": [...]}, one entry
    per epoch run (floats). With `patience`, stop after `patience` epochs in a row without a
    val_loss lower than the best so far. In any case the model ends with the weights of its
    best val_loss epoch (keep a copy: copy.deepcopy(model.state_dict())).

    >>> history = fit(model, train, val, optimizer, loss_fn, epochs=10, patience=2)
    >>> history["val_loss"]          # best at epoch 2; epochs 3 and 4 are not better: stop
    [0.9, 0.7, 0.8, 0.75]
    >>> # the model now holds the weights it had after epoch 2
    """
    # TODO
    raise NotImplementedError("fit")


def train_accumulated(model, loader, optimizer, loss_fn, accum_steps: int) -> float:
    """Gradient accumulation: one optimizer.step() per `accum_steps` batches.

    The gradient each step uses must equal that of the mean loss over the batches it covers
    (batches have equal sizes): divide each batch's loss by the number of batches in its
    chunk before backward(). A remainder gets a step of its own: 7 batches with accum_steps=3
    step after batches 3, 6 and 7, the last step with the gradient of batch 7's loss alone.
    Returns the mean of the batch losses (each batch's own loss, before dividing) as a float.

    >>> loss = train_accumulated(model, seven_batches, optimizer, loss_fn, accum_steps=3)
    >>> # optimizer.step() ran 3 times
    """
    # TODO
    raise NotImplementedError("train_accumulated")


def save_checkpoint(path, model, optimizer, epoch: int) -> None:
    """Save the model's and the optimizer's state (momentum buffers, Adam's moments) and
    `epoch` to the file `path`.

    >>> save_checkpoint("checkpoint.pt", model, optimizer, epoch=3)
    """
    # TODO
    raise NotImplementedError("save_checkpoint")


def load_checkpoint(path, model, optimizer) -> int:
    """Restore the state saved by save_checkpoint into `model` and `optimizer` (objects built
    the same way, e.g. fresh ones in a new process) and return the saved epoch.

    Training one epoch, saving, loading into fresh objects and training another epoch gives
    the same weights as two epochs without interruption.

    >>> load_checkpoint("checkpoint.pt", fresh_model, fresh_optimizer)
    3
    """
    # TODO
    raise NotImplementedError("load_checkpoint")


def set_seed(seed: int) -> None:
    """Seed Python's `random`, numpy's global generator and torch, so that the same seeded
    training run gives bit-identical weights twice.

    >>> set_seed(0); a = torch.rand(1); set_seed(0); b = torch.rand(1)
    >>> bool(a == b)
    True
    """
    # TODO
    raise NotImplementedError("set_seed")


def train_classifier(X_train, y_train, X_val, y_val) -> nn.Module:
    """Free design: train any model on the given tensors and return it.

    X_train (N, D) float32 features, y_train (N,) int64 labels (10 classes here), and a
    validation split for choosing epochs. The grader calls model.eval() and scores the
    argmax of model(X_test) on test features of the same distribution that it never shows
    you (raw features: any normalisation must be part of the model). Full marks at >= 95 %
    test accuracy; the time limit is 60 s on one CPU core.

    >>> model = train_classifier(X_train, y_train, X_val, y_val)
    >>> model.eval()(X_val).argmax(dim=1)[:5]
    tensor([3, 7, 0, 0, 9])
    """
    # TODO
    raise NotImplementedError("train_classifier")
