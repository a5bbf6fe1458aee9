"""Inputs and answer keys of the visible `data_pipeline` checks (a helper module, imported by
plain name; it ships with them, so it holds no hidden check's input).

Every input is seeded. The answer keys are torch's and numpy's own operations on the same
inputs, computed in the grader.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence


def dataset_case(seed: int = 0, n: int = 10, shape: tuple[int, ...] = (3,),
                 label_dtype=np.int64, feature_dtype=np.float64):
    """Features (n, *shape) of `feature_dtype` and labels (n,) in 0..3 of `label_dtype`."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, *shape)).astype(feature_dtype)
    labels = rng.integers(0, 4, size=n).astype(label_dtype)
    return features, labels


def sequences(seed: int, lengths: list[int], dim: int, labels: list[int]) -> list[tuple]:
    """A batch as a Dataset yields it: (sequence float32 (L_i, dim), label int64 0-dim) pairs."""
    rng = np.random.default_rng(seed)
    return [(torch.tensor(rng.normal(size=(length, dim)), dtype=torch.float32),
             torch.tensor(label, dtype=torch.int64)) for length, label in zip(lengths, labels)]


def padded_key(batch: list[tuple]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What pad_collate returns for `batch`: torch's pad_sequence is the answer key."""
    seqs = [torch.as_tensor(s, dtype=torch.float32) for s, _ in batch]
    return (pad_sequence(seqs, batch_first=True, padding_value=0.0),
            torch.tensor([s.shape[0] for s in seqs], dtype=torch.int64),
            torch.tensor([int(y) for _, y in batch], dtype=torch.int64))


def position_values(seed: int, lengths: list[int], width: int, pad: float | None) -> torch.Tensor:
    """Per-position values (B, width) for masked_mean: random where t < length, `pad` after
    (None: random values there too, as a model's outputs at padded steps would be)."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 3.0, size=(len(lengths), width))
    if pad is not None:
        for b, length in enumerate(lengths):
            values[b, length:] = pad
    return torch.tensor(values, dtype=torch.float32)


def masked_mean_key(values: torch.Tensor, lengths: list[int]) -> float:
    """Every valid position weighs the same: the sum over them over their number."""
    total = sum(float(values[b, :length].double().sum()) for b, length in enumerate(lengths))
    return total / sum(lengths)


def two_populations(seed: int, n: int, dim: int, shift: float) -> np.ndarray:
    """Features whose rows from n // 2 on are shifted by `shift` and scaled by 3: statistics
    fitted on other rows than the training ones are visibly different."""
    rng = np.random.default_rng(seed)
    x = rng.normal(loc=2.0, scale=[0.5 + k for k in range(dim)], size=(n, dim))
    x[n // 2:] = 3.0 * x[n // 2:] + shift
    return x


def standardized_key(features: np.ndarray, train_idx, val_idx):
    """The training rows' per-column mean and (ddof=0) standard deviation, applied to both."""
    rows = features[np.asarray(train_idx)]
    centre, spread = rows.mean(axis=0), rows.std(axis=0)
    return ((features[np.asarray(train_idx)] - centre) / spread,
            (features[np.asarray(val_idx)] - centre) / spread)


# split and loaders
SPLIT_CASE = {"n": 20, "n_val": 5, "seed": 0}
LOADER_CASE = {"n": 23, "val_idx": [21, 3, 8, 14, 0, 17], "batch_size": 4}

# standardize_splits: the second half of the rows differs, the validation rows come from both
STANDARDIZE_CASE = {"seed": 3, "n": 24, "dim": 3, "shift": 4.0,
                    "train_idx": [0, 2, 3, 5, 7, 8, 9, 11, 12, 14, 16, 19, 20, 22],
                    "val_idx": [1, 4, 6, 10, 13, 15, 17, 18, 21, 23]}

# balanced_sampler: 3 classes of 60, 25 and 5 samples, shuffled
def imbalanced_labels(seed: int, counts: list[int]) -> np.ndarray:
    labels = np.concatenate([np.full(c, k, dtype=np.int64) for k, c in enumerate(counts)])
    return np.random.default_rng(seed).permutation(labels)
