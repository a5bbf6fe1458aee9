"""Instrumentation for the bug hunts: runs *inside the worker*, next to the student's script.

A bug-hunt script is a whole training program (`grader/course/faults.toml` lists them). Its checks
look at one behaviour at a time, each through one of these probes, and always with the
grader's own objects wherever the behaviour does not depend on the script's:

- `train_audit` calls the script's `train(...)` on a small harness model, loaders over the
  grader's batches and the grader's optimizer, scheduler and loss, and records every
  `backward()` (which tensor, the gradient it produced), every optimizer step (`p.grad`, the
  learning rate), every forward (mode, gradient tracking, how many of its samples are
  validation samples), what the loss received, what `train` printed and what it returned.
- `setup_capture` calls the script's `run(seed)` with `train` replaced by a recorder, and
  reports what `run` built: the model, the loaders (batch sizes, labels, what reaches the first
  layer), the optimizer (classes, hyperparameters, which parameters it holds), the loss; then,
  on request, what the first call of the loss received in the script's own `train`, a few
  harness training steps of the script's model with the script's optimizer, the graph of a
  loss of the script's model.
- `model_audit` builds one of the script's model classes and reports what it registered, what
  its forward reaches in the autograd graph, what it creates or calls on the way, and whether
  its outputs vary in eval mode.
- `loss_call` and `update_call` call a loss or an update function on grader tensors, recording
  the shapes of every intermediate (a `(N, N)` one shows broadcasting).

Nothing here knows what the script should produce: the checks compare these records with
references computed in the grader. Probes observe, never substitute: they wrap and call
through the script's own functions (so that whatever the script put in them stays), they
recognise data by value (a validation sample is one whose values are a validation sample's,
whatever tensor holds it), and they find a layer's input from the values that reach it, never
from which positional argument of a library call carries it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import warnings
from collections.abc import Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
# Bound when the probe is imported, before student code runs: a submission that replaces
# torch.is_grad_enabled cannot change what the recorders read.
from torch import is_grad_enabled, nn
from torch.overrides import TorchFunctionMode
from torch.utils.data import TensorDataset

from grader.probes.recorders import unregistered_attributes

MAX_PRINTED = 4000
DROPOUT_OPS = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout,
               F.feature_alpha_dropout, torch.dropout, torch.bernoulli, torch.Tensor.bernoulli_,
               torch.rand_like, torch.rand}
# Draws of normal or uniform numbers with no dropout meaning (dropout masks come from rand /
# bernoulli): in a forward, they are weights drawn afresh at every call.
WEIGHT_DRAWS = {torch.randn, torch.randn_like, torch.normal, torch.Tensor.normal_,
                torch.Tensor.uniform_, nn.init.normal_, nn.init.uniform_, nn.init.xavier_normal_,
                nn.init.xavier_uniform_, nn.init.kaiming_normal_, nn.init.kaiming_uniform_,
                nn.init.trunc_normal_, nn.init.orthogonal_}


class Stop(Exception):
    """Raised by a recorder to end the student's call once it has seen what it needed."""


# --------------------------------------------------------------------------- harness objects


class ProbeLoader:
    """A loader over fixed batches: the very same tensor objects every epoch, `len()` the
    number of batches, `.dataset` and `.batch_size` like a DataLoader without shuffling."""

    def __init__(self, batches: list):
        self.batches = [tuple(b) for b in batches]
        columns = list(zip(*self.batches))
        self.dataset = TensorDataset(*(torch.cat(c) for c in columns))
        self.batch_size = len(self.batches[0][0])

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class TwoHeads(nn.Module):
    """The harness model of the fine-tuning script: .encoder, .head, .score_head;
    forward(x) -> (logits, score)."""

    def __init__(self, d_in: int, hidden: int, classes: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)
        self.score_head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.encoder(x)
        return self.head(h), self.score_head(h).squeeze(1)


def build_model(kind: str, sizes: list[int], state: dict | None = None) -> nn.Module:
    """Harness models. `sizes = [inputs, hidden, outputs]`. "mlp": Linear-ReLU-Linear;
    "image_mlp": Flatten-Linear-BatchNorm1d-ReLU-Dropout(0.3)-Linear; "tabular":
    Linear-BatchNorm1d-ReLU-Dropout(0.2)-Linear; "two_heads": `TwoHeads`."""
    d_in, hidden, d_out = sizes
    model: nn.Module
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))
    elif kind == "image_mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(d_in, hidden, bias=False),
                              nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.3),
                              nn.Linear(hidden, d_out))
    elif kind == "tabular":
        model = nn.Sequential(nn.Linear(d_in, hidden, bias=False), nn.BatchNorm1d(hidden),
                              nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, d_out))
    elif kind == "two_heads":
        model = TwoHeads(d_in, hidden, d_out)
    else:
        raise ValueError(f"unknown harness model {kind!r}")
    if state is not None:
        model.load_state_dict(state)
    return model


def build_optimizer(spec: dict | None, params) -> torch.optim.Optimizer | None:
    """None, {"name": "sgd", "lr", "momentum"=0} or {"name": "adam", "lr"}."""
    if spec is None:
        return None
    if spec["name"] == "sgd":
        return torch.optim.SGD(params, lr=spec["lr"], momentum=spec.get("momentum", 0.0))
    if spec["name"] == "adam":
        return torch.optim.Adam(params, lr=spec["lr"])
    raise ValueError(f"unknown optimizer {spec['name']!r}")


