"""Seeded set-ups for the `training_loops` checks (grader side; no `test_` prefix, not collected).

A case is everything a probe needs to build the same objects the grader builds for its reference
run: a model kind and sizes with its exact initial weights, batches of plain tensors, the loader
kind, the optimizer, scheduler and loss. `probe_kwargs()` is what crosses to the worker; the
reference run (`training_loops_reference.py`) builds from the very same case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from probes.training_loops import build_model, state_of

Batches = list[tuple[torch.Tensor, torch.Tensor]]


# --------------------------------------------------------------------------- data


def initial_state(kind: str, sizes: list[int], seed: int) -> dict[str, torch.Tensor]:
    """Seeded initial weights; BatchNorm buffers get non-trivial running statistics so that
    training-mode and eval-mode outputs differ clearly."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        state = state_of(build_model(kind, sizes))
        for name, value in state.items():
            if name.endswith("running_mean"):
                state[name] = 0.5 * torch.randn(value.shape)
            elif name.endswith("running_var"):
                state[name] = 0.5 + torch.rand(value.shape)
            elif name.endswith("num_batches_tracked"):
                state[name] = torch.tensor(10)
    return state


def toy_batches(seed: int, batch_sizes: list[int], d_in: int, classes: int) -> Batches:
    """Batches of a noisy linear classification task: x ~ N(0, 1), y = argmax of a fixed random
    linear map plus noise."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((d_in, classes))
    out = []
    for n in batch_sizes:
        x = rng.standard_normal((n, d_in))
        y = (x @ w + 0.7 * rng.standard_normal((n, classes))).argmax(axis=1)
        out.append((torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)))
    return out


def split(x: torch.Tensor, y: torch.Tensor, batch_size: int) -> Batches:
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(x), batch_size)]


def overfitting_task(seed: int, n_train: int = 48, n_val: int = 35, flip: float = 0.2,
                     d_in: int = 4) -> tuple[Batches, Batches]:
    """Training data that is linearly separable, validation data from the same rule with a share
    `flip` of its labels flipped: as the model grows confident on the training set, the
    validation loss falls for a few epochs, then rises (the flipped samples cost more and more).
    Training batches of 8; validation batches of 8 with a short last one."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d_in)

    def make(n: int, flip_share: float) -> tuple[torch.Tensor, torch.Tensor]:
        x = rng.standard_normal((n, d_in))
        y = (x @ w > 0).astype(np.int64)
        flipped = rng.random(n) < flip_share
        y[flipped] = 1 - y[flipped]
        return torch.tensor(x, dtype=torch.float32), torch.tensor(y)

    return split(*make(n_train, 0.0), 8), split(*make(n_val, flip), 8)


# --------------------------------------------------------------------------- cases


@dataclass
class Setup:
    """A model with exact initial weights, data, and how to train it."""

    model: str
    sizes: list[int]
    seed: int
    batches: Batches
    loader: str = "list"
    optimizer: dict = field(default_factory=lambda: {"name": "sgd", "lr": 0.1})
    loss: str = "cross_entropy"
    state: dict = field(init=False)

    def __post_init__(self):
        self.state = initial_state(self.model, self.sizes, self.seed)

    def base_kwargs(self) -> dict:
        return {"model": self.model, "sizes": self.sizes, "state": self.state}


@dataclass
class TrainEpochCase(Setup):
    start_mode: str = "eval"

    def probe_kwargs(self) -> dict:
        return {**self.base_kwargs(), "batches": self.batches, "loader": self.loader,
                "optimizer": self.optimizer, "loss": self.loss, "start_mode": self.start_mode}


@dataclass
class EvaluateCase(Setup):
    start_mode: str = "train"

    def probe_kwargs(self) -> dict:
        return {**self.base_kwargs(), "batches": self.batches, "loader": self.loader,
                "loss": self.loss, "start_mode": self.start_mode}


