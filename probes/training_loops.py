"""Instrumentation for `training_loops`: runs *inside the worker*, next to student code.

Each probe builds the live objects a check describes (a small model with the weights the grader
sent, a loader over the grader's tensors, an optimizer, a scheduler, a loss), watches them with
hooks while it calls the student's function, and returns plain records:

- what the function returned (`describe_return`: plain values pass, anything else is named),
- the model's `state_dict` afterwards (the grader compares it with its own reference run),
- what the hooks saw: for every `optimizer.step()` the learning rate, `p.grad` and the gradient
  of the newest `backward()` (`StepAudit`); for every forward the model's mode and whether
  gradients were tracked (`ModeRecorder`); every loss value computed (`RecordingLoss`).

The builders (`build_model`, `build_optimizer`, ...) are shared with the grader, which builds the
very same objects for its reference run: they are set-up code, not answers. Nothing here knows
what the student's function should produce.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch
# Bound when the probe is imported, before student code runs: a submission that replaces
# torch.is_grad_enabled cannot change what the recorders read.
from torch import is_grad_enabled, nn
from torch._C import _set_grad_enabled
from torch.utils.data import DataLoader, TensorDataset

from grader.probes.recorders import (ModeRecorder, StepAudit, audit_records,  # noqa: F401
                                     describe_return, mode_of, state_of)

# --------------------------------------------------------------------------- builders (shared)

MODEL_KINDS = ("mlp", "mlp_bn", "mlp_bn_dropout")


def build_model(kind: str, sizes: list[int], state: dict[str, torch.Tensor] | None = None
                ) -> nn.Sequential:
    """`sizes = [inputs, hidden, outputs]`. "mlp": Linear-ReLU-Linear; "mlp_bn": Linear-BatchNorm-
    ReLU-Linear; "mlp_bn_dropout": Linear-BatchNorm-ReLU-Dropout(0.5)-Linear. With `state`, the
    weights (and buffers) are exactly those; without, torch's default initialisation."""
    d_in, hidden, d_out = sizes
    batchnorm = kind in ("mlp_bn", "mlp_bn_dropout")
    # No bias before BatchNorm: it would cancel it, leaving that bias a gradient of pure
    # rounding noise, whose sign Adam turns into full-size steps that no check could compare.
    layers: list[nn.Module] = [nn.Linear(d_in, hidden, bias=not batchnorm)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(hidden))
    layers.append(nn.ReLU())
    if kind == "mlp_bn_dropout":
        layers.append(nn.Dropout(0.5))
    layers.append(nn.Linear(hidden, d_out))
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}")
    model = nn.Sequential(*layers)
    if state is not None:
        model.load_state_dict(state)
    return model


def build_optimizer(spec: dict, params) -> torch.optim.Optimizer:
    """`spec`: {"name": "sgd", "lr", "momentum"=0} or {"name": "adam", "lr"}."""
    if spec["name"] == "sgd":
        return torch.optim.SGD(params, lr=spec["lr"], momentum=spec.get("momentum", 0.0))
    if spec["name"] == "adam":
        return torch.optim.Adam(params, lr=spec["lr"])
    raise ValueError(f"unknown optimizer {spec['name']!r}")


def build_scheduler(spec: dict | None, optimizer: torch.optim.Optimizer):
    """`spec`: None, {"name": "step", "step_size", "gamma"} or {"name": "factors", "factors":
    [f0, f1, ...]} (LambdaLR: epoch e runs at base_lr * f_e, 1.0 past the end of the list)."""
    if spec is None:
        return None
    if spec["name"] == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=spec["step_size"],
                                               gamma=spec["gamma"])
    if spec["name"] == "factors":
        factors = [float(f) for f in spec["factors"]]
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda e: factors[e] if e < len(factors) else 1.0)
    raise ValueError(f"unknown scheduler {spec['name']!r}")


LABEL_SMOOTHING = {"cross_entropy": 0.0, "cross_entropy_smoothed": 0.2}


def build_loss(name: str) -> nn.CrossEntropyLoss:
    """"cross_entropy": nn.CrossEntropyLoss(); "cross_entropy_smoothed": with
    label_smoothing=0.2."""
    return nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING[name])


def build_loader(batches: list, kind: str = "list"):
    """"list": the (x, y) tuples themselves; "dataloader": a DataLoader over a TensorDataset of
    the same samples in the same order (batch size that of the first batch, no shuffling)."""
    batches = [(x, y) for x, y in batches]
    if kind == "list":
        return batches
    if kind == "dataloader":
        xs = torch.cat([x for x, _ in batches])
        ys = torch.cat([y for _, y in batches])
        return DataLoader(TensorDataset(xs, ys), batch_size=len(batches[0][0]), shuffle=False)
    raise ValueError(f"unknown loader kind {kind!r}")


