"""Probes for `parameters`: build the student's modules inside the worker and report records.

A student's `nn.Module` can only exist in the worker, so these functions build it (torch seeded
right before construction, so every run is identical), drive it with inputs the check sends,
and return plain records: parameter names, shapes, values and flags, buffers, `state_dict()`
keys, `modules()` order, outputs, gradients, the leaves of the autograd graph, optimizer groups
as parameter names. No expected value lives here; every verdict is computed by the check.

The small models that `count_parameters`, `param_groups` and `replace_head` are tried on are
defined here too (`build_case`), so that the worker and the grader build the very same ones.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from grader.probes.recorders import unregistered_attributes

# --------------------------------------------------------------------------- records


def _value(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().as_subclass(torch.Tensor)


def _first_names(model: nn.Module) -> dict[int, str]:
    """id(parameter) -> the first name it is registered under (shared ones have several)."""
    names: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)
    return names


def registration(model: nn.Module) -> dict:
    """What `model` registered: parameters, buffers, state_dict keys, modules() in order."""
    modules = []
    linears = []
    for m in model.modules():
        entry: dict[str, Any] = {"type": type(m).__name__}
        if isinstance(m, nn.Linear):
            entry.update(in_features=int(m.in_features), out_features=int(m.out_features))
            linears.append({"weight": _value(m.weight),
                            "bias": None if m.bias is None else _value(m.bias)})
        modules.append(entry)
    return {
        "parameters": [{"name": n, "shape": list(p.shape), "requires_grad": bool(p.requires_grad),
                        "dtype": str(p.dtype).removeprefix("torch."), "value": _value(p)}
                       for n, p in model.named_parameters()],
        "buffers": [{"name": n, "shape": list(b.shape),
                     "dtype": str(b.dtype).removeprefix("torch."), "value": _value(b)}
                    for n, b in model.named_buffers()],
        "state_dict": _keys(model.state_dict()),
        "modules": modules,
        "linears": linears,
        **unregistered_attributes(model),
    }


def _keys(state: dict) -> list[dict]:
    """state_dict() entries as names and shapes (None for a non-tensor extra state)."""
    return [{"name": str(k), "shape": list(v.shape) if isinstance(v, torch.Tensor) else None}
            for k, v in state.items()]


def _output(y: Any) -> dict:
    if isinstance(y, torch.Tensor):
        return {"type": "Tensor", "value": _value(y)}
    return {"type": type(y).__name__, "value": None}


# --------------------------------------------------------------------------- building


def _build(module, cls: str, args: list, seed: int, init: dict | None) -> nn.Module:
    """`cls(*args, **init)` from the student's module, built right after seeding torch."""
    torch.manual_seed(seed)
    return getattr(module, cls)(*args, **(init or {}))


def _assign(model: nn.Module, by_name: dict | None, by_size: list | None,
            linears: list | None) -> list[str]:
    """Overwrite parameter values the check chose; returns what could not be found.

    by_name: {parameter name: value}; by_size: values each copied into the one parameter with
    that many elements (reshaped to its shape); linears: [(weight, bias)] for the nn.Linear
    layers in modules() order."""
    missing = []
    named = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in (by_name or {}).items():
            p = named.get(name)
            if p is None or p.shape != value.shape:
                missing.append(f"a parameter named {name!r} of shape {tuple(value.shape)}")
            else:
                p.copy_(value)
        for value in by_size or []:
            found = [p for p in model.parameters() if p.numel() == value.numel()]
            if len(found) != 1:
                missing.append(f"one parameter with {value.numel()} elements (found {len(found)})")
            else:
                found[0].copy_(value.reshape(found[0].shape))
        if linears is not None:
            layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
            if len(layers) != len(linears):
                missing.append(f"{len(linears)} registered nn.Linear layers (found {len(layers)})")
            else:
                for layer, (w, b) in zip(layers, linears):
                    if layer.weight.shape != w.shape or layer.bias is None:
                        missing.append(f"an nn.Linear with weight shape {tuple(w.shape)} "
                                       "and a bias")
                        continue
                    layer.weight.copy_(w)
                    layer.bias.copy_(b)
    return missing


class _OpRecorder(TorchDispatchMode):
    """Names of the aten operators that ran (to see whether batch norm was used)."""

    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func))
        return func(*args, **(kwargs or {}))


# --------------------------------------------------------------------------- module probes


def report(module, cls: str, args: list, seed: int, *, init: dict | None = None) -> dict:
    """Build `cls(*args, **init)` and report what it registered."""
    return registration(_build(module, cls, args, seed, init))