def build_scheduler(spec: dict | None, optimizer):
    """None or {"name": "step", "step_size", "gamma"}."""
    if spec is None:
        return None
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=spec["step_size"],
                                           gamma=spec["gamma"])


def column_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The harness's regression loss: pred (N, 1) against target (N,)."""
    return ((pred.reshape(-1) - target) ** 2).mean()


def flat(tensors: Sequence, params: Sequence) -> torch.Tensor:
    return torch.cat([(t if t is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                      for t, p in zip(tensors, params)])


def is_probabilities(t: Any) -> bool:
    """Rows of a 2-D float tensor that are all in [0, 1] and sum to 1 (softmax outputs)."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or not t.is_floating_point() \
            or t.shape[1] < 2:
        return False
    t = t.detach()
    return bool((t >= 0).all() and (t <= 1).all()
                and torch.allclose(t.sum(dim=1), torch.ones(len(t), dtype=t.dtype), atol=1e-4))


class RecordingCrossEntropy(nn.CrossEntropyLoss):
    """nn.CrossEntropyLoss recording, per call, [value, grad enabled, batch size, whether its
    input rows were probabilities (softmax already applied), target dtype]."""

    def __init__(self):
        super().__init__()
        self.calls: list[list] = []

    def forward(self, output, target):
        loss = super().forward(output, target)
        self.calls.append([float(loss.detach()) if loss.numel() == 1 else None,
                           is_grad_enabled(), int(len(target)), is_probabilities(output),
                           str(target.dtype).removeprefix("torch.")])
        return loss


class BackwardAudit:
    """Every backward() through `params`: which tensor it started from and the gradient it
    produced for each parameter; every step: p.grad, the learning rate, the backward passes
    since the previous step.

    Every backward runs with retain_graph=True, so that a second backward through a graph
    the first one would have freed does not stop the run: it is recorded instead
    (`freed_graph_reused`), with the error torch would have raised."""

    def __init__(self, params: Sequence[torch.Tensor]):
        self.params = params
        self.pending: list[dict] = []   # backward passes since the last step
        self.current: dict[int, torch.Tensor] | None = None
        self.freed: set = set()         # graph nodes a backward without retain_graph freed
        self.reused = False
        self.steps: list[dict] = []
        self.handles = [p.register_hook(self._hook(i)) for i, p in enumerate(params)]
        self._original = torch.autograd.backward
        torch.autograd.backward = self._backward

    def _hook(self, index: int):
        def hook(grad):
            if self.current is not None:
                self.current[index] = grad.detach().clone()
        return hook

    def _backward(self, tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                  *args, **kwargs):
        roots = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
        nodes = graph_nodes(roots)
        if nodes & self.freed:
            self.reused = True
        outer, self.current = self.current, {}
        try:
            self._original(tensors, grad_tensors, True, create_graph, *args, **kwargs)
            grads = self.current
        finally:
            self.current = outer
        if not (create_graph if retain_graph is None else retain_graph):
            self.freed |= nodes
        # `alive` keeps the roots until the step, so that two different losses never share
        # an id (a loss freed after its backward could lend its address to the next one).
        self.pending.append({"tensor": id(roots[0]) if roots else 0, "alive": roots,
                             "grad": flat([grads.get(i) for i in range(len(self.params))],
                                          self.params),
                             "reached": set(grads)})

    def snapshot(self) -> None:
        """The parameters' values now, for `infer_step`."""
        self.values = [p.detach().clone() for p in self.params]

    def infer_step(self, lr: float) -> None:
        """An update the script wrote inline (not through the function the audit wraps):
        the parameters moved since `snapshot` after a backward with no step recorded. The
        gradient it used is read off the move, (before - after) / lr."""
        values = getattr(self, "values", None)
        if not self.pending or values is None or not lr:
            return
        moved = [(b.double() - p.detach().double()) / lr for b, p in zip(values, self.params)]
        if any(bool(m.abs().max() > 0) for m in moved if m.numel()):
            self.step(lr, used=moved)

    def step(self, lr: float, used: list | None = None) -> None:
        self.steps.append({
            "lr": float(lr),
            "grad": flat([p.grad for p in self.params] if used is None else used, self.params),
            "grad_missing": sum(p.grad is None for p in self.params),
            # trainable parameters no backward since the last step reached (a detach())
            "unreached": [i for i, p in enumerate(self.params) if p.requires_grad
                          and all(i not in b["reached"] for b in self.pending)],
            "backwards": [b["grad"] for b in self.pending],
            "repeated_backward": len({b["tensor"] for b in self.pending}) < len(self.pending),
            "freed_graph_reused": self.reused,
        })
        self.pending, self.freed, self.reused = [], set(), False

    def close(self) -> None:
        torch.autograd.backward = self._original
        for h in self.handles:
            h.remove()


def graph_nodes(roots: list) -> set:
    """The autograd nodes that hold saved tensors (not the leaves' AccumulateGrad) reachable
    from `roots`: what a backward without retain_graph frees."""
    stack: list[Any] = [t.grad_fn for t in roots
                        if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen: set = set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return {fn for fn in seen if type(fn).__name__ != "AccumulateGrad"}


def row_keys(x: torch.Tensor) -> list[bytes]:
    """One key per sample of `x` (its first dimension), from the sample's values: the same
    sample has the same key whichever tensor holds it (a batch, the loader's whole dataset, a
    stack or a concatenation of batches, a copy, another float dtype)."""
    rows = x.detach().reshape(len(x), -1).to(torch.float32).contiguous()
    return [row.numpy().tobytes() for row in rows]


class ForwardModes:
    """[training, grad_enabled, validation samples, samples] at every forward of `model`.

    A sample is a validation sample when its values are those of one of the validation
    batches' samples (recognised by value, not by tensor object: an `evaluate` that scores the
    loader's whole dataset in one pass, or a stack of its samples, validates too). The harness
    batches are random draws, so no training sample has a validation sample's values."""

    def __init__(self, model: nn.Module, val_inputs: list[torch.Tensor]):
        self.val_keys = {k for x in val_inputs for k in row_keys(x)}
        self.model = model
        self.forwards: list[list] = []
        self.handle = model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module, args, kwargs):
        x = args[0] if args else next(iter(kwargs.values()), None) if kwargs else None
        n = val = 0
        if isinstance(x, torch.Tensor) and x.dim() > 0 and len(x):
            keys = row_keys(x)
            n, val = len(keys), sum(k in self.val_keys for k in keys)
        flags = {m.training for m in self.model.modules()}
        training = flags.pop() if len(flags) == 1 else None
        self.forwards.append([training, is_grad_enabled(), val, n])

    def close(self) -> None:
        self.handle.remove()


def describe_history(value: Any) -> dict:
    """What `train` returned, as kinds: {"type", "entries": {key: [{"kind", "value",
    "requires_grad"}]}} ("float" for Python and numpy floats and ints, "tensor", "other")."""
    if not isinstance(value, dict):
        return {"type": type(value).__name__, "entries": {}}
    entries: dict[str, Any] = {}
    for key, items in value.items():
        if not isinstance(items, (list, tuple)):
            entries[str(key)] = None
            continue
        described = []
        for v in items[:200]:
            if isinstance(v, torch.Tensor):
                described.append({"kind": "tensor", "requires_grad": bool(v.requires_grad),
                                  "value": float(v.detach().reshape(-1)[0]) if v.numel() else None})
            elif isinstance(v, (bool,)) or not isinstance(v, (int, float)):
                described.append({"kind": "other", "type": type(v).__name__})
            else:
                described.append({"kind": "float", "value": float(v)})
        entries[str(key)] = described
    return {"type": "dict", "entries": entries}


# --------------------------------------------------------------------------- train audit


def train_audit(module, *, model: str, sizes: list[int], state: dict, train_batches: list,
                val_batches: list, arguments: dict, optimizer: dict | None = None,
                scheduler: dict | None = None, update: str | None = None,
                loss: str | None = None, own_model: list | None = None) -> dict:
    """Call `module.train(**kwargs)` on harness objects and record what happened.

    The model is a harness network of the script's shape (`model`, `sizes`, `state`). The
    contract of train() states no model structure, so a train() that raises on it (it reads
    the script's own attributes, `model.w1`) is run again on the script's own model,
    `own_model = [class name, positional arguments]` built by the script's own constructor
    under the same seed; the record says which model ran (`"model": "harness" | "script"`).
    If that raises too, the first error stands.

    `arguments` maps the names of train's parameters to what to pass: "$model",
    "$train_loader", "$val_loader", "$optimizer", "$scheduler", "$loss_fn", or a plain value
    (epochs, lr). With `update` (the name of the script's own update function, e.g.
    "sgd_step"), each call of it is recorded as a step and then runs the script's own
    function; if that raises or changes no parameter, the grader applies p -= lr * p.grad
    instead, so that a broken update (scored by its own check) does not stop the run."""
    run = functools.partial(_audited_train, module, train_batches=train_batches,
                            val_batches=val_batches, arguments=arguments, optimizer=optimizer,
                            scheduler=scheduler, update=update, loss=loss)
    return _on_harness_or_own_model(run, module, model, sizes, state, own_model)


def _on_harness_or_own_model(run, module, model, sizes, state, own_model) -> dict:
    """`run(model)` on the grader's harness model; if the script's functions do not fit it
    (they reach attributes of the script's own model), on the script's own model class built
    by its own constructor. The harness model's error is the one reported when neither runs."""
    try:
        return {**run(build_model(model, sizes, state)), "model": "harness"}
    except Exception as first:  # noqa: BLE001 - re-raised unless the script's model runs
        own = _own_model(module, own_model, sizes)
        if own is None:
            raise
        try:
            return {**run(own), "model": "script"}
        except Exception:  # noqa: BLE001 - the harness model's error is the one to report
            raise first from None


def _own_model(module, spec: list | None, sizes: list[int]) -> nn.Module | None:
    """The script's own model class built by its own constructor (`spec = [class name,
    positional arguments]`), seeded from `sizes`, or None if there is none or it raises."""
    if not spec:
        return None
    cls = getattr(module, spec[0], None)
    if not isinstance(cls, type) or not issubclass(cls, nn.Module):
        return None
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(sum(sizes))
            return cls(*spec[1])
    except Exception:  # noqa: BLE001 - a constructor that raises: no second model
        return None


def _audited_train(module, net: nn.Module, *, train_batches: list, val_batches: list,
                   arguments: dict, optimizer: dict | None, scheduler: dict | None,
                   update: str | None, loss: str | None) -> dict:
    """One audited call of `module.train` on the model `net` (see `train_audit`)."""
    net.train()
    params = list(net.parameters())
    opt = build_optimizer(optimizer, params)
    sched = build_scheduler(scheduler, opt)
    loss_fn = RecordingCrossEntropy() if loss == "cross_entropy" else None
    train_loader, val_loader = ProbeLoader(train_batches), ProbeLoader(val_batches)
    objects = {"$model": net, "$train_loader": train_loader, "$val_loader": val_loader,
               "$optimizer": opt, "$scheduler": sched, "$loss_fn": loss_fn,
               "$column_mse": column_mse}
    kwargs = {name: objects.get(value, value) if isinstance(value, str) else value
              for name, value in arguments.items()}
    audit = BackwardAudit(params)
    modes = ForwardModes(net, [b[0] for b in val_batches])
    handles = []
    original_update = None
    inline_lr = arguments.get("lr") if update is not None and opt is None else None
    if isinstance(inline_lr, (int, float)) and inline_lr > 0:
        # Updates written inline in train (not through the update function) are recorded
        # too, from how the parameters moved, at the next forward and at the end.
        def infer(module_, args_):
            audit.infer_step(inline_lr)
            audit.snapshot()

        handles.append(net.register_forward_pre_hook(infer))
    if opt is not None:
        handles.append(opt.register_step_post_hook(
            lambda o, args, kw: audit.step(o.param_groups[0]["lr"])))
    if update is not None:
        original_update = getattr(module, update)

        def recording_update(*args, **kw):
            # Observe, never substitute: record the step, then run the script's own update
            # (whatever it does besides, such as resetting the gradients, stays). Only if it
            # raises or leaves the parameters as they were does the grader apply
            # p -= lr * p.grad itself, so that a broken update (which its own check scores)
            # does not stop or freeze the training this audit watches.
            try:
                lr = float(_argument(original_update, args, kw, "lr", 1))
            except (TypeError, ValueError, RuntimeError):
                lr = None
            audit.step(float("nan") if lr is None else lr)
            before = [p.detach().clone() for p in params]
            grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
            try:
                original_update(*args, **kw)
            except Exception:  # noqa: BLE001 - scored by the update's own check
                moved = False
            else:
                moved = any(not torch.equal(p.detach(), b) for p, b in zip(params, before))
            if not moved and lr is not None:
                with torch.no_grad():
                    for p, b, g in zip(params, before, grads):
                        p.copy_(b if g is None else b - lr * g)

        setattr(module, update, recording_update)
    printed = io.StringIO()
    backward_losses = _BackwardLosses()
    try:
        with contextlib.redirect_stdout(printed), backward_losses:
            value = module.train(**kwargs)
        if isinstance(inline_lr, (int, float)) and inline_lr > 0:
            audit.infer_step(inline_lr)
    finally:
        audit.close()
        modes.close()
        for h in handles:
            h.remove()
        if update is not None and original_update is not None:
            setattr(module, update, original_update)
    return {"steps": audit.steps, "trainable": sum(p.requires_grad for p in params),
            "forwards": modes.forwards,
            "history": describe_history(value), "printed": printed.getvalue()[:MAX_PRINTED],
            "losses": loss_fn.calls if loss_fn is not None else [],
            "backward_losses": backward_losses.values[:MAX_BACKWARD_LOSSES],
            "state": {k: v.detach().clone() for k, v in net.state_dict().items()}}


MAX_BACKWARD_LOSSES = 2000


class _BackwardLosses:
    """While active, records the value of every one-element tensor `.backward()` is called on
    (the losses train backpropagates, whatever loss function the script computes them with;
    None for a tensor of another size); the original `Tensor.backward` runs unchanged."""

    def __init__(self):
        self.values: list[float | None] = []
        self._original = None

    def __enter__(self):
        self._original = original = torch.Tensor.backward
        values = self.values

        def backward(tensor, *args, **kwargs):
            if len(values) < MAX_BACKWARD_LOSSES:
                try:
                    values.append(float(tensor.detach()) if tensor.numel() == 1 else None)
                except Exception:  # noqa: BLE001 - an odd tensor is not judged, only passed on
                    values.append(None)
            return original(tensor, *args, **kwargs)

        torch.Tensor.backward = backward  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc) -> None:
        torch.Tensor.backward = self._original  # type: ignore[method-assign, assignment]


