"""Recorders any course's probes may use: run *inside the worker*, next to student code.

Generic instrumentation of a training step, for probes that build live objects and watch the
student's code use them: the mode of a module at every forward (`ModeRecorder`), every
`optimizer.step()` with the gradients that reached it (`StepAudit`), attributes a module keeps
out of `parameters()`' sight (`unregistered_attributes`), and what a call returned, as plain data
(`describe_return`). They observe; they hold no expected value and decide no verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
# Bound when the recorders are imported, before student code runs: a submission that replaces
# torch.is_grad_enabled cannot change what they read.
from torch import is_grad_enabled, nn


def mode_of(model: nn.Module) -> bool | None:
    """True if every module is in training mode, False if none is, None if mixed."""
    flags = {m.training for m in model.modules()}
    return flags.pop() if len(flags) == 1 else None


class ModeRecorder:
    """Records `[training, grad_enabled]` at every forward of `model` (`training` as `mode_of`)."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.forwards: list[list] = []
        self.handle = model.register_forward_pre_hook(self._record)

    def _record(self, module, args):
        self.forwards.append([mode_of(self.model), is_grad_enabled()])

    def remove(self) -> None:
        self.handle.remove()


class StepAudit:
    """Watches every `optimizer.step()`: a tensor hook on each parameter keeps the gradient of
    the newest `backward()`, and a step hook records, per step, the learning rate of the first
    group, `p.grad` of all parameters (flattened, zeros where None), the newest backward's
    gradient (flattened the same way) and how many backward passes ran since the last step.

    The hook runs right after the step (SGD and Adam leave `p.grad` as they found it), so that
    `optimizer.step(closure)`, whose backward runs inside the step, is audited like the rest."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer):
        self.params = list(model.parameters())
        self.newest: dict[int, torch.Tensor] = {}
        self.backwards = 0
        self.steps: list[dict] = []
        self.handles = [p.register_hook(self._grad_hook(i)) for i, p in enumerate(self.params)]
        self.handles.append(optimizer.register_step_post_hook(self._after_step))

    def _grad_hook(self, index: int):
        def hook(grad):
            if index == 0:
                self.backwards += 1
            self.newest[index] = grad.detach().clone()
        return hook

    def _flat(self, tensors) -> torch.Tensor:
        return torch.cat([(t if t is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                          for t, p in zip(tensors, self.params)])

    def _after_step(self, optimizer, args, kwargs):
        lr = optimizer.param_groups[0]["lr"]
        self.steps.append({
            "lr": float(lr),
            "grad": self._flat([p.grad for p in self.params]),
            "newest": self._flat([self.newest.get(i) for i in range(len(self.params))]),
            "grad_missing": sum(p.grad is None for p in self.params),
            "backwards": self.backwards,
        })
        self.backwards = 0

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def describe_return(value: Any) -> Any:
    """The returned value if it is plain data (a tensor is sent detached), else a description
    {"__unsupported__": type name} that the grader turns into a message."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, float):  # numpy float64 is a float subclass
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.generic) and type(value).__module__ == "numpy":
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    if type(value) is dict or isinstance(value, dict):
        return {str(k): describe_return(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(describe_return(v) for v in value)
    return {"__unsupported__": f"{type(value).__module__}.{type(value).__qualname__}"}


def state_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def audit_records(audit: StepAudit) -> list[dict]:
    return [dict(s) for s in audit.steps]


def unregistered_attributes(model: nn.Module) -> dict:
    """Attributes `parameters()` cannot see (for diagnoses): Python lists, tuples or dicts of
    modules ("module_lists"), and tensors that require grad without being parameters
    ("bare_tensors"), by dotted attribute name."""
    lists, bare = [], []
    for prefix, m in model.named_modules():
        for name, value in vars(m).items():
            if name.startswith("_"):
                continue
            full = f"{prefix}.{name}" if prefix else name
            items = value.values() if isinstance(value, dict) else value
            if isinstance(value, (list, tuple, dict)) and any(isinstance(v, nn.Module)
                                                              for v in items):
                lists.append(full)
            elif isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) \
                    and value.requires_grad:
                bare.append(full)
    return {"module_lists": lists, "bare_tensors": bare}
