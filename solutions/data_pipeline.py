"""The data pipeline, from arrays to batches: reference solution.

Its contract: CURRICULUM.md, `data_pipeline`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Subset, WeightedRandomSampler, get_worker_info


class ArrayDataset(Dataset):
    def __init__(self, features, labels):
        # Converted once: an item is then a row of these tensors, not a copy of the array.
        self.features = torch.as_tensor(features, dtype=torch.float32)
        self.labels = torch.as_tensor(labels, dtype=torch.int64)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.features[index], self.labels[index]


def pad_collate(batch):
    sequences = [torch.as_tensor(seq, dtype=torch.float32) for seq, _ in batch]
    lengths = torch.tensor([len(seq) for seq in sequences], dtype=torch.int64)
    padded = torch.zeros(len(sequences), int(lengths.max()), sequences[0].shape[1])
    for i, seq in enumerate(sequences):
        padded[i, :len(seq)] = seq
    labels = torch.tensor([int(label) for _, label in batch], dtype=torch.int64)
    return padded, lengths, labels


def masked_mean(values, lengths):
    steps = torch.arange(values.shape[1])
    mask = steps[None, :] < lengths[:, None]
    return values[mask].sum() / mask.sum()


def split_indices(n, n_val, seed):
    order = np.random.default_rng(seed).permutation(n)
    return order[n_val:], order[:n_val]


def make_loaders(dataset, train_idx, val_idx, batch_size, seed):
    generator = torch.Generator().manual_seed(seed)
    train = DataLoader(Subset(dataset, list(train_idx)), batch_size=batch_size, shuffle=True,
                       generator=generator)
    val = DataLoader(Subset(dataset, list(val_idx)), batch_size=batch_size, shuffle=False)
    return train, val


def standardize_splits(features, train_idx, val_idx):
    train, val = features[train_idx], features[val_idx]
    mean, std = train.mean(axis=0), train.std(axis=0)
    return (train - mean) / std, (val - mean) / std


def seed_worker(worker_id):
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def make_worker_loader(dataset, batch_size, num_workers, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      worker_init_fn=seed_worker,
                      generator=torch.Generator().manual_seed(seed))


def balanced_sampler(labels):
    labels = np.asarray(labels)
    counts = np.bincount(labels)
    weights = 1.0 / counts[labels]
    return WeightedRandomSampler(torch.as_tensor(weights, dtype=torch.float64),
                                 num_samples=len(labels), replacement=True)
