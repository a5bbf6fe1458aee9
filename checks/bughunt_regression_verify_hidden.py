"""Verifiers only the hidden checks of the bug hunt `bughunt_regression` (bughunt/regression.py)
use, beside the shared ones of `bughunt_common.py`. Never shipped (a `_hidden` module:
`checks/README.md`)."""

from __future__ import annotations

from functools import lru_cache

import torch
from torch.utils.data import DataLoader, TensorDataset

from bughunt_common import quiet, reference


@lru_cache(maxsize=16)
def reference_curve(lr: float) -> tuple[float, ...]:
    """The fixed script's training loss per epoch, trained at `lr` (grader side)."""
    ref = reference("regression")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        X, y = ref.make_data(0)
        X_train, y_train, X_val, y_val = ref.split_by_date(X, y)
        scaler = ref.Standardizer().fit(X_train)
        train = DataLoader(TensorDataset(scaler.transform(X_train), y_train),
                           batch_size=ref.BATCH_SIZE, shuffle=True)
        val = DataLoader(TensorDataset(scaler.transform(X_val), y_val), batch_size=256)
        model = ref.PriceNet(X.shape[1], ref.HIDDEN)
        history = quiet(ref.train, model, train, val, ref.mse_loss, lr=lr, epochs=ref.EPOCHS)
    return tuple(float(v) for v in history["train_loss"])