def run(module, cls: str, args: list, seed: int, steps: list, *, init: dict | None = None,
        assign: dict | None = None, assign_by_size: list | None = None,
        assign_linears: list | None = None, watch: list | None = None,
        record_ops: bool = False) -> dict:
    """Build `cls(*args, **init)`, optionally set parameter values, then run forward steps.

    Each step is {"mode": "train" | "eval", "x": tensor, "seed": int} and optionally
    "requires_grad": True (x then requires grad, as the output of an earlier layer does): the
    module is put in that mode, torch is seeded (dropout masks are then the same on every run)
    and the output is recorded, with the attributes named in `watch` (running statistics) as
    they are after the step. Gradient tracking stays on, as in training, so that running
    statistics that keep the autograd graph show it. `record_ops` lists the aten operators
    that ran."""
    model = _build(module, cls, args, seed, init)
    missing = _assign(model, assign, assign_by_size, assign_linears)
    reg = registration(model)
    recorder = _OpRecorder() if record_ops else None
    records = []
    created = 0  # layers constructed during the forward passes (for diagnoses)
    for step in steps:
        model.train(step["mode"] == "train")
        torch.manual_seed(step["seed"])
        x = step["x"].clone().requires_grad_(True) if step.get("requires_grad") else step["x"]
        counter = _count_constructions()
        with counter:
            if recorder is not None:
                with recorder:
                    y = model(x)
            else:
                y = model(x)
        created += counter.count
        watched = {}
        for name in watch or []:
            v = getattr(model, name, None)
            watched[name] = ({"value": _value(v), "requires_grad": bool(v.requires_grad)}
                             if isinstance(v, torch.Tensor) else None)
        records.append({"output": _output(y), "watched": watched})
    return {"report": reg, "missing": missing, "steps": records,
            "ops": sorted(recorder.ops) if recorder is not None else [],
            "modules_created_in_forward": created}


def round_trip(module, cls: str, args: list, seed_a: int, seed_b: int, x: torch.Tensor, *,
               init: dict | None = None) -> dict:
    """state_dict() of one instance loaded into a fresh one built with another seed; both are
    then run in eval mode on `x`."""
    a = _build(module, cls, args, seed_a, init)
    state = a.state_dict()
    b = _build(module, cls, args, seed_b, init)
    b.load_state_dict(state)
    a.eval()
    b.eval()
    with torch.no_grad():
        out_a, out_b = a(x), b(x)
    return {"state_dict": _keys(state), "out_a": _output(out_a), "out_b": _output(out_b)}


def double_forward(module, cls: str, args: list, seed: int, x: torch.Tensor, *,
                   init: dict | None = None) -> dict:
    """`.double()`, then a forward in eval mode on a float64 input."""
    model = _build(module, cls, args, seed, init).double()
    model.eval()
    with torch.no_grad():
        y = model(x)
    return {"report": registration(model), "output": _output(y)}


class _count_constructions:
    """Counts the layers with weights of their own (nn.Module objects with parameters)
    constructed inside the `with` block: a layer built in forward. Containers made on the fly
    (a slice of a ModuleList or Sequential is a new ModuleList) hold none and do not count."""

    def __enter__(self):
        self.count = 0
        self._created: list[nn.Module] = []
        self._init = nn.Module.__init__
        created = self._created

        def counting(module_self, *args, **kwargs):
            created.append(module_self)
            self._init(module_self, *args, **kwargs)

        # The count is the point: every module constructed inside the block (restored on exit).
        nn.Module.__init__ = counting  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc):
        nn.Module.__init__ = self._init  # type: ignore[method-assign]
        self.count = sum(1 for m in self._created if getattr(m, "_parameters", None))
        self._created.clear()
        return False


def _graph_leaves(y: torch.Tensor) -> list[torch.Tensor]:
    """Every tensor whose gradient autograd accumulates (an AccumulateGrad node) from y."""
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


