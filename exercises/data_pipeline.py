"""The data pipeline: from arrays to the batches a training loop eats.

A `Dataset` says what one sample is (`__len__`, `__getitem__`); a `DataLoader` draws samples
from it, in shuffled or fixed order, puts them into batches (its `collate_fn`) and can load them
in worker processes (`num_workers > 0`). Most training bugs that are not in the model are here,
and they rarely raise an error: a validation set that is shuffled, statistics computed on all
the data, float labels, padding counted in the loss, workers that all draw the same "random"
augmentation, a collate_fn that breaks on a batch of one. The grader checks each of them.

Conventions used throughout: features are float32 tensors; class labels are int64 (torch.long)
class indices, as nn.CrossEntropyLoss wants them; "a 1-D integer array" means a numpy array (a
tensor or a list of ints is accepted too) of indices into the data.

Fill in every function below. Each docstring is the contract the grader checks; run
`torchgrade check data_pipeline.py` to see how you are doing.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import (DataLoader, Dataset, Sampler, Subset, WeightedRandomSampler,
                              get_worker_info)


class ArrayDataset(Dataset):
    """A Dataset over a features array and a labels array.

    `features`: a numpy array of floats (any float dtype) of shape (N, ...), one row per
    sample; `labels`: a numpy array of integers (any integer dtype) of shape (N,).
    `len(dataset)` is N, and `dataset[i]` (i an int, 0 <= i < N) is the pair
    `(x, y)`: `x` a float32 tensor of shape features.shape[1:] holding features[i], `y` a
    0-dim int64 tensor holding labels[i] (0-dim, so that a DataLoader stacks the labels of a
    batch into shape (B,)). An item must cost the same whatever N: convert the whole arrays
    once in __init__ (or convert each item's own row in __getitem__), never the whole array at
    every item (with a million rows, that is a million times too slow).

    >>> dataset = ArrayDataset(np.zeros((5, 3)), np.array([0, 2, 1, 1, 0]))
    >>> len(dataset)
    5
    >>> dataset[1]
    (tensor([0., 0., 0.]), tensor(2))
    >>> x, y = next(iter(DataLoader(dataset, batch_size=4)))
    >>> x.shape, x.dtype, y
    (torch.Size([4, 3]), torch.float32, tensor([0, 2, 1, 1]))
    """

    def __init__(self, features, labels):
        # TODO
        raise NotImplementedError("ArrayDataset")

    def __len__(self):
        # TODO
        raise NotImplementedError("ArrayDataset")

    def __getitem__(self, index):
        # TODO
        raise NotImplementedError("ArrayDataset")


def pad_collate(batch):
    """A DataLoader's collate_fn for sequences of different lengths.

    `batch` is a list of B >= 1 pairs `(seq, label)`: `seq` a float32 tensor of shape (L_i, D)
    (L_i >= 1 steps of D features; D the same for all), `label` a 0-dim int64 tensor (or a
    Python int). Returns the tuple `(padded, lengths, labels)`:
    - `padded`: float32 tensor (B, L_max, D), L_max the longest L_i of this batch; row i holds
      seq i in its first L_i steps and zeros after them (padding at the end);
    - `lengths`: int64 tensor (B,), the L_i;
    - `labels`: int64 tensor (B,).
    Keep the batch's order (do not sort by length). A batch of one sample (the last batch of
    an epoch can be one) gives shapes (1, L_1, D), (1,), (1,).

    >>> batch = [(torch.ones(2, 1), torch.tensor(1)), (torch.ones(3, 1), torch.tensor(0))]
    >>> padded, lengths, labels = pad_collate(batch)
    >>> padded[:, :, 0]
    tensor([[1., 1., 0.],
            [1., 1., 1.]])
    >>> lengths, labels
    (tensor([2, 3]), tensor([1, 0]))
    """
    # TODO
    raise NotImplementedError("pad_collate")


def masked_mean(values, lengths):
    """The mean of `values` over the valid positions of a padded batch: a loss that padding
    does not change.

    `values`: float tensor (B, T), one value per position (say, the loss of each step);
    `lengths`: int64 tensor (B,), 1 <= lengths[b] <= T: positions t < lengths[b] of row b are
    valid, the others are padding and may hold any finite value (not only zeros). Returns a
    0-dim tensor (of values' dtype, differentiable: call backward on it, and the gradient
    reaches `values`): the sum of the valid values
    divided by the number of valid positions, sum(lengths). Every valid position weighs the
    same (a sequence of 4 steps counts 4 times as much as one of 1 step).

    >>> values = torch.tensor([[1.0, 3.0, 9.0], [5.0, 9.0, 9.0]])    # 9.0: padding
    >>> masked_mean(values, torch.tensor([2, 1]))                   # (1 + 3 + 5) / 3
    tensor(3.)
    """
    # TODO
    raise NotImplementedError("masked_mean")


def split_indices(n, n_val, seed):
    """A random, repeatable split of the samples 0..n-1 into training and validation.

    Returns `(train_idx, val_idx)`, two 1-D integer numpy arrays (int64 tensors pass too; Python
    lists do not): `val_idx` holds `n_val`
    indices, `train_idx` the other n - n_val; no index is in both, every index is in one.
    Which samples go to validation is drawn at random (the data may be sorted, by class or by
    date: the last n_val rows are no random sample) from a generator seeded with `seed`
    (np.random.default_rng(seed), or a torch.Generator), never from the global random state,
    which it leaves as it was (no np.random.seed: that would reset the caller's randomness):
    the same (n, n_val, seed) always give the same split, another seed another one.

    >>> train_idx, val_idx = split_indices(10, 3, seed=0)
    >>> len(train_idx), len(val_idx), sorted(np.concatenate([train_idx, val_idx]).tolist())
    (7, 3, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    >>> bool((split_indices(10, 3, seed=0)[1] == val_idx).all())
    True
    """
    # TODO
    raise NotImplementedError("split_indices")


def make_loaders(dataset, train_idx, val_idx, batch_size, seed):
    """The training and validation DataLoaders over two splits of `dataset`.

    `train_idx`, `val_idx`: 1-D integer arrays of indices into `dataset` (disjoint). Returns
    `(train_loader, val_loader)`:
    - `train_loader` yields every sample of train_idx once per epoch, in a new random order
      each epoch (shuffle), in batches of `batch_size` (the last may be smaller: do not drop
      it). Its shuffling comes from a torch.Generator seeded with `seed`
      (`generator=torch.Generator().manual_seed(seed)`), so that two loaders made with the same
      seed yield the same epochs whatever else used the global random state. make_loaders
      leaves the global random state as it was (no torch.manual_seed).
    - `val_loader` yields every sample of val_idx once per epoch, always in the order of
      val_idx (never shuffled: validation numbers must be comparable between epochs), in
      batches of `batch_size`, the last one included.
    No sample of one split may appear in the other's loader.

    >>> train_loader, val_loader = make_loaders(dataset, train_idx, val_idx, batch_size=32, seed=0)
    >>> [len(x) for x, y in val_loader]            # 70 validation samples
    [32, 32, 6]
    """
    # TODO
    raise NotImplementedError("make_loaders")


def standardize_splits(features, train_idx, val_idx):
    """Standardise the training and validation rows with the training rows' statistics.

    `features`: numpy float array (N, D); `train_idx`, `val_idx`: 1-D integer arrays. The mean
    and the standard deviation of each column are computed on the training rows only,
    features[train_idx] (np.std's default, ddof=0; no column is constant on them), then applied
    to both splits. Returns `(train_x, val_x)`: new float numpy arrays at least as precise as
    `features` (float64 features give float64; float32 ones float32 or float64),
    (features[train_idx] - mean) / std and (features[val_idx] - mean) / std, rows in the order
    of the index arrays. Statistics of all rows, or of the validation rows, let the validation
    data leak into training. `features` itself is left as it was.

    >>> features = np.array([[1.0], [3.0], [100.0]])
    >>> standardize_splits(features, np.array([0, 1]), np.array([2]))   # mean 2, std 1
    (array([[-1.], [ 1.]]), array([[98.]]))
    """
    # TODO
    raise NotImplementedError("standardize_splits")


def seed_worker(worker_id):
    """A DataLoader `worker_init_fn`: give each worker its own random augmentation.

    With `num_workers > 0`, each worker process gets a copy of the dataset. torch seeds each
    worker's torch, `random` and global numpy generators differently (from a base seed drawn
    anew every epoch, plus the worker's id: `get_worker_info().seed`), but it cannot reach a
    generator object the dataset holds: every worker would copy the same generator state, and
    every epoch would start again from it, so all draw the same "random" augmentation. The
    datasets of this exercise keep their generator in the attribute `rng` (a
    np.random.Generator). Called in the worker, seed_worker gives the worker's copy of the
    dataset (`get_worker_info().dataset`) a new generator seeded with that worker's seed:
    `np.random.default_rng(get_worker_info().seed)`.

    >>> loader = DataLoader(dataset, batch_size=8, num_workers=2, worker_init_fn=seed_worker)
    """
    # TODO
    raise NotImplementedError("seed_worker")


def make_worker_loader(dataset, batch_size, num_workers, seed):
    """A shuffling DataLoader over `dataset` with `num_workers` worker processes, reproducible:
    `worker_init_fn=seed_worker`, and `generator=torch.Generator().manual_seed(seed)` (the
    generator drives both the shuffling and the workers' base seed). Two loaders made with the
    same arguments yield identical epochs (order and augmentation) whatever else used the
    global random state; another seed gives other epochs; every epoch and every worker draws
    its own augmentation. Batches of `batch_size`, every sample once per epoch. It leaves the
    global random state as it was (no torch.manual_seed). Keep the workers' default start
    method (fork, on Linux): pass no `multiprocessing_context`, since the grader loads this
    file as a module that a newly started interpreter (spawn, forkserver) cannot import.

    >>> loader = make_worker_loader(dataset, batch_size=8, num_workers=2, seed=0)
    """
    # TODO
    raise NotImplementedError("make_worker_loader")


def balanced_sampler(labels):
    """A Sampler that draws every class about equally often, for imbalanced data.

    `labels`: 1-D integer numpy array (N,), classes 0..C-1, each present. Returns a Sampler (to
    pass as `DataLoader(dataset, sampler=...)`) whose every epoch yields N indices into
    0..N-1, drawn anew at every epoch (every pass over the sampler: not one fixed draw, and
    not a list), with replacement, sample i with probability proportional to 1 / (the number
    of samples of class labels[i]): over many draws each class gets about 1 / C of them, and
    every sample of a class is as likely as the others of its class.
    (`WeightedRandomSampler(weights, num_samples=N, replacement=True)` with one weight per
    sample does it; a Sampler of your own is fine too.)

    >>> sampler = balanced_sampler(np.array([0] * 90 + [1] * 10))
    >>> len(sampler)
    100
    >>> counts = np.bincount(labels[list(sampler)])       # about [50, 50]
    """
    # TODO
    raise NotImplementedError("balanced_sampler")