def set_mode(model: nn.Module, mode: str) -> None:
    model.train(mode == "train")


# --------------------------------------------------------------------------- instruments


class RecordingLoss(nn.CrossEntropyLoss):
    """The cross-entropy loss the check chose (`build_loss`), recording every value it computes
    as `[value, grad_enabled, batch size]`. A subclass rather than a wrapper, so that it is an
    `nn.CrossEntropyLoss` to the student's code in every respect (`reduction` included)."""

    def __init__(self, name: str):
        super().__init__(label_smoothing=LABEL_SMOOTHING[name])
        self.calls: list[list] = []

    def forward(self, output, target):
        loss = super().forward(output, target)
        if loss.numel() == 1:
            self.calls.append([float(loss.detach()), is_grad_enabled(), int(len(target))])
        return loss


# --------------------------------------------------------------------------- probes


def train_epoch_run(module, *, model: str, sizes: list[int], state: dict, batches: list,
                    loader: str, optimizer: dict, loss: str, start_mode: str) -> dict:
    """Call `train_epoch` once on the described set-up; see the module docstring for records."""
    net = build_model(model, sizes, state)
    set_mode(net, start_mode)
    opt = build_optimizer(optimizer, net.parameters())
    loss_fn = RecordingLoss(loss)
    audit, modes = StepAudit(net, opt), ModeRecorder(net)
    value = module.train_epoch(net, build_loader(batches, loader), opt, loss_fn)
    audit.remove()
    modes.remove()
    return {"returned": describe_return(value), "state": state_of(net),
            "steps": audit_records(audit), "forwards": modes.forwards, "losses": loss_fn.calls}


def evaluate_run(module, *, model: str, sizes: list[int], state: dict, batches: list,
                 loader: str, loss: str, start_mode: str) -> dict:
    """Call `evaluate` once; records its return value, the forwards' modes, the model's state,
    mode and gradients afterwards."""
    net = build_model(model, sizes, state)
    set_mode(net, start_mode)
    loss_fn = RecordingLoss(loss)
    modes = ModeRecorder(net)
    # Called as a training loop would, with gradients on: set here, so that a submission that
    # broke torch's own save-and-restore of the mode (torch.is_grad_enabled replaced) does not
    # find it already off.
    _set_grad_enabled(True)
    value = module.evaluate(net, build_loader(batches, loader), loss_fn)
    modes.remove()
    return {"returned": describe_return(value), "state": state_of(net),
            "forwards": modes.forwards, "mode_after": mode_of(net),
            "grads_after": sum(p.grad is not None for p in net.parameters()),
            "losses": loss_fn.calls}


def fit_run(module, *, model: str, sizes: list[int], state: dict, train_batches: list,
            val_batches: list, optimizer: dict, scheduler: dict | None, loss: str, epochs: int,
            patience: int | None, pass_scheduler: bool = True, pass_patience: bool = True) -> dict:
    """Call `fit` once (`scheduler` and `patience` passed by keyword, or left to their defaults
    when `pass_...` is False); records the history it returned, every step's learning rate and
    the model's final state."""
    net = build_model(model, sizes, state)
    net.train()
    opt = build_optimizer(optimizer, net.parameters())
    sched = build_scheduler(scheduler, opt)
    loss_fn = RecordingLoss(loss)
    audit = StepAudit(net, opt)
    kwargs = {}
    if pass_scheduler:
        kwargs["scheduler"] = sched
    if pass_patience:
        kwargs["patience"] = patience
    value = module.fit(net, build_loader(train_batches), build_loader(val_batches), opt, loss_fn,
                       epochs, **kwargs)
    audit.remove()
    return {"returned": describe_return(value), "state": state_of(net),
            "step_lrs": [s["lr"] for s in audit.steps]}


def accumulated_run(module, *, model: str, sizes: list[int], state: dict, batches: list,
                    loader: str, optimizer: dict, loss: str, accum_steps: int,
                    start_mode: str = "train") -> dict:
    """Call `train_accumulated` once on a model handed over in `start_mode`; records every
    step's `p.grad`, the mode of every forward and the final state."""
    net = build_model(model, sizes, state)
    set_mode(net, start_mode)
    opt = build_optimizer(optimizer, net.parameters())
    loss_fn = RecordingLoss(loss)
    audit, modes = StepAudit(net, opt), ModeRecorder(net)
    value = module.train_accumulated(net, build_loader(batches, loader), opt, loss_fn,
                                     accum_steps)
    audit.remove()
    modes.remove()
    return {"returned": describe_return(value), "state": state_of(net),
            "steps": audit_records(audit), "forwards": modes.forwards, "losses": loss_fn.calls}


