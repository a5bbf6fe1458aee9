"""Verifiers only the hidden checks of the bug hunt `bughunt_finetune` (bughunt/finetune.py) use,
beside the shared ones of `bughunt_common.py`. Never shipped (a `_hidden` module:
`checks/README.md`)."""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch.utils.data import DataLoader, TensorDataset

from bughunt_common import fail, quiet, reference
from bughunt_finetune_cases_hidden import SETUP_CALL, STEPS_CALL


def harness(record: dict) -> dict:
    steps = record.get("harness")
    if steps is None:
        fail(f"{STEPS_CALL}: run() did not hand train a model and a torch optimizer.",
             call=STEPS_CALL)
    if steps["error"]:
        fail(f"{STEPS_CALL}: the training steps raised {steps['error']}", call=STEPS_CALL)
    return steps


@lru_cache(maxsize=16)
def reference_curve(name: str, hyper: tuple) -> tuple[float, ...]:
    """The fixed script's fine-tuning loss per epoch with `torch.optim.<name>(**hyper)` over
    all trainable parameters (grader side)."""
    ref = reference("finetune")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        X, y, s = ref.make_task(0)
        train = DataLoader(TensorDataset(X[:320], y[:320], s[:320]), batch_size=ref.BATCH_SIZE,
                           shuffle=True)
        val = DataLoader(TensorDataset(X[320:], y[320:], s[320:]), batch_size=80)
        model = ref.adapt(ref.load_pretrained(0), ref.N_CLASSES)
        optimizer = getattr(torch.optim, name)(
            [p for p in model.parameters() if p.requires_grad], **dict(hyper))
        history = quiet(ref.train, model, train, val, optimizer, ref.EPOCHS)
    return tuple(float(v) for v in history["train_loss"])


def verify_group_rates(record: dict, evidence: dict) -> None:
    """make_optimizer's contract: the encoder's trainable parameters learn at
    ENCODER_LR_FACTOR times the heads' learning rate (per parameter, whatever the groups)."""
    factor = reference("finetune").ENCODER_LR_FACTOR
    trainable = {p["name"] for p in record["model"].get("parameters", []) if p["requires_grad"]}
    rates: dict[str, set] = {"encoder": set(), "heads": set()}
    for g in record["optimizer"].get("groups", []):
        lr = g["hyper"].get("lr")
        for n in g["names"]:
            if n in trainable:  # a frozen parameter's rate does not matter
                rates["encoder" if n.startswith("encoder.") else "heads"].add(lr)
    evidence["group_lrs"] = {k: sorted(v, key=str) for k, v in rates.items()}
    enc, heads = rates["encoder"], rates["heads"]
    if not enc or not heads:
        return  # a part missing from the optimizer: the freezing and head checks say so
    ok = (len(enc) == 1 and len(heads) == 1
          and all(isinstance(v, float) for v in enc | heads)
          and math.isclose(next(iter(enc)), factor * next(iter(heads)), rel_tol=1e-6))
    if not ok:
        fail(f"{SETUP_CALL}: the optimizer's learning rates are {sorted(enc, key=str)} for the "
             f"encoder and {sorted(heads, key=str)} for the heads; make_optimizer's contract "
             f"has the encoder learn at {factor:g} times the heads' rate.", call=SETUP_CALL,
             expected=f"encoder lr = {factor:g} x heads lr",
             got=f"encoder {sorted(enc, key=str)}, heads {sorted(heads, key=str)}")
