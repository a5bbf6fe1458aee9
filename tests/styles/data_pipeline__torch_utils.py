"""data_pipeline with torch's utilities: a TensorDataset subclass, pad_sequence, random_split
over a range, Subset loaders with an explicit generator, torch statistics, info.seed, and
WeightedRandomSampler with class counts from np.unique."""

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import (DataLoader, Subset, TensorDataset, WeightedRandomSampler,
                              get_worker_info, random_split)


class ArrayDataset(TensorDataset):
    def __init__(self, features, labels):
        super().__init__(torch.tensor(features, dtype=torch.float32),
                         torch.tensor(labels).long())


def pad_collate(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    padded = pad_sequence([s.float() for s in seqs], batch_first=True)
    return padded, lengths, torch.as_tensor([int(y) for y in labels]).to(torch.int64)


def masked_mean(values, lengths):
    valid = torch.arange(values.size(1), device=values.device).expand_as(values) \
        < lengths.unsqueeze(-1)
    return torch.masked_select(values, valid).mean()


def split_indices(n, n_val, seed):
    train, val = random_split(range(n), [n - n_val, n_val],
                              generator=torch.Generator().manual_seed(seed))
    return np.array(list(train), dtype=np.int64), np.array(list(val), dtype=np.int64)


def make_loaders(dataset, train_idx, val_idx, batch_size, seed):
    g = torch.Generator().manual_seed(int(seed))
    return (DataLoader(Subset(dataset, train_idx), batch_size, True, generator=g),
            DataLoader(Subset(dataset, val_idx), batch_size))


def standardize_splits(features, train_idx, val_idx):
    x = torch.from_numpy(features)
    train = x[torch.as_tensor(train_idx)]
    mean, std = train.mean(dim=0), train.std(dim=0, unbiased=False)
    return (((train - mean) / std).numpy(),
            ((x[torch.as_tensor(val_idx)] - mean) / std).numpy())


def seed_worker(worker_id):
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed % 2**32)


def make_worker_loader(dataset, batch_size, num_workers, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      worker_init_fn=seed_worker,
                      generator=torch.Generator().manual_seed(seed))


def balanced_sampler(labels):
    classes, counts = np.unique(labels, return_counts=True)
    per_class = dict(zip(classes.tolist(), (1.0 / counts).tolist()))
    weights = [per_class[int(y)] for y in labels]
    return WeightedRandomSampler(weights, len(weights))