def _one_epoch(model: nn.Module, batches: list, optimizer, loss_fn) -> None:
    """The harness's own plain epoch between saving and loading (not the student's code)."""
    model.train()
    for x, y in batches:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def checkpoint_run(module, *, model: str, sizes: list[int], state: dict, fresh_state: dict,
                   optimizer: dict, loss: str, first_batches: list, second_batches: list,
                   epoch: int, filename: str, decayed_lr: float | None = None) -> dict:
    """Train one epoch, `save_checkpoint` into the worker's scratch folder, train the saved
    objects on (so that anything kept by reference changes), then build fresh objects (other
    weights, an optimizer without state), `load_checkpoint` into them and train one more epoch.
    Records what load returned, the fresh objects right after loading, and the final state."""
    loss_fn = build_loss(loss)
    path = os.path.join(os.getcwd(), filename)
    if os.path.exists(path):
        os.remove(path)
    net = build_model(model, sizes, state)
    opt = build_optimizer(optimizer, net.parameters())
    _one_epoch(net, first_batches, opt, loss_fn)
    if decayed_lr is not None:  # what a scheduler does between epochs
        for group in opt.param_groups:
            group["lr"] = decayed_lr
    module.save_checkpoint(path, net, opt, epoch)
    written = os.path.exists(path)
    _one_epoch(net, second_batches, opt, loss_fn)  # the saved objects move on
    fresh = build_model(model, sizes, fresh_state)
    fresh_opt = build_optimizer(optimizer, fresh.parameters())
    value = module.load_checkpoint(path, fresh, fresh_opt)
    loaded_state = state_of(fresh)
    loaded_optimizer = {int(k): {str(n): (v.detach().clone() if isinstance(v, torch.Tensor)
                                           else float(v)) for n, v in s.items()}
                        for k, s in fresh_opt.state_dict()["state"].items()}
    _one_epoch(fresh, second_batches, fresh_opt, loss_fn)
    return {"returned": describe_return(value), "file_written": written,
            "loaded_state": loaded_state, "loaded_optimizer": loaded_optimizer,
            "state": state_of(fresh)}


def _scramble_global_rngs(amount: int) -> None:
    """Move Python's, numpy's and torch's global generators on, so that a generator the
    student's set_seed forgets starts each run from a different place."""
    for _ in range(amount):
        random.random()
    np.random.random(amount)
    torch.rand(amount)


def seeded_training_run(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """A small training run that draws from all three global generators: Python's `random`
    (which samples to use), numpy (input noise), torch (initial weights, dropout, a shuffled
    DataLoader)."""
    keep = sorted(random.sample(range(len(x)), k=len(x) * 3 // 4))
    noise = torch.from_numpy(np.random.normal(0.0, 0.1, size=tuple(x.shape))).to(x.dtype)
    data = TensorDataset(x[keep] + noise[keep], y[keep])
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(x.shape[1], 16), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(16, int(y.max()) + 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for xb, yb in loader:
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
    return state_of(model)


def seeded_runs(module, *, seeds: list[int], x: torch.Tensor, y: torch.Tensor) -> dict:
    """For each seed: scramble the global generators, call `set_seed(seed)`, draw two numbers
    from each generator (so a message can name the one left unseeded), then run
    `seeded_training_run`. Returns the draws and the final weights of every run, in order."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    runs, draws = [], []
    try:
        for i, seed in enumerate(seeds):
            _scramble_global_rngs(3 + 5 * i)
            module.set_seed(seed)
            draws.append({"random": [random.random() for _ in range(2)],
                          "numpy": [float(v) for v in np.random.random(2)],
                          "torch": [float(v) for v in torch.rand(2)]})
            runs.append(seeded_training_run(x, y))
    finally:
        torch.use_deterministic_algorithms(deterministic)
    return {"runs": runs, "draws": draws}


def classifier_run(module, *, x_train: torch.Tensor, y_train: torch.Tensor,
                   x_val: torch.Tensor, y_val: torch.Tensor, x_test: torch.Tensor,
                   seed: int) -> dict:
    """Seed the global generators, call `train_classifier`, then predict the test features
    (eval mode, no gradients): returns the predicted classes, never seeing a test label."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = module.train_classifier(x_train, y_train, x_val, y_val)
    if not isinstance(model, nn.Module):
        return {"module": False, "type": f"{type(model).__module__}.{type(model).__qualname__}"}
    model.eval()
    with torch.no_grad():
        out = model(x_test.clone())
    if not isinstance(out, torch.Tensor):
        return {"module": True, "output": f"an object of type {type(out).__qualname__}"}
    shape = list(out.shape)
    if out.dim() != 2 or shape[0] != len(x_test):
        return {"module": True, "output_shape": shape}
    return {"module": True, "output_shape": shape, "predictions": out.argmax(dim=1).to(torch.int64)}