def _argument(fn, args: tuple, kwargs: dict, name: str, position: int) -> Any:
    """The argument `name` of the call fn(*args, **kwargs), however it was passed (by keyword,
    or by position in fn's own signature); failing that, positional argument `position`."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        if name in bound.arguments:
            return bound.arguments[name]
    except (TypeError, ValueError):
        pass
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else None


# --------------------------------------------------------------------------- setup capture


def model_report(model: Any) -> dict:
    if not isinstance(model, nn.Module):
        return {"module": False, "type": type(model).__name__}
    return {
        "module": True, "type": type(model).__name__,
        "parameters": [{"name": n, "shape": list(p.shape), "requires_grad": bool(p.requires_grad)}
                       for n, p in model.named_parameters()],
        "modules": [type(m).__name__ for m in model.modules()],
        "training": bool(model.training),
    }


def optimizer_report(opt: Any, model: Any) -> dict:
    if not isinstance(opt, torch.optim.Optimizer):
        return {"optimizer": False, "type": type(opt).__name__}
    names: dict[int, str] = {}
    if isinstance(model, nn.Module):
        for n, p in model.named_parameters(remove_duplicate=False):
            names.setdefault(id(p), n)
    groups = []
    for g in opt.param_groups:
        hyper = {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else
                     [float(x) for x in v] if isinstance(v, tuple) else v)
                 for k, v in g.items() if k != "params"
                 and isinstance(v, (int, float, bool, tuple, type(None)))}
        groups.append({"hyper": hyper,
                       "names": [names[id(p)] for p in g["params"] if id(p) in names],
                       "foreign": [list(p.shape) for p in g["params"] if id(p) not in names]})
    return {"optimizer": True, "type": type(opt).__name__, "module": type(opt).__module__,
            "groups": groups}


def loader_report(loader: Any, epochs: int, seed: int) -> dict:
    """Batch sizes, label dtypes and labels of `epochs` passes (torch seeded, so a shuffling
    loader shuffles the same way every run)."""
    if loader is None:
        return {"loader": False}
    torch.manual_seed(seed)
    passes = []
    try:
        for _ in range(epochs):
            batches = []
            for batch in loader:
                if not isinstance(batch, (list, tuple)) or len(batch) < 2:
                    return {"loader": True, "error": f"a batch is a {type(batch).__name__}, "
                            "not an (x, y) pair"}
                y = batch[1]
                entry: dict[str, Any] = {"size": int(len(batch[0]))}
                if isinstance(y, torch.Tensor):
                    entry["label_dtype"] = str(y.dtype).removeprefix("torch.")
                    if y.dim() == 1 and len(y) <= 512:
                        entry["labels"] = [float(v) for v in y.tolist()]
                batches.append(entry)
                if len(batches) > 200:
                    break
            passes.append(batches)
    except Exception as exc:  # noqa: BLE001 - what the loader raised is the record
        return {"loader": True, "error": f"{type(exc).__name__}: {exc}"}
    return {"loader": True, "passes": passes}


def _tensors(values) -> list[torch.Tensor]:
    """The tensors among `values`, looking inside lists, tuples and dicts (torch.einsum's
    operands, torch.cat's list)."""
    out, stack = [], list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return out


class FirstLayerInputs(TorchFunctionMode):
    """What the first layer of each forward computes on, found from the values that reach it,
    not from argument positions: the probe follows every tensor computed from the model's
    input (data) and every tensor computed from its parameters alone (weights: `w.T`,
    `w.t()`, `w.unsqueeze(0)`, ...); the first operation that combines data with weights is
    the first layer (`F.linear(x, w, b)`, `torch.addmm(b, x, w.t())`, `x @ w.T + b`,
    `torch.einsum(..., x, w)`, `torch.baddbmm(...)`, a convolution, a functional BatchNorm),
    and its data operand is what the layer sees (the largest one, if several). A model with
    no parameter on the way records its input as it is."""

    def __init__(self, params: list[torch.Tensor]):
        super().__init__()
        self.param_ids = {id(p) for p in params}
        self.inputs: list[torch.Tensor] = []
        self.data: set[int] = set()
        self.weights: set[int] = set()
        self.alive: list[torch.Tensor] = []  # keeps followed tensors alive: ids stay unique
        self.rows = 0
        self.armed = False

    def arm(self, x: torch.Tensor) -> None:
        self.data, self.weights, self.alive = {id(x)}, set(self.param_ids), [x]
        self.rows, self.armed = len(x), True

    def disarm(self, x: torch.Tensor) -> None:
        """After the forward: a model that never combined its input with a parameter."""
        if self.armed:
            self._record(x)
        self.armed, self.alive = False, []

    def _record(self, t: torch.Tensor) -> None:
        t = t.detach().clone()
        rows = self.rows if self.rows and t.numel() % self.rows == 0 else len(t)
        self.inputs.append(t.reshape(rows, -1))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.armed:
            tensors = _tensors(list(args) + list(kwargs.values()))
            data = [t for t in tensors if id(t) in self.data]
            # Weights: the parameters, what is computed from them alone, and any other tensor
            # that requires grad (a weight kept outside the parameters); the forward runs
            # under no_grad, so data never does.
            weights = [t for t in tensors if id(t) in self.weights
                       or (t.requires_grad and id(t) not in self.data)]
            if data and weights:
                self._record(max(data, key=lambda t: t.numel()))
                self.armed, self.alive = False, []
            elif data or weights:
                results = _tensors([out])
                (self.data if data else self.weights).update(id(t) for t in results)
                self.alive.extend(results)
        return out


def first_layer_inputs(model: Any, loader: Any, limit: int = 4096) -> torch.Tensor | None:
    """What the model's first layer sees for every sample of `loader`, in eval mode."""
    if not isinstance(model, nn.Module) or loader is None:
        return None
    was_training = model.training
    model.eval()
    count = 0
    mode = FirstLayerInputs(list(model.parameters()))
    try:
        with torch.no_grad(), mode:
            for batch in loader:
                mode.arm(batch[0])
                model(batch[0])
                mode.disarm(batch[0])
                count += len(batch[0])
                if count >= limit:
                    break
    finally:
        model.train(was_training)
    rows = mode.inputs
    return torch.cat(rows) if rows else None


def _capture(module, seed: int) -> tuple[dict | None, str | None]:
    """The arguments `run(seed)` passes to `train`, by train's parameter names."""
    real_train = module.train
    captured: dict = {}

    def recorder(*args, **kwargs):
        try:
            bound = inspect.signature(real_train).bind(*args, **kwargs)
            bound.apply_defaults()
            captured.update(bound.arguments)
        except TypeError:
            captured.update({f"arg{i}": a for i, a in enumerate(args)}, **kwargs)
        raise Stop

    module.train = recorder
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            module.run(seed)
    except Stop:
        pass
    finally:
        module.train = real_train
    return (captured or None), None


def setup_capture(module, *, seed: int = 0, epochs_to_iterate: int = 2,
                  first_layer: bool = False, first_loss: bool = False,
                  logits_batch: list | None = None, harness_batches: list | None = None,
                  harness_loss: str | None = None, graph_batch: list | None = None,
                  schedule_epochs: int = 0) -> dict:
    """What `run(seed)` hands to `train`, and (each on request) what the first call of the
    loss receives in the script's own train, what the first layer sees of the loaders, the
    model's outputs and the script's loss on `logits_batch`, the parameters before and after
    harness steps with the script's model and optimizer on `harness_batches`, and which
    trainable parameters get a gradient from a loss on `graph_batch`."""
    args, _ = _capture(module, seed)
    if args is None:
        return {"train_called": False}
    model = args.get("model")
    optimizer = args.get("optimizer")
    record: dict[str, Any] = {
        "train_called": True, "arguments": sorted(args),
        "model": model_report(model), "optimizer": optimizer_report(optimizer, model),
        "loss_fn": type(args.get("loss_fn")).__name__ if "loss_fn" in args else None,
        "lr": float(args["lr"]) if isinstance(args.get("lr"), (int, float)) else None,
        "train_loader": loader_report(args.get("train_loader"), epochs_to_iterate, seed),
        "val_loader": loader_report(args.get("val_loader"), 1, seed),
    }
    if schedule_epochs:  # first: what follows may run the script's train on these objects
        record["schedule"] = schedule_of(optimizer, args.get("scheduler"), schedule_epochs)
    if first_layer:
        record["first_layer"] = {
            "train": first_layer_inputs(model, args.get("train_loader")),
            "val": first_layer_inputs(model, args.get("val_loader"))}
    if logits_batch is not None and isinstance(model, nn.Module):
        record["logits"] = logits_probe(model, args.get("loss_fn"), *logits_batch)
    if first_loss and "loss_fn" in args:
        record["first_loss"] = first_loss_call(module, args, seed)
    if harness_batches is not None and isinstance(model, nn.Module) and \
            isinstance(optimizer, torch.optim.Optimizer):
        record["harness"] = harness_steps(model, optimizer, harness_batches, harness_loss)
    if graph_batch is not None and isinstance(model, nn.Module):
        record["graph"] = graph_of_loss(model, graph_batch, harness_loss)
    return record


def schedule_of(optimizer: Any, scheduler: Any, epochs: int) -> dict:
    """The learning rates (of every parameter group) a copy of the optimizer and scheduler
    run() builds gives epoch by epoch, stepping the scheduler once per epoch as the contract
    says: {"lrs": [[lr per group] per epoch]} or {"error": ...}."""
    if not isinstance(optimizer, torch.optim.Optimizer) or scheduler is None:
        return {"error": "no torch optimizer and scheduler"}
    try:
        # One deepcopy of both keeps the scheduler bound to the copied optimizer.
        opt, sched = copy.deepcopy((optimizer, scheduler))
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scheduler.step() without optimizer.step()
            for _ in range(epochs):
                lrs.append([float(g["lr"]) for g in opt.param_groups])
                sched.step()
    except Exception as exc:  # noqa: BLE001 - what it raised is the record
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"lrs": lrs}