@dataclass
class FitCase(Setup):
    val_batches: Batches = field(default_factory=list)
    scheduler: dict | None = None
    epochs: int = 4
    patience: int | None = None
    pass_scheduler: bool = True  # False: leave `scheduler` to its default
    pass_patience: bool = True

    def probe_kwargs(self) -> dict:
        return {**self.base_kwargs(), "train_batches": self.batches,
                "val_batches": self.val_batches, "optimizer": self.optimizer,
                "scheduler": self.scheduler, "loss": self.loss, "epochs": self.epochs,
                "patience": self.patience, "pass_scheduler": self.pass_scheduler,
                "pass_patience": self.pass_patience}

    def call_text(self) -> str:
        extra = []
        if self.pass_scheduler:
            extra.append(f"scheduler={_describe_scheduler(self.scheduler)}")
        if self.pass_patience:
            extra.append(f"patience={self.patience}")
        tail = "".join(f", {e}" for e in extra)
        return (f"fit(model, train_loader, val_loader, optimizer, loss_fn, epochs={self.epochs}"
                f"{tail})")


@dataclass
class AccumulatedCase(Setup):
    accum_steps: int = 3
    start_mode: str = "train"  # the mode the model is handed over in

    def probe_kwargs(self) -> dict:
        return {**self.base_kwargs(), "batches": self.batches, "loader": self.loader,
                "optimizer": self.optimizer, "loss": self.loss, "accum_steps": self.accum_steps,
                "start_mode": self.start_mode}

    def chunks(self) -> list[list[int]]:
        """Indices of the batches each optimizer step covers."""
        n = len(self.batches)
        return [list(range(i, min(i + self.accum_steps, n))) for i in range(0, n, self.accum_steps)]


@dataclass
class CheckpointCase(Setup):
    epoch: int = 7
    fresh_seed: int = 0
    # The learning rate set after the first epoch, before saving (as a scheduler would): a
    # checkpoint restores it with the optimizer's state (None: unchanged).
    decayed_lr: float | None = None

    def probe_kwargs(self) -> dict:
        return {**self.base_kwargs(), "fresh_state": initial_state(self.model, self.sizes,
                                                                   self.fresh_seed),
                "optimizer": self.optimizer, "loss": self.loss, "first_batches": self.batches,
                "second_batches": self.batches, "epoch": self.epoch,
                "filename": "checkpoint.pt", "decayed_lr": self.decayed_lr}


def _describe_scheduler(spec: dict | None) -> str:
    if spec is None:
        return "None"
    if spec["name"] == "step":
        return f"StepLR(optimizer, step_size={spec['step_size']}, gamma={spec['gamma']})"
    return (f"LambdaLR(optimizer, lambda epoch: {spec['factors']}[epoch] (1 after the "
            "list))")


def describe_optimizer(spec: dict) -> str:
    if spec["name"] == "sgd":
        momentum = spec.get("momentum", 0.0)
        return f"SGD(lr={spec['lr']}" + (f", momentum={momentum})" if momentum else ")")
    return f"Adam(lr={spec['lr']})"


def describe_batches(batches: Batches) -> str:
    sizes = [len(y) for _, y in batches]
    return f"{len(sizes)} batches of sizes {sizes}"


# --------------------------------------------------------------------------- train_classifier


@dataclass(frozen=True)
class ClassifierData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor  # never leaves the grader


