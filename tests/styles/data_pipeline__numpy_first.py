"""data_pipeline numpy first: float32 numpy arrays kept and wrapped per row, F.pad per
sequence, boolean indexing, rng.choice with setdiff1d, keepdims statistics, a generator seeded
from [worker_id, torch.initial_seed()], and per-sample weights through np.bincount."""

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset, WeightedRandomSampler, get_worker_info


class ArrayDataset(Dataset):
    def __init__(self, features, labels):
        self.x = np.ascontiguousarray(features, dtype=np.float32)
        self.y = np.asarray(labels).astype(np.int64)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return torch.from_numpy(self.x[index]), torch.tensor(self.y[index])


def pad_collate(batch):
    lengths = [seq.shape[0] for seq, _ in batch]
    longest = max(lengths)
    padded = torch.stack([F.pad(seq.float(), (0, 0, 0, longest - seq.shape[0]))
                          for seq, _ in batch])
    labels = torch.stack([torch.as_tensor(y, dtype=torch.int64) for _, y in batch])
    return padded, torch.LongTensor(lengths), labels


def masked_mean(values, lengths):
    mask = np.arange(values.shape[1])[None, :] < lengths.numpy()[:, None]
    return values[torch.from_numpy(mask)].mean()


def split_indices(n, n_val, seed):
    rng = np.random.default_rng(seed)
    val = rng.choice(n, size=n_val, replace=False)
    train = np.setdiff1d(np.arange(n), val)
    return train, val


def make_loaders(dataset, train_idx, val_idx, batch_size, seed):
    generator = torch.Generator()
    generator.manual_seed(seed)
    train = Subset(dataset, [int(i) for i in train_idx])
    val = Subset(dataset, [int(i) for i in val_idx])
    return (DataLoader(train, batch_size=batch_size, shuffle=True, generator=generator,
                       drop_last=False),
            DataLoader(val, batch_size=batch_size, shuffle=False, drop_last=False))


def standardize_splits(features, train_idx, val_idx):
    train = np.take(features, train_idx, axis=0)
    val = np.take(features, val_idx, axis=0)
    mean = np.mean(train, axis=0, keepdims=True)
    std = np.std(train, axis=0, keepdims=True)
    return (train - mean) / std, (val - mean) / std


def seed_worker(worker_id):
    dataset = get_worker_info().dataset
    dataset.rng = np.random.default_rng([worker_id, torch.initial_seed() % 2**32])


def make_worker_loader(dataset, batch_size, num_workers, seed):
    generator = torch.Generator()
    generator.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      worker_init_fn=seed_worker, generator=generator, persistent_workers=False)


def balanced_sampler(labels):
    labels = np.asarray(labels)
    weights = np.reciprocal(np.bincount(labels).astype(float))[labels]
    return WeightedRandomSampler(weights.tolist(), num_samples=labels.size, replacement=True)