def first_loss_call(module, args: dict, seed: int) -> dict:
    """Run the script's own train on what run() built, until its first call of the loss:
    what that call received (output and target dtypes and shapes) and whether the loss
    raised on it."""
    real_loss = args["loss_fn"]
    seen: dict = {}

    def recorder(output, target, *rest, **kw):
        seen.update(output_shape=list(getattr(output, "shape", [])),
                    target_dtype=str(getattr(target, "dtype", type(target).__name__))
                    .removeprefix("torch."),
                    target_shape=list(getattr(target, "shape", [])))
        try:
            real_loss(output, target, *rest, **kw)
        except Exception as exc:  # noqa: BLE001 - the loss rejecting its target is the record
            seen["error"] = f"{type(exc).__name__}: {exc}"[:500]
        raise Stop

    call = dict(args)
    call["loss_fn"] = recorder
    if "epochs" in call:
        call["epochs"] = 1
    torch.manual_seed(seed)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            module.train(**call)
    except Stop:
        pass
    except Exception as exc:  # noqa: BLE001 - train failing before its loss is the record
        seen.setdefault("train_error", f"{type(exc).__name__}: {exc}"[:500])
    return seen


def logits_probe(model: nn.Module, loss_fn: Any, x: torch.Tensor, y: torch.Tensor) -> dict:
    """The model's outputs (eval mode) on x and the script's loss of them against y."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
            value, error = None, None
            if loss_fn is not None:
                try:
                    value = float(loss_fn(out, y))
                except Exception as exc:  # noqa: BLE001
                    error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        model.train(was_training)
    return {"output": out.detach().clone() if isinstance(out, torch.Tensor) else None,
            "loss": value, "error": error}


def _two_head_loss(output, y, s, weight: float = 0.5) -> torch.Tensor:
    logits, score = output
    return F.cross_entropy(logits, y) + weight * F.mse_loss(score.reshape(-1), s)


def harness_loss_of(kind: str | None, output, batch) -> torch.Tensor:
    if kind == "two_heads":
        return _two_head_loss(output, batch[1], batch[2])
    return F.cross_entropy(output, batch[1])


def through_parts(model: Any, x: torch.Tensor, kind: str | None):
    """The model's outputs computed from its documented parts (.encoder, .head, .score_head
    for "two_heads"), not its forward(): harness steps then judge what the optimizer and the
    freezing do, whatever forward() does."""
    if kind == "two_heads" and all(hasattr(model, n) for n in ("encoder", "head",
                                                                "score_head")):
        h = model.encoder(x)
        return model.head(h), model.score_head(h).reshape(-1)
    return model(x)


def harness_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: list,
                  loss_kind: str | None) -> dict:
    """A few plain training steps of the script's model (through its parts) with the script's
    optimizer on the grader's batches: each parameter before and after (by name), and the
    output shapes."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    shapes = []
    error = None
    try:
        for batch in batches:
            optimizer.zero_grad()
            out = through_parts(model, batch[0], loss_kind)
            shapes.append([list(o.shape) for o in out] if isinstance(out, tuple)
                          else [list(out.shape)])
            harness_loss_of(loss_kind, out, batch).backward()
            optimizer.step()
    except Exception as exc:  # noqa: BLE001
        error = f"{type(exc).__name__}: {exc}"[:300]
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    return {"before": before, "after": after, "output_shapes": shapes[:1], "error": error}