def gradients(module, cls: str, args: list, seed: int, x: torch.Tensor, upstream: torch.Tensor,
              *, init: dict | None = None, mode: str = "train", input_grad: bool = False,
              assign: dict | None = None, assign_by_size: list | None = None) -> dict:
    """One forward in `mode` and a backward of sum(output * upstream): the graph audit (every
    leaf reached from the output, whether it is one of model.parameters()), and the gradient
    of every parameter (and of x when `input_grad`)."""
    model = _build(module, cls, args, seed, init)
    missing = _assign(model, assign, assign_by_size, None)
    model.train(mode == "train")
    x = x.clone().requires_grad_(input_grad)
    torch.manual_seed(seed + 1)
    created = _count_constructions()
    with created:
        y = model(x)
    params = list(model.parameters())
    names = _first_names(model)
    record: dict[str, Any] = {"missing": missing, "output": _output(y), "leaves": [],
                              "tracks_grad": isinstance(y, torch.Tensor) and y.requires_grad,
                              "grads": [], "x_grad": None,
                              "modules_created_in_forward": created.count,
                              **unregistered_attributes(model)}
    if not record["tracks_grad"]:
        return record
    for leaf in _graph_leaves(y):
        if leaf is x:
            continue
        record["leaves"].append({"shape": list(leaf.shape),
                                 "registered": any(leaf is p for p in params),
                                 "name": names.get(id(leaf))})
    (y * upstream).sum().backward()
    record["grads"] = [{"name": n, "shape": list(p.shape),
                        "grad": None if p.grad is None else _value(p.grad)}
                       for n, p in model.named_parameters()]
    if input_grad and x.grad is not None:
        record["x_grad"] = _value(x.grad)
    return record


# --------------------------------------------------------------------------- test models


class Stacked(nn.Module):
    """Nested containers, and a parameter of the model itself (in no child module)."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(5, 7), nn.ReLU(),
                                   nn.Sequential(nn.Linear(7, 4), nn.Tanh(), nn.Linear(4, 3)))
        self.out = nn.Linear(3, 2, bias=False)
        self.scale = nn.Parameter(torch.ones(3))


class Frozen(nn.Module):
    """A frozen first layer and a frozen bias further on."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(6, 8)
        self.rest = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        self.first.requires_grad_(False)
        self.rest[2].bias.requires_grad_(False)


class Shared(nn.Module):
    """A tied weight (one Parameter in two layers) and one layer registered twice."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 6)
        self.mid = nn.Linear(6, 3)
        self.unembed = nn.Linear(6, 6)
        self.unembed.weight = self.embed.weight
        self.mid_again = self.mid


class SharedFrozen(Shared):
    """Shared, with the tied weight frozen and another layer partly frozen."""

    def __init__(self):
        super().__init__()
        self.embed.weight.requires_grad_(False)
        self.mid.bias.requires_grad_(False)
        self.extra = nn.Linear(3, 5)


class WithBuffers(nn.Module):
    """BatchNorm's buffers (running_mean, running_var, num_batches_tracked) and one of its own."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
        self.register_buffer("scale", torch.ones(7))


class HeadNet(nn.Module):
    """A stem (frozen or not), a body and a head called `head`."""

    def __init__(self, frozen_stem: bool = True):
        super().__init__()
        self.stem = nn.Linear(5, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU())
        self.head = nn.Linear(6, 4)
        self.stem.requires_grad_(not frozen_stem)

    def forward(self, x):
        return self.head(self.body(torch.relu(self.stem(x))))


