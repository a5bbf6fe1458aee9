"""Instrumentation for `data_pipeline`: runs *inside the worker*, next to student code.

A Dataset, a DataLoader or a Sampler is a live object that cannot cross to the grader, so each
probe builds one with the student's code (on the grader's arrays, or on a dataset of the probe's
own whose items name their index), iterates it as training would, and returns plain records:
the items or batches it yielded, the indices a sampler drew, what the DataLoader's workers drew
from the dataset's random generator. Nothing here knows what the student's code should produce.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from grader.probes.recorders import describe_return
from grader.probes.watch import changed_rng, global_rng_state, snapshot, unchanged_inputs


def _plain_batch(batch):
    """A batch as plain data: tensors and arrays as they are, anything else named."""
    return describe_return(list(batch) if isinstance(batch, (list, tuple)) else batch)


def dataset_items(module, *, features: np.ndarray, labels: np.ndarray, indices: list[int],
                  batch_size: int) -> dict:
    """Build `ArrayDataset(features, labels)`; record its len, the items at `indices`, and the
    batches of a default DataLoader over it (no shuffling); and what it changed in the arrays
    it was given (`changed_inputs`)."""
    before = snapshot([features, labels])
    dataset = module.ArrayDataset(features, labels)
    items = [describe_return(dataset[i]) for i in indices]
    length = len(dataset)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
    try:
        batches = [_plain_batch(b) for b in loader]
        collate_error = None
    except Exception as exc:  # noqa: BLE001 - reported as a verdict, with its text
        batches, collate_error = [], f"{type(exc).__name__}: {exc}"[:500]
    changed = unchanged_inputs(before[0], features, "features") + \
        unchanged_inputs(before[1], labels, "labels")
    return {"len": describe_return(length), "items": items, "batches": batches,
            "collate_error": collate_error, "changed_inputs": changed}


def dataset_item_seconds(module, *, features: np.ndarray, labels: np.ndarray,
                         count: int) -> dict:
    """CPU seconds per item of `ArrayDataset(features, labels)` (built first, untimed), over
    `count` items spread over the dataset; and the same for a dataset of its first rows only
    (as many rows as `count`), for comparison."""
    out = {}
    for name, rows in (("large", len(features)), ("small", count)):
        dataset = module.ArrayDataset(features[:rows], labels[:rows])
        picks = np.linspace(0, rows - 1, count).astype(int).tolist()
        dataset[picks[0]]  # a first call may set up caches
        start = time.process_time()
        for i in picks:
            dataset[i]
        out[name] = (time.process_time() - start) / count
    return out


class IndexDataset(Dataset):
    """Item i is (tensor([i]), i % 3): a batch names the samples it holds."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        index = int(index)
        if not 0 <= index < self.n:  # as a list would: iterating it directly ends
            raise IndexError(f"index {index} out of range for {self.n} samples")
        return torch.tensor([index], dtype=torch.int64), index % 3


def _epoch(loader, n: int) -> list:
    """One pass over `loader`, its batches as they come, but never more than `n` + 1 of them
    (each holds a sample at least, so that many is already too many for `n` samples): an
    endless one (a sampler that cycles, a loader over an iterable without end) is cut short,
    and the check says it yielded too much, not only that its deadline passed."""
    return list(itertools.islice(loader, n + 1))


def _move_global_generators(k: int) -> None:
    """Draw from the global generators between making a loader and iterating it, a different
    amount each run: a loader whose randomness comes from the global state (torch.manual_seed
    at construction) then differs between runs; one with its own seeded generator does not."""
    torch.rand(1 + 3 * k)
    np.random.random(1 + 3 * k)


def _ids(loader, epochs: int, n: int) -> list[list[list[int]]]:
    """For every epoch, the sample ids of every batch, in order (`_epoch`: of `n` samples)."""
    return [[[int(v) for v in batch[0].reshape(-1)] for batch in _epoch(loader, n)]
            for _ in range(epochs)]


def loaders_run(module, *, n: int, train_idx: list[int], val_idx: list[int], batch_size: int,
                seeds: list[int], epochs: int) -> list[dict]:
    """For each seed (the global torch generator moved on first, so that a loader that ignores
    `seed` shuffles differently each time): `make_loaders(IndexDataset(n), train_idx, val_idx,
    batch_size, seed)`, then `epochs` epochs of each loader, as sample ids per batch; and the
    global generators that make_loaders itself moved or reseeded (`changed_rng`)."""
    runs = []
    for k, seed in enumerate(seeds):
        torch.manual_seed(1000 + 17 * k)
        np.random.seed(2000 + 17 * k)
        indices = [np.asarray(train_idx, dtype=np.int64), np.asarray(val_idx, dtype=np.int64)]
        given = snapshot(indices)
        before = global_rng_state()
        train, val = module.make_loaders(IndexDataset(n), *indices, batch_size, seed)
        moved = changed_rng(before, global_rng_state())
        _move_global_generators(k)
        runs.append({"train": _ids(train, epochs, n), "val": _ids(val, epochs, n),
                     "changed_rng": moved,
                     "changed_inputs": unchanged_inputs(given[0], indices[0], "train_idx")
                     + unchanged_inputs(given[1], indices[1], "val_idx")})
    return runs


