"""data_pipeline with other choices: labels kept as a LongTensor indexed per item, a collate
filling with index_put, a masked mean through torch.where and a count, a split that sorts its
halves, a generator-driven RandomSampler, persistent workers (each reseeded once: its epochs
go on from where the generator was), and a Sampler that draws a class then a sample."""

import numpy as np
import torch
from torch.utils.data import (DataLoader, Dataset, RandomSampler, Sampler, Subset,
                              get_worker_info)


class ArrayDataset(Dataset):
    def __init__(self, features, labels):
        self.features = torch.from_numpy(np.asarray(features)).to(torch.float32)
        self.labels = torch.LongTensor(np.asarray(labels, dtype=np.int64))

    def __len__(self):
        return self.features.shape[0]

    def __getitem__(self, index):
        return self.features[index].clone(), self.labels[index].clone()


def pad_collate(batch):
    lengths = torch.tensor([s.shape[0] for s, _ in batch], dtype=torch.int64)
    padded = batch[0][0].new_zeros((len(batch), int(lengths.max()), batch[0][0].shape[1]),
                                   dtype=torch.float32)
    for row, (seq, _) in enumerate(batch):
        padded[row].narrow(0, 0, seq.shape[0]).copy_(seq)
    labels = torch.zeros(len(batch), dtype=torch.int64)
    for row, (_, label) in enumerate(batch):
        labels[row] = int(label)
    return padded, lengths, labels


def masked_mean(values, lengths):
    t = torch.arange(values.shape[-1])
    valid = t.view(1, -1) < lengths.view(-1, 1)
    total = torch.where(valid, values, torch.zeros_like(values)).sum()
    return total / lengths.sum().to(values.dtype)


def split_indices(n, n_val, seed):
    shuffled = np.arange(n)
    np.random.default_rng(seed).shuffle(shuffled)
    return np.sort(shuffled[n_val:]), np.sort(shuffled[:n_val])


def make_loaders(dataset, train_idx, val_idx, batch_size, seed):
    train = Subset(dataset, list(map(int, train_idx)))
    sampler = RandomSampler(train, generator=torch.Generator().manual_seed(seed))
    return (DataLoader(train, batch_size=batch_size, sampler=sampler),
            DataLoader(Subset(dataset, list(map(int, val_idx))), batch_size=batch_size))


def standardize_splits(features, train_idx, val_idx):
    stats = features[list(train_idx)]
    mu = stats.mean(0)
    sigma = np.sqrt(stats.var(0))
    return (features[list(train_idx)] - mu) / sigma, (features[list(val_idx)] - mu) / sigma


def seed_worker(worker_id):
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def make_worker_loader(dataset, batch_size, num_workers, seed):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      worker_init_fn=seed_worker, generator=g,
                      persistent_workers=num_workers > 0)


class ClassThenSample(Sampler):
    """Draw a class uniformly, then one of its samples uniformly (with replacement)."""

    def __init__(self, labels):
        labels = np.asarray(labels)
        self.n = len(labels)
        self.members = [torch.from_numpy(np.flatnonzero(labels == c))
                        for c in range(int(labels.max()) + 1)]

    def __len__(self):
        return self.n

    def __iter__(self):
        classes = torch.randint(len(self.members), (self.n,))
        for c in classes.tolist():
            members = self.members[c]
            yield int(members[torch.randint(len(members), ())])


def balanced_sampler(labels):
    return ClassThenSample(labels)
