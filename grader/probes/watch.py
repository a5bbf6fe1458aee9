"""Watching a call of student code, *inside the worker*: did it change the inputs it was given,
or the process's global random generators?

The grader's shared memory (`sub.shared`) sees an input's values change; it cannot see a
tensor's metadata change (dtype, shape, requires_grad: `x.data = ...`, `x.resize_(...)`,
`x.requires_grad_()`), which lives in the worker only, nor the state of the global generators.
`snapshot` copies the inputs before the call, `unchanged_inputs` compares them after it;
`global_rng_state` / `changed_rng` do the same for `random`, `np.random` and torch's default
generator. `call_watched` is the probe that does both around one call.

Records only: the check decides which changes its contract forbids.
"""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import torch

from grader.probes.recorders import describe_return

# Changes listed at most (a record stays small whatever the input's size).
MAX_CHANGES = 8


class _Copy:
    """An array or tensor input as it was: a private copy of its values, and its metadata."""

    def __init__(self, value: Any):
        self.is_tensor = isinstance(value, torch.Tensor)
        if self.is_tensor:
            self.values = value.detach().clone()
            self.requires_grad = bool(value.requires_grad)
        else:
            self.values = np.array(value, copy=True)
            self.requires_grad = False
        self.dtype = str(value.dtype)
        self.shape = tuple(value.shape)


def snapshot(value: Any) -> Any:
    """`value` (arguments: nested lists, tuples and dicts of arrays, tensors and scalars) with
    every array and tensor copied, every list and dict copied; anything else kept as is."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return _Copy(value)
    if isinstance(value, list):
        return [snapshot(v) for v in value]
    if isinstance(value, tuple):
        return tuple(snapshot(v) for v in value)
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    return value


def unchanged_inputs(before: Any, after: Any, name: str = "the input") -> list[str]:
    """What changed from `before` (a `snapshot`) to `after` (the same objects after the call),
    one text per changed array, tensor, list or dict ("argument 1[0][0]: its values changed
    ..."); [] when nothing did. Arrays and tensors: values (nan equals nan), dtype, shape and
    (tensors) requires_grad; lists and dicts: their length or keys."""
    changes: list[str] = []
    _compare(before, after, name, changes)
    return changes[:MAX_CHANGES]


def _compare(before: Any, after: Any, name: str, changes: list[str]) -> None:
    if len(changes) >= MAX_CHANGES:
        return
    if isinstance(before, _Copy):
        changes.extend(f"{name}: {what}" for what in _array_changes(before, after))
    elif isinstance(before, (list, tuple)):
        if not isinstance(after, (list, tuple)) or len(after) != len(before):
            changes.append(f"{name}: a {type(before).__name__} of {len(before)} items became "
                           f"{_kind(after)}")
            return
        for i, (b, a) in enumerate(zip(before, after)):
            _compare(b, a, f"{name}[{i}]", changes)
    elif isinstance(before, dict):
        if not isinstance(after, dict) or list(after) != list(before):
            changes.append(f"{name}: its keys changed")
            return
        for key in before:
            _compare(before[key], after[key], f"{name}[{key!r}]", changes)


def _kind(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def _array_changes(copy: _Copy, now: Any) -> list[str]:
    if isinstance(now, torch.Tensor) != copy.is_tensor or \
            not isinstance(now, (torch.Tensor, np.ndarray)):
        return [f"it was replaced by {_kind(now)}"]
    now = cast(Any, now)  # a tensor exactly when copy.is_tensor (checked above)
    found = []
    if str(now.dtype) != copy.dtype:
        found.append(f"its dtype went from {copy.dtype} to {now.dtype}")
    if tuple(now.shape) != copy.shape:
        found.append(f"its shape went from {copy.shape} to {tuple(now.shape)}")
    if copy.is_tensor and bool(now.requires_grad) != copy.requires_grad:
        found.append(f"its requires_grad went from {copy.requires_grad} to "
                     f"{bool(now.requires_grad)}")
    if not found:
        where = _first_difference(copy.values, now.detach() if copy.is_tensor else now)
        if where is not None:
            found.append(f"its values changed ({where})")
    return found


def _first_difference(old: Any, new: Any) -> str | None:
    """Where two arrays (or two tensors) of one dtype and shape first differ, nan equal to nan;
    None if nowhere."""
    try:
        a = old.numpy() if isinstance(old, torch.Tensor) else old
        b = new.numpy() if isinstance(new, torch.Tensor) else new
    except (TypeError, RuntimeError):  # dtypes numpy lacks (bfloat16): compare as float64
        a, b = old.double().numpy(), new.double().numpy()
    if a.dtype.kind in "fc":
        differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    elif a.dtype.kind in "biu":
        differ = a != b
    else:
        return None if a.tobytes() == b.tobytes() else "somewhere"
    if not differ.any():
        return None
    index = tuple(int(i) for i in np.argwhere(differ)[0])
    at = f"[{', '.join(map(str, index))}]" if index else ""
    return f"element {at or '()'} went from {a[index].item()!r} to {b[index].item()!r}"


# --------------------------------------------------------------------------- global generators


def global_rng_state() -> dict[str, Any]:
    """The states of Python's `random`, numpy's global generator and torch's default one."""
    return {"random": random.getstate(), "np.random": np.random.get_state(legacy=False),
            "torch": torch.get_rng_state()}


def changed_rng(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The names of the global generators whose state differs between the two records."""
    changed = []
    if before["random"] != after["random"]:
        changed.append("random")
    old, new = before["np.random"], after["np.random"]
    if old["state"]["key"].tobytes() != new["state"]["key"].tobytes() or \
            [old["state"]["pos"], old["has_gauss"], old["gauss"]] != \
            [new["state"]["pos"], new["has_gauss"], new["gauss"]]:
        changed.append("np.random")
    if not torch.equal(before["torch"], after["torch"]):
        changed.append("torch")
    return changed


def call_watched(module, *, function: str, args: list, kwargs: dict | None = None) -> dict:
    """Call `module.<function>(*args, **kwargs)`; record what it returned, the inputs it changed
    (`unchanged_inputs`, arguments named "argument 1", ..., keyword arguments by name) and the
    global generators it moved or reseeded (`changed_rng`)."""
    kwargs = kwargs or {}
    inputs = snapshot([list(args), dict(kwargs)])
    rng = global_rng_state()
    value = getattr(module, function)(*args, **kwargs)
    moved = changed_rng(rng, global_rng_state())
    changes = []
    for i, (old, now) in enumerate(zip(inputs[0], args)):
        changes += unchanged_inputs(old, now, f"argument {i + 1}")
    for key in kwargs:
        changes += unchanged_inputs(inputs[1][key], kwargs[key], key)
    return {"value": describe_return(value), "changed_inputs": changes[:MAX_CHANGES],
            "changed_rng": moved}