class NoisyDataset(Dataset):
    """A dataset with a random augmentation drawn from a generator of its own (`self.rng`, as
    the contract describes): item i is [i, worker id (-1 outside a worker), noise]."""

    def __init__(self, n: int, seed: int):
        self.n = n
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= int(index) < self.n:
            raise IndexError(f"index {index} out of range for {self.n} samples")
        info = get_worker_info()
        worker = -1 if info is None else info.id
        return torch.tensor([float(index), float(worker), float(self.rng.random())],
                            dtype=torch.float64)


def _start_method(loader) -> str | None:
    """The start method a DataLoader's workers would use, if it names one (None: the default)."""
    context = getattr(loader, "multiprocessing_context", None)
    if context is None:
        return None
    method = context.get_start_method() if hasattr(context, "get_start_method") else context
    return str(method)


def worker_run(module, *, n: int, batch_size: int, num_workers: int, seeds: list[int],
               epochs: int) -> dict:
    """For each seed (global generators moved on first): `make_worker_loader(NoisyDataset(n),
    batch_size, num_workers, seed)`, iterated `epochs` times; every epoch's items as
    [index, worker id, noise] rows, in the order they came (`runs`). Also the global
    generators make_worker_loader moved (`changed_rng`), and the start method a loader names
    (`start_method`, None for the default): one other than fork is not iterated, since its
    workers could not import the student's module; nor is the dataset itself, returned in
    place of a loader (`returned_the_dataset`)."""
    runs, moved = [], []
    for k, seed in enumerate(seeds):
        torch.manual_seed(3000 + 17 * k)
        np.random.seed(4000 + 17 * k)
        before = global_rng_state()
        dataset = NoisyDataset(n, 1234)
        loader = module.make_worker_loader(dataset, batch_size, num_workers, seed)
        moved += [name for name in changed_rng(before, global_rng_state()) if name not in moved]
        if loader is dataset:  # iterating it would say less: items one by one, in order
            return {"runs": [], "changed_rng": moved, "start_method": None,
                    "returned_the_dataset": True}
        method = _start_method(loader)
        if method not in (None, "fork"):
            return {"runs": [], "changed_rng": moved, "start_method": method}
        _move_global_generators(k)
        runs.append([[row for batch in _epoch(loader, n)
                      for row in batch.reshape(-1, 3).tolist()] for _ in range(epochs)])
    return {"runs": runs, "changed_rng": moved, "start_method": None}


def masked_mean_grad(module, *, values: torch.Tensor, lengths: torch.Tensor) -> dict:
    """`masked_mean(v, lengths)` for `v` a leaf copy of `values` that requires grad: whether
    the result can be differentiated back to `v` and, if so, `v.grad` after its backward."""
    leaf = values.detach().clone().requires_grad_(True)
    out = module.masked_mean(leaf, lengths)
    returned = type(out).__name__
    if isinstance(out, torch.Tensor):
        returned = f"a tensor of shape {tuple(out.shape)}, requires_grad={out.requires_grad}"
    usable = isinstance(out, torch.Tensor) and out.requires_grad and out.numel() == 1
    if usable:
        out.sum().backward()
    grad = leaf.grad.detach().clone() if leaf.grad is not None else None
    return {"differentiable": bool(usable and grad is not None), "returned": returned,
            "grad": grad}


def sampler_draws(module, *, labels: np.ndarray, epochs: int, seed: int) -> dict:
    """`balanced_sampler(labels)`: its len, and the indices it yields in `epochs` passes (the
    global torch generator seeded first; at most ten times the samples each); and what it
    changed in `labels`."""
    given = snapshot(labels)
    sampler = module.balanced_sampler(labels)
    torch.manual_seed(seed)
    # Ten times the samples at most: one that never ends is cut short, and is told so.
    draws = [[int(i) for i in itertools.islice(sampler, 10 * len(labels))]
             for _ in range(epochs)]
    return {"len": describe_return(len(sampler)), "draws": draws,
            "changed_inputs": unchanged_inputs(given, labels, "labels")}
