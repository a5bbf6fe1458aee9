"""What a bug-hunt script's `run(seed)` returns, as plain data: for the *visible* bug-hunt checks.

Runs inside the worker. It calls the script's entry point once, as a student would from the
command line, and describes what came back: the keys of the returned dict, what kind of object
each value is, every number of the history (Python numbers and one-element tensors alike: the
visible checks do not judge how a number is stored), and the shape of what the returned model
computes on a batch the check hands in. It ships with the student release: it holds no
reference values and knows nothing of the faults a script may hold.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from grader.probes.bughunt_e2e import Watcher

MAX_HISTORY = 1000  # entries described per history list (a script trains for tens of epochs)


def describe_number(value: Any) -> dict:
    """{"kind": "number" | "tensor" | "other", "value": float or "nan"/"inf"/"-inf" (numbers and
    one-element tensors), "finite": bool}; "type" for anything else."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return {"kind": "other", "type": f"tensor of shape {tuple(value.shape)}"}
        number, kind = float(value.detach().reshape(-1)[0]), "tensor"
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number, kind = float(value), "number"
    elif hasattr(value, "item") and getattr(value, "size", None) == 1:  # a numpy scalar
        try:
            number, kind = float(value.item()), "number"
        except (TypeError, ValueError):
            return {"kind": "other", "type": type(value).__name__}
    else:
        return {"kind": "other", "type": type(value).__name__}
    finite = math.isfinite(number)
    return {"kind": kind, "value": number if finite else str(number), "finite": finite}


def describe_history(history: Any) -> dict:
    """{"type": type name, "lists": {key: [described numbers] or None (not a list)}}."""
    if not isinstance(history, dict):
        return {"type": type(history).__name__, "lists": {}}
    lists: dict[str, list | None] = {}
    for key, items in history.items():
        if isinstance(items, (list, tuple)):
            lists[str(key)] = [describe_number(v) for v in items[:MAX_HISTORY]]
        else:
            lists[str(key)] = None
    return {"type": "dict", "lists": lists}


def outputs_of(model: Any, x: torch.Tensor) -> dict:
    """The shapes of what `model(x)` returns in eval mode without gradients: {"shapes": [..]}
    (one per tensor of a tuple or list), or {"error": text}."""
    if not isinstance(model, nn.Module):
        return {"error": f"not an nn.Module but {type(model).__name__}"}
    try:
        model.eval()
        with torch.no_grad():
            out = model(x)
    except Exception as exc:  # noqa: BLE001 - what the student's model raised is the record
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    parts = list(out) if isinstance(out, (tuple, list)) else [out]
    return {"shapes": [list(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__
                       for p in parts]}


def run_report(module, *, seed: int = 0, x: torch.Tensor | None = None,
               watch: bool = False, data: str | None = None) -> dict:
    """Call `module.run(seed=seed)` and describe its result. An exception `run` raises
    propagates (the check shows it as the student's error). With `watch`, the script's `train`
    is watched during the run and the report holds, under "end_to_end", what
    `grader.probes.bughunt_e2e` records of it (the hidden end-to-end checks read the same run,
    so that it runs once per submission); `data` names the script's data function, whose
    first result the record keeps."""
    if watch:
        with Watcher(module, data=data) as watcher:
            result = module.run(seed=seed)
    else:
        result = module.run(seed=seed)
    report = _describe(module, result, x)
    if watch:
        report["end_to_end"] = watcher.record(result, seed)
    return report


def _describe(module, result: Any, x: torch.Tensor | None) -> dict:
    report: dict = {"type": type(result).__name__, "keys": [], "values": {},
                    "epochs": getattr(module, "EPOCHS", None)}
    if not isinstance(report["epochs"], int) or isinstance(report["epochs"], bool):
        report["epochs"] = None
    if not isinstance(result, dict):
        return report
    report["keys"] = [str(k) for k in result]
    report["values"] = {str(k): ("nn.Module" if isinstance(v, nn.Module) else type(v).__name__)
                        for k, v in result.items()}
    report["history"] = describe_history(result.get("history"))
    if x is not None and "model" in result:
        report["outputs"] = outputs_of(result["model"], x)
    return report