def classifier_data(seed: int, d: int = 20, classes: int = 10, separation: float = 6.0,
                    n_train: int = 2000, n_val: int = 500, n_test: int = 2000) -> ClassifierData:
    """Ten Gaussian classes in `d` dimensions, unit noise, class means on orthonormal directions
    `separation` apart (the best possible classifier gets about 99 %), then every feature scaled
    by a factor in [e^-1, e] and shifted by up to +-3 (an invertible map: still 99 % reachable,
    but standardising the features helps)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    means = q[:classes] * (separation / math.sqrt(2))
    scale = np.exp(rng.uniform(-1.0, 1.0, d))
    shift = rng.uniform(-3.0, 3.0, d)

    def make(n: int):
        y = rng.integers(0, classes, n)
        x = (means[y] + rng.standard_normal((n, d))) * scale + shift
        return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)

    (xt, yt), (xv, yv), (xs, ys) = make(n_train), make(n_val), make(n_test)
    return ClassifierData(xt, yt, xv, yv, xs, ys)


def batches_with_a_hard_tail(kind: str, sizes: list[int], state: dict, seed: int,
                             batch_sizes: list[int]) -> Batches:
    """Evaluation batches whose short last batch the model gets all wrong (labels one class
    off its prediction) while it gets about three quarters of the others right: averaging the
    batch losses, or the batch accuracies, then differs clearly from averaging over samples."""
    rng = np.random.default_rng(seed)
    model = build_model(kind, sizes, state).eval()
    classes = sizes[-1]
    out = []
    for i, n in enumerate(batch_sizes):
        x = torch.tensor(rng.standard_normal((n, sizes[0])), dtype=torch.float32)
        with torch.no_grad():
            predicted = model(x).argmax(dim=1).numpy()
        if i == len(batch_sizes) - 1:
            y = (predicted + 1) % classes
        else:
            wrong = rng.random(n) < 0.25
            y = np.where(wrong, (predicted + rng.integers(1, classes, n)) % classes, predicted)
        out.append((x, torch.tensor(y, dtype=torch.int64)))
    return out


# --------------------------------------------------------------------------- visible checks' cases

EPOCH_CASE = TrainEpochCase(model="mlp_bn", sizes=[6, 16, 3], seed=11,
                            batches=toy_batches(12, [8] * 5, 6, 3),
                            optimizer={"name": "sgd", "lr": 0.1}, start_mode="eval")

_EVAL_STATE = initial_state("mlp", [6, 16, 3], 21)
EVAL_VALUES_CASES = [
    EvaluateCase(model="mlp", sizes=[6, 16, 3], seed=21, loader=loader, start_mode="eval",
                 batches=batches_with_a_hard_tail("mlp", [6, 16, 3], _EVAL_STATE, 22,
                                                  [16, 16, 3]))
    for loader in ("list", "dataloader")]
EVAL_MODE_CASE = EvaluateCase(model="mlp_bn_dropout", sizes=[6, 16, 3], seed=23,
                              batches=toy_batches(24, [10, 10, 10], 6, 3), start_mode="train")


def fit_case(seed: int, *, flip: float = 0.2, lr: float = 0.2, model: str = "mlp",
             **kwargs) -> FitCase:
    train, val = overfitting_task(seed, flip=flip)
    return FitCase(model=model, sizes=[4, 8, 2], seed=seed, batches=train, val_batches=val,
                   optimizer={"name": "sgd", "lr": lr}, **kwargs)


# Clean validation labels: the validation loss falls every epoch (best = last), so this case
# is about the history and the scheduler alone.
FIT_SCHEDULER_CASE = fit_case(11, flip=0.0, lr=0.4, epochs=4, patience=None,
                              scheduler={"name": "step", "step_size": 1, "gamma": 0.5})
# Validation loss (measured): 0.624 0.585 0.538 0.507 0.521 0.563 0.621 ...: best at epoch 4,
# rising after it, 2.7 % between the best and any other epoch.
FIT_EARLY_STOP_CASE = fit_case(33, epochs=10, patience=2, pass_scheduler=False)

ACCUM_CASE = AccumulatedCase(model="mlp", sizes=[5, 10, 3], seed=31,
                             batches=toy_batches(32, [4] * 7, 5, 3), accum_steps=3,
                             optimizer={"name": "sgd", "lr": 0.3})

CHECKPOINT_CASE = CheckpointCase(model="mlp", sizes=[5, 12, 3], seed=41, fresh_seed=42,
                                 batches=toy_batches(43, [8] * 4, 5, 3), epoch=7,
                                 optimizer={"name": "sgd", "lr": 0.1, "momentum": 0.9})
