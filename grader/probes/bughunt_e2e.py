"""The end-to-end record of a bug-hunt script: its own `run(seed)`, watched from the outside.

Runs *inside the worker*. Where the bug hunts' harness probes audit one piece of the training at a
time on the grader's harness objects, this probe lets the script do the whole job it exists
for, with its own model, its own loaders and its own training, and records four things:

- the model's parameters: for every tensor `train` could learn (the model's parameters, and
  tensors that require grad kept as plain attributes of its modules), how many of the backward
  passes sampled gave it a non-zero gradient and the largest gradient element seen (a hook on
  the tensor, so `loss.backward()`, `torch.autograd.grad` and `optimizer.step(closure)` alike
  are seen), whether its values moved between the start and the end of `train`, and whether
  one forward of a copy of the trained model reads it at all (cut off from the loss although
  read: a detach on the way; never read: unused);
- the samples: what the loaders `run` handed to `train` yield, row by row (inputs flattened,
  labels), after training (one pass of each; a `drop_last` loader leaves a few out, which the
  checks allow for);
- the outcome: what the model `run` returned computes on each validation row, in eval mode
  without gradients;
- the data: what the script's data function (named by the caller; it "never needs a fix")
  returned at its first call, inputs and labels: the samples the rows are recognised in.

`train` is wrapped, never replaced: the wrapper calls the script's own function with the very
arguments `run` passed. The record holds no expected value and no verdict: the grader
recognises the samples by value (`grader.checking.bughunt_e2e`) and compares the outcome with
the fixed script's. Everything here is a record of untrusted code; the checks say so.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

MAX_ROWS = 8192      # rows recorded per loader (the shipped scripts hold at most 602 samples)
MAX_BATCHES = 1000   # batches read per pass (a loader that never ends is cut there)
SAMPLE_EVERY = 16    # a gradient's size is read at its first 4 backward passes and every 16th


def _learnable(model: nn.Module) -> list[tuple[str, torch.Tensor, bool]]:
    """(name, tensor, is a registered parameter) for every parameter of `model` and every
    tensor that requires grad kept as a plain attribute of one of its modules."""
    out: list[tuple[str, torch.Tensor, bool]] = [(n, p, True)
                                                 for n, p in model.named_parameters()]
    seen = {id(p) for _, p, _ in out}
    for prefix, m in model.named_modules():
        for name, value in vars(m).items():
            if name.startswith("_") or not isinstance(value, torch.Tensor):
                continue
            if value.requires_grad and id(value) not in seen and value.is_leaf:
                seen.add(id(value))
                out.append((f"{prefix}.{name}" if prefix else name, value, False))
    return out


class _Watch:
    """The learnable tensors of one model: their values before training and the backward
    passes that reached them."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.tensors = _learnable(model)
        self.before = [t.detach().clone() for _, t, _ in self.tensors]
        self.grads = [0] * len(self.tensors)  # backward passes seen giving a non-zero gradient
        self.calls = [0] * len(self.tensors)
        self.largest = [0.0] * len(self.tensors)  # the largest |gradient element| seen
        self.handles = []
        for i, (_, t, _) in enumerate(self.tensors):
            if t.requires_grad:
                self.handles.append(t.register_hook(self._hook(i)))

    def _hook(self, i: int):
        def note(grad):
            # Read only; the gradient passes through unchanged. The size of the gradient is
            # read at the first calls and every SAMPLE_EVERY-th after (each read costs a
            # synchronising reduction; a gradient that is zero up to rounding stays so).
            if grad is None:
                return
            self.calls[i] += 1
            if self.calls[i] <= 4 or self.calls[i] % SAMPLE_EVERY == 0:
                largest = float(grad.detach().abs().max())
                self.largest[i] = max(self.largest[i], largest)
                self.grads[i] += largest > 0
        return note

    def close(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def record(self) -> list[dict]:
        out = []
        for (name, t, registered), before, grads, largest in zip(
                self.tensors, self.before, self.grads, self.largest):
            now = t.detach()
            moved = now.shape != before.shape or not torch.equal(now, before)
            out.append({"name": name, "numel": int(before.numel()), "registered": registered,
                        "requires_grad": bool(t.requires_grad), "grads": int(grads),
                        "largest_grad": largest, "scale": float(before.abs().max())
                        if before.numel() else 0.0, "moved": bool(moved)})
        return out


class _Reads(TorchFunctionMode):
    """The ids of every tensor an operation receives (looking inside lists and tuples)."""

    def __init__(self):
        super().__init__()
        self.ids: set[int] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        stack = list(args) + list(kwargs.values())
        while stack:
            v = stack.pop()
            if isinstance(v, torch.Tensor):
                self.ids.add(id(v))
            elif isinstance(v, (list, tuple)):
                stack.extend(v)
        return func(*args, **kwargs)


def _used_in_forward(model: nn.Module, x: torch.Tensor) -> set[str] | None:
    """The names of the learnable tensors (`_learnable`) that some operation of one forward
    of a copy of `model` (eval mode, no gradients) reads; None if that cannot be run. A tensor
    read but cut off from the loss was detached on the way; one never read is not used."""
    try:
        twin = copy.deepcopy(model)
        twin.eval()
        ids = {id(t): name for name, t, _ in _learnable(twin)}
        with torch.no_grad(), _Reads() as reads:
            twin(x)
    except Exception:  # noqa: BLE001 - a model that cannot be copied or run: nothing known
        return None
    return {name for i, name in ids.items() if i in reads.ids}


def _samples(value: Any) -> dict:
    """What a data function returned, as {"x": (n, d) float64, "y": (n,) float64} (its first
    two items: inputs and labels), or {"error": text}."""
    try:
        x, y = value[0], value[1]
        x = torch.as_tensor(x).detach().reshape(len(x), -1).double().clone()
        y = torch.as_tensor(y).detach().reshape(len(y), -1)[:, 0].double().clone()
    except Exception as exc:  # noqa: BLE001 - anything that is not (x, y, ...) is the record
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if len(x) != len(y) or len(x) > MAX_ROWS:
        return {"error": f"{len(x)} inputs and {len(y)} labels"}
    return {"x": x, "y": y}


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _rows(loader: Any, passes: int, model: nn.Module | None = None) -> dict:
    """What `loader` yields in `passes` passes: {"x": (m, d) float64, "y": (m,) float64,
    "out": (m, k) float32 model outputs (with `model`)} or {"error": text}."""
    xs: list[torch.Tensor] = []
    ys: list[torch.Tensor] = []
    outs: list[torch.Tensor] = []
    count = 0
    try:
        for _ in range(passes):
            for b, batch in enumerate(loader):
                if b >= MAX_BATCHES or count >= MAX_ROWS:
                    break
                if not isinstance(batch, (list, tuple)) or len(batch) < 2:
                    return {"error": f"a batch is a {type(batch).__name__}, not (x, y, ...)"}
                x, y = batch[0], batch[1]
                if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) \
                        or len(x) != len(y) or len(x) == 0:
                    return {"error": "a batch's inputs and labels are not tensors of one "
                                     "length"}
                if not xs:
                    first = x.detach().clone()
                xs.append(x.detach().reshape(len(x), -1).double().clone())
                ys.append(y.detach().reshape(len(y), -1)[:, 0].double().clone())
                if model is not None:
                    with torch.no_grad():
                        out = _first_tensor(model(x))
                    if out is None:
                        return {"error": "the model's output is no tensor"}
                    outs.append(out.detach().reshape(len(x), -1).float().clone())
                count += len(x)
    except Exception as exc:  # noqa: BLE001 - what the loader or model raised is the record
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if not xs:
        return {"error": "the loader yielded no batch"}
    try:
        record = {"x": torch.cat(xs), "y": torch.cat(ys), "first": first}
        if model is not None:
            record["out"] = torch.cat(outs)
    except RuntimeError as exc:
        return {"error": f"batches of different widths ({exc})"[:300]}
    return record