def graph_of_loss(model: nn.Module, batch: list, loss_kind: str | None) -> dict:
    """A loss of the model on one batch, backpropagated: which parameters got a gradient."""
    model.zero_grad(set_to_none=True)
    model.train()
    torch.manual_seed(0)
    out = model(batch[0])
    loss = harness_loss_of(loss_kind, out, batch)
    record = {"loss_requires_grad": bool(loss.requires_grad), "grads": {}}
    if loss.requires_grad:
        loss.backward()
        record["grads"] = {n: (None if p.grad is None else float(p.grad.abs().sum()))
                           for n, p in model.named_parameters() if p.requires_grad}
    if loss_kind == "two_heads":
        # The score's loss alone: the contract has both losses share the encoder, so the
        # score's gradient must reach it too (a score head fed h.detach() cuts it off).
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        out = model(batch[0])
        score_loss = F.mse_loss(out[1].reshape(-1), batch[2])
        record["score_grads"] = {}
        if score_loss.requires_grad:
            score_loss.backward()
            record["score_grads"] = {
                n: (None if p.grad is None else float(p.grad.abs().sum()))
                for n, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    return record


# --------------------------------------------------------------------------- model audit


class OpLog(TorchFunctionMode):
    """Counts dropout-like random operations that run in training mode, and draws of random
    weights (`WEIGHT_DRAWS`)."""

    def __init__(self):
        super().__init__()
        self.active_dropout = 0
        self.weight_draws = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in WEIGHT_DRAWS:
            self.weight_draws += 1
        if func in DROPOUT_OPS:
            if func in (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout,
                        F.feature_alpha_dropout, torch.dropout):
                p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
                training = kwargs.get("training", kwargs.get("train",
                                      args[2] if len(args) > 2 else True))
                if training and p:
                    self.active_dropout += 1
            else:
                self.active_dropout += 1
        return func(*args, **kwargs)


def _graph_leaves(y: torch.Tensor) -> list[torch.Tensor]:
    leaves: list[torch.Tensor] = []
    seen: set = set()
    stack: list[Any] = [y.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if type(fn).__name__ == "AccumulateGrad":
            leaves.append(fn.variable)
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return leaves


def _first(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def _as_scalar(out: Any) -> torch.Tensor | None:
    parts = [o for o in (out if isinstance(out, (tuple, list)) else [out])
             if isinstance(o, torch.Tensor) and o.requires_grad]
    # A sum of tensors (parts is not empty) is a tensor; sum()'s type allows its start, 0.
    return cast(torch.Tensor, sum(p.float().sum() for p in parts)) if parts else None


def model_audit(module, *, cls: str, args: list, seed: int, x: torch.Tensor) -> dict:
    """Build `cls(*args)` (torch seeded) and record: its registered parameters; attributes
    holding lists of modules or bare tensors; modules constructed or called during a forward
    that are not registered; the leaves of the autograd graph of a training-mode forward
    (registered or not) and which registered parameters get a gradient; two eval-mode
    forwards with different seeds (equal or not) and dropout-like operations active in them;
    two training-mode forwards (equal or not)."""
    torch.manual_seed(seed)
    model = getattr(module, cls)(*args)
    params = list(model.parameters())
    found = unregistered_attributes(model)
    lists, bare = found["module_lists"], found["bare_tensors"]
    registered = set(map(id, model.modules()))
    created: list[nn.Module] = []
    foreign: list[str] = []
    original_init = nn.Module.__init__

    def counting_init(self, *a, **kw):
        created.append(self)
        original_init(self, *a, **kw)

    def call_hook(mod, inputs):
        if id(mod) not in registered:
            foreign.append(type(mod).__name__)

    outputs: dict[str, Any] = {}
    nn.Module.__init__ = counting_init  # type: ignore[method-assign]  # restored below
    hook = torch.nn.modules.module.register_module_forward_pre_hook(call_hook)
    try:
        model.train()
        torch.manual_seed(seed + 1)
        out = model(x)
        # Layers with weights of their own; containers made on the fly (a slice of a
        # ModuleList or Sequential is a new ModuleList) hold none.
        created_train = sum(1 for m in created if m._parameters)
        created.clear()
        y = _as_scalar(out)
        leaves = _graph_leaves(y) if y is not None else []
        unregistered = [list(t.shape) for t in leaves if not any(t is p for p in params)]
        if y is not None:
            y.backward()
        grads = {n: p.grad is not None and bool(p.grad.abs().sum() > 0)
                 for n, p in model.named_parameters() if p.requires_grad}
        with torch.no_grad():
            torch.manual_seed(seed + 2)
            train_a = _first(model(x))
            torch.manual_seed(seed + 3)
            train_b = _first(model(x))
            model.eval()
            ops = OpLog()
            with ops:
                torch.manual_seed(seed + 4)
                eval_a = _first(model(x))
                torch.manual_seed(seed + 5)
                eval_b = _first(model(x))
    finally:
        nn.Module.__init__ = original_init  # type: ignore[method-assign]
        hook.remove()
    first = _first(out)

    def differ(a, b) -> bool | None:
        if a is None or b is None or a.shape != b.shape:
            return None
        return not torch.equal(a, b)

    outputs.update(
        output_shape=list(first.shape) if first is not None else None,
        output_is_tuple=isinstance(out, (tuple, list)),
        eval_output=eval_a.detach().clone() if eval_a is not None else None,
        eval_outputs_differ=differ(eval_a, eval_b),
        train_outputs_differ=differ(train_a, train_b),
        active_dropout_in_eval=ops.active_dropout,
        weight_draws_in_eval=ops.weight_draws,
    )
    return {
        "parameters": [{"name": n, "shape": list(p.shape), "requires_grad": bool(p.requires_grad)}
                       for n, p in model.named_parameters()],
        "module_lists": lists, "bare_tensors": bare,
        "modules_created_in_forward": created_train,
        "unregistered_modules_called": sorted(set(foreign)),
        "unregistered_leaves": unregistered,
        "params_with_grad": grads,
        **outputs,
    }


# --------------------------------------------------------------------------- functions


class ShapeLog(TorchFunctionMode):
    """Every operation's input shapes and output shape (first 200)."""

    def __init__(self):
        super().__init__()
        self.ops: list[list] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if len(self.ops) < 200 and isinstance(out, torch.Tensor):
            shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
            self.ops.append([getattr(func, "__name__", str(func)), shapes, list(out.shape)])
        return out


def loss_call(module, *, name: str, pred: torch.Tensor, target: torch.Tensor) -> dict:
    """`name(pred, target)` with pred requiring grad: the value, the gradient with respect to
    pred, and the shapes of every operation on the way."""
    pred = pred.clone().requires_grad_(True)
    log = ShapeLog()
    with log:
        value = getattr(module, name)(pred, target)
    record: dict[str, Any] = {"ops": log.ops, "type": type(value).__name__, "value": None,
                              "grad": None}
    if isinstance(value, torch.Tensor):
        record["value"] = value.detach().clone()
        if value.requires_grad and value.numel() == 1:
            value.backward()
            record["grad"] = None if pred.grad is None else pred.grad.detach().clone()
    return record


def update_call(module, *, name: str, values: list, grads: list, lr: float) -> dict:
    """`name(params, lr)` on leaf parameters with the given values and gradients, passed as a
    generator like model.parameters(): the values afterwards, whether each is still a leaf
    without a graph, and whether the gradients were left alone."""
    params = [nn.Parameter(v.clone()) for v in values]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    getattr(module, name)((p for p in params), lr)
    return {"after": [p.detach().clone() for p in params],
            "leaf": [bool(p.is_leaf and p.grad_fn is None) for p in params],
            "grads_after": [None if p.grad is None else p.grad.detach().clone() for p in params]}


# --------------------------------------------------------------------------- evaluate audit


def evaluate_audit(module, *, model: str, sizes: list[int], state: dict, batches: list,
                   loss: str, own_model: list | None = None) -> dict:
    """Call the script's `evaluate` on a harness model (or, if that raises, the script's own
    model as in `train_audit`) and a loader over `batches`, recording every forward's input
    and output: the grader then computes the loss over the samples the model actually scored,
    whatever the script's batching or mode. `loss` is "cross_entropy" or "column_mse":
    `evaluate(model, loader, loss_fn)` with nn.CrossEntropyLoss() or `column_mse`; or
    "two_heads": `evaluate(model, loader)` over (x, y, s) batches, the script computing its
    two-head loss itself (each forward's output recorded whole: logits and score)."""
    args = () if loss == "two_heads" else (
        nn.CrossEntropyLoss() if loss == "cross_entropy" else column_mse,)

    def run(net: nn.Module) -> dict:
        seen: list = []
        hook = net.register_forward_hook(lambda m, inputs, out: seen.append((inputs, out)))
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                value = module.evaluate(net, ProbeLoader(batches), *args)
        finally:
            hook.remove()
        forwards = [[x.detach().clone(), *(o.detach().clone() for o in outs)]
                    for x, outs in ((_first(i), _outputs(o, loss)) for i, o in seen)
                    if isinstance(x, torch.Tensor) and outs]
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if isinstance(k, str)
                     and isinstance(v, (int, float)) and not isinstance(v, bool)}
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            value = float(value)
        elif not isinstance(value, (int, float)) or isinstance(value, bool):
            value = repr(value)[:200]
        return {"value": value, "forwards": forwards[:64]}

    return _on_harness_or_own_model(run, module, model, sizes, state, own_model)


def _outputs(out: Any, loss: str) -> list[torch.Tensor]:
    """The tensors of a forward's output the loss reads: the first one, or for "two_heads"
    the first two (logits, score); [] when the output does not hold them."""
    if loss != "two_heads":
        first = _first(out)
        return [] if first is None else [first]
    if (isinstance(out, (tuple, list)) and len(out) >= 2
            and all(isinstance(o, torch.Tensor) for o in out[:2])):
        return list(out[:2])
    return []
