"""data_pipeline written by hand: rows converted per item from numpy, a padded batch filled
with torch.where, a float mask, torch.randperm splits, index samplers instead of Subsets, a
Sampler of its own drawing with torch.multinomial."""

import numpy as np
import torch
from torch.utils.data import (DataLoader, Dataset, Sampler,
                              SubsetRandomSampler, get_worker_info)


class ArrayDataset(Dataset):
    def __init__(self, features, labels):
        self.features = np.asarray(features)
        self.labels = np.asarray(labels)

    def __len__(self):
        return self.labels.shape[0]

    def __getitem__(self, index):
        x = torch.from_numpy(np.array(self.features[index], dtype=np.float32))
        return x, torch.tensor(int(self.labels[index]), dtype=torch.long)


def pad_collate(batch):
    longest = max(seq.shape[0] for seq, _ in batch)
    dim = batch[0][0].shape[1]
    rows, lengths, labels = [], [], []
    for seq, label in batch:
        steps = torch.arange(longest)[:, None]
        grown = torch.cat([seq.float(), seq.new_zeros(longest - seq.shape[0], dim).float()])
        rows.append(torch.where(steps < seq.shape[0], grown, torch.zeros(())))
        lengths.append(seq.shape[0])
        labels.append(int(label))
    return torch.stack(rows), torch.tensor(lengths), torch.tensor(labels, dtype=torch.long)


def masked_mean(values, lengths):
    mask = (torch.arange(values.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).to(values.dtype)
    return (values * mask).sum() / mask.sum()


def split_indices(n, n_val, seed):
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).numpy()
    return order[n_val:].copy(), order[:n_val].copy()


def make_loaders(dataset, train_idx, val_idx, batch_size, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    train = DataLoader(dataset, batch_size=batch_size,
                       sampler=SubsetRandomSampler([int(i) for i in train_idx], generator=g))
    val = DataLoader(dataset, batch_sampler=[[int(i) for i in val_idx[k:k + batch_size]]
                                    for k in range(0, len(val_idx), batch_size)])
    return train, val


def standardize_splits(features, train_idx, val_idx):
    train = features[np.asarray(train_idx)]
    mean = train.sum(axis=0) / len(train)
    std = np.sqrt(((train - mean) ** 2).mean(axis=0))
    return (train - mean) / std, (features[np.asarray(val_idx)] - mean) / std


def seed_worker(worker_id):
    get_worker_info().dataset.rng = np.random.default_rng(torch.initial_seed())


def make_worker_loader(dataset, batch_size, num_workers, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return DataLoader(dataset, batch_size, shuffle=True, num_workers=num_workers,
                      worker_init_fn=seed_worker, generator=g)


class BalancedSampler(Sampler):
    def __init__(self, labels):
        labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        counts = torch.bincount(labels).double()
        self.weights = 1.0 / counts[labels]

    def __len__(self):
        return len(self.weights)

    def __iter__(self):
        drawn = torch.multinomial(self.weights, len(self.weights), replacement=True)
        return iter(drawn.tolist())


def balanced_sampler(labels):
    return BalancedSampler(labels)