def _argument(bound: dict, names: tuple[str, ...], position: int, args: tuple) -> Any:
    for name in names:
        if name in bound:
            return bound[name]
    return args[position] if len(args) > position else None


class Watcher:
    """`train` of a script watched while its `run` runs: use as a context manager around the
    call of `run`, then `record(result, seed)`. Without a `train`, nothing is watched."""

    def __init__(self, module, data: str | None = None):
        self.module = module
        self.real_train = getattr(module, "train", None)
        self.calls: list[dict] = []
        self.watches: dict[int, _Watch] = {}
        self.data_name = data
        self.real_data = getattr(module, data, None) if data else None
        self.data: dict | None = None

    def __enter__(self) -> Watcher:
        real_train = self.real_train
        if not callable(real_train):
            return self

        def watched_train(*args, **kwargs):
            try:
                bound = inspect.signature(real_train).bind_partial(*args, **kwargs).arguments
            except (TypeError, ValueError):
                bound = dict(kwargs)
            model = _argument(bound, ("model", "net"), 0, args)
            if isinstance(model, nn.Module) and id(model) not in self.watches:
                self.watches[id(model)] = _Watch(model)
            self.calls.append({"model": model,
                               "train_loader": _argument(bound, ("train_loader",), 1, args),
                               "val_loader": _argument(bound, ("val_loader",), 2, args)})
            return real_train(*args, **kwargs)

        self.module.train = watched_train
        real_data = self.real_data
        if callable(real_data) and self.data_name:
            def watched_data(*args, **kwargs):
                value = real_data(*args, **kwargs)
                if self.data is None:
                    self.data = _samples(value)
                return value

            setattr(self.module, self.data_name, watched_data)
        return self

    def __exit__(self, *exc) -> None:
        if callable(self.real_train):
            self.module.train = self.real_train
        if callable(self.real_data) and self.data_name:
            setattr(self.module, self.data_name, self.real_data)
        for w in self.watches.values():
            w.close()

    def record(self, result: Any, seed: int, train_passes: int = 1) -> dict:
        """The end-to-end record (module docstring) of a finished run that returned `result`."""
        if not self.calls:
            return {"train_called": False}
        last = self.calls[-1]
        model = result.get("model") if isinstance(result, dict) else None
        if not isinstance(model, nn.Module):
            model = last["model"] if isinstance(last["model"], nn.Module) else None
        watch = self.watches.get(id(last["model"]))
        params = watch.record() if watch is not None else None
        out: dict[str, Any] = {"train_called": True, "train_calls": len(self.calls),
                               "data": self.data}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            out["train"] = _rows(last["train_loader"], train_passes) \
                if last["train_loader"] is not None else {"error": "run passed no train_loader"}
            if last["val_loader"] is None:
                out["val"] = {"error": "run passed no val_loader"}
            elif model is None:
                out["val"] = _rows(last["val_loader"], 1)
            else:
                was_training = model.training
                model.eval()
                try:
                    out["val"] = _rows(last["val_loader"], 1, model)
                finally:
                    model.train(was_training)
            first = out["train"].pop("first", None)
            if params is not None and isinstance(first, torch.Tensor) and watch is not None:
                used = _used_in_forward(watch.model, first)
                for p in params:
                    p["used"] = None if used is None else p["name"] in used
        out["params"] = params
        return out


def end_to_end(module, *, seed: int = 0, data: str | None = None) -> dict:
    """`module.run(seed)` with its `train` (and its data function `data`) watched, quietly:
    the end-to-end record alone (the grader measures the fixed scripts with it). An exception
    `run` raises propagates."""
    with Watcher(module, data=data) as watcher, contextlib.redirect_stdout(io.StringIO()):
        result = module.run(seed)
    return watcher.record(result, seed)