class NestedHeadNet(nn.Module):
    """A nested head `classifier` with a frozen parameter inside, and a sibling whose name
    starts with the head's name (`classifier_norm`) that is not part of the head."""

    def __init__(self):
        super().__init__()
        self.classifier_norm = nn.LayerNorm(8)
        self.stem = nn.Linear(4, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.classifier = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
        self.stem.requires_grad_(False)
        self.classifier[0].bias.requires_grad_(False)


class TiedHeadNet(nn.Module):
    """The head's weight is the encoder's weight (as in a language model with tied
    embeddings), registered under the encoder first."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 6)
        self.body = nn.Linear(6, 6)
        self.head = nn.Linear(6, 6)
        self.head.weight = self.encoder.weight


class FineTuneNet(nn.Module):
    """A frozen feature extractor, a trainable middle layer and a head called `fc`."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(5, 8), nn.ReLU())
        self.mid = nn.Linear(8, 6)
        self.fc = nn.Linear(6, 10)
        self.features.requires_grad_(False)

    def forward(self, x):
        return self.fc(torch.relu(self.mid(self.features(x))))


CASES = {"stacked": Stacked, "frozen": Frozen, "shared": Shared, "shared_frozen": SharedFrozen,
         "with_buffers": WithBuffers, "head_net": HeadNet,
         "open_head_net": lambda: HeadNet(frozen_stem=False), "nested_head_net": NestedHeadNet,
         "tied_head_net": TiedHeadNet, "fine_tune_net": FineTuneNet,
         "no_parameters": lambda: nn.Sequential(nn.ReLU(), nn.Flatten()),
         "all_frozen": lambda: nn.Linear(3, 2).requires_grad_(False)}


def build_case(case: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return CASES[case]()


# --------------------------------------------------------------------------- function probes


def count_cases(module, cases: list) -> list:
    """count_parameters on each [case, trainable_only] (None: the argument left out)."""
    values = []
    for case, trainable_only in cases:
        model = build_case(case)
        if trainable_only is None:
            values.append(module.count_parameters(model))
        else:
            values.append(module.count_parameters(model, trainable_only=trainable_only))
    return values


def _param_list(params: Any, names: dict[int, str], old: dict[int, str]) -> dict:
    """A group's params as names; tensors not in the model are described instead."""
    if isinstance(params, torch.Tensor):
        kind, items = "tensor", [params]
    elif isinstance(params, (set, frozenset)):
        return {"kind": "set", "names": [], "foreign": []}
    else:
        kind = type(params).__name__
        try:
            items = list(params)
        except TypeError:
            return {"kind": kind, "names": [], "foreign": ["not iterable"]}
    out, foreign = [], []
    for p in items:
        if isinstance(p, torch.Tensor) and id(p) in names:
            out.append(names[id(p)])
        elif isinstance(p, torch.Tensor) and id(p) in old:
            foreign.append(f"{old[id(p)]} of the old head")
        else:
            foreign.append(f"a {type(p).__name__} of shape {tuple(p.shape)} that is not in the "
                           "model" if isinstance(p, torch.Tensor) else type(p).__name__)
    return {"kind": kind, "names": out, "foreign": foreign}


def _lr(value: Any) -> float | str | None:
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None if value is None else repr(value)[:60]


def groups_case(module, case: str, head: str, base_lr: float, head_lr: float) -> dict:
    """param_groups on a test model: each group's parameters as names, its lr, whether
    torch.optim.SGD accepts the groups, and requires_grad of every parameter afterwards."""
    model = build_case(case)
    names = _first_names(model)
    groups = module.param_groups(model, head, base_lr, head_lr)
    record: dict[str, Any] = {"type": type(groups).__name__, "groups": [], "sgd_error": None,
                              "requires_grad": {n: bool(p.requires_grad)
                                                for n, p in model.named_parameters()}}
    if not isinstance(groups, (list, tuple)):
        return record
    usable = []
    for g in groups:
        if not isinstance(g, dict):
            record["groups"].append({"type": type(g).__name__})
            continue
        params = g.get("params")
        listed = params if isinstance(params, (torch.Tensor, set, frozenset)) else (
            list(params) if params is not None and not isinstance(params, (str, bytes)) else params)
        entry = _param_list(listed, names, {}) if params is not None else {
            "kind": "missing", "names": [], "foreign": []}
        entry.update(type="dict", keys=sorted(str(k) for k in g), lr=_lr(g.get("lr")))
        record["groups"].append(entry)
        usable.append({**g, "params": listed})
    try:
        torch.optim.SGD(usable, lr=1e-3)
    except Exception as exc:  # noqa: BLE001 - recorded: the check explains it
        record["sgd_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return record


def head_case(module, case: str, head: str, num_classes: int, lr: float, x: torch.Tensor,
              seed: int) -> dict:
    """replace_head on a test model, then one training step with the optimizer it returned:
    the new head, the optimizer's type and groups (as parameter names), and every parameter's
    value before and after the step and its gradient."""
    model = build_case(case)
    old_head = getattr(model, head)
    old = {id(p): f"{head}.{n}" for n, p in old_head.named_parameters()}
    torch.manual_seed(seed)
    opt = module.replace_head(model, head, num_classes, lr)
    new_head = getattr(model, head, None)
    names = _first_names(model)
    record: dict[str, Any] = {
        "optimizer_type": f"{type(opt).__module__}.{type(opt).__qualname__}",
        "is_sgd": isinstance(opt, torch.optim.SGD),
        "head": {"type": type(new_head).__name__, "is_old_object": new_head is old_head,
                 "in_features": getattr(new_head, "in_features", None),
                 "out_features": getattr(new_head, "out_features", None)},
        "parameters": [{"name": n, "shape": list(p.shape), "requires_grad": bool(p.requires_grad)}
                       for n, p in model.named_parameters()],
        "groups": [], "before": {}, "after": {}, "grad": {}, "step_error": None,
    }
    if not isinstance(opt, torch.optim.Optimizer):
        return record
    for g in opt.param_groups:
        entry = _param_list(g["params"], names, old)
        entry["lr"] = _lr(g.get("lr"))
        record["groups"].append(entry)
    record["before"] = {n: _value(p) for n, p in model.named_parameters()}
    try:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    except Exception as exc:  # noqa: BLE001 - recorded: the check explains it
        record["step_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return record
    record["after"] = {n: _value(p) for n, p in model.named_parameters()}
    record["grad"] = {n: None if p.grad is None else _value(p.grad)
                      for n, p in model.named_parameters()}
    return record
