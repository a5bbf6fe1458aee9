"""Verifiers of the `data_pipeline` checks (visible and hidden): each runs one case, through
`sub.call` for plain functions or through a probe (`probes/data_pipeline.py`) for the
live objects (a Dataset, DataLoaders, a Sampler), and judges the record in the grader. Shipped
with the visible checks; it holds no hidden check's inputs.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from data_pipeline_cases import masked_mean_key, padded_key, standardized_key
from grader import expect_array, expect_type, fail, format_call, short
from grader.checking.student import StudentRaised

DATASET_HINT = ("convert once in __init__ (torch.as_tensor(features, dtype=torch.float32), "
                "torch.as_tensor(labels, dtype=torch.int64)) and return (features[i], "
                "labels[i]) from __getitem__.")
LABEL_HINT = ("class labels are indices for nn.CrossEntropyLoss: int64 (torch.long), never "
              "float.")
COLLATE_HINT = ("lengths = [len(seq) for seq, _ in batch]; a zero tensor (B, max(lengths), D) "
                "filled row by row (or pad_sequence(..., batch_first=True)); labels with "
                "torch.tensor([...], dtype=torch.int64); keep the batch's order.")
MASK_HINT = ("mask = torch.arange(T)[None, :] < lengths[:, None]; values[mask].sum() / "
             "mask.sum(): padded positions must not count, neither in the sum nor in the count.")
SPLIT_HINT = ("order = np.random.default_rng(seed).permutation(n); val = order[:n_val], train "
              "= order[n_val:].")
LOADER_HINT = ("DataLoader(Subset(dataset, train_idx), batch_size, shuffle=True, generator="
               "torch.Generator().manual_seed(seed)) and DataLoader(Subset(dataset, val_idx), "
               "batch_size, shuffle=False).")
STANDARDIZE_HINT = ("mean and std (ddof=0) of features[train_idx] along axis 0, then (x - mean) "
                    "/ std for both splits; never statistics of the validation rows or of all "
                    "rows.")
WORKER_HINT = ("in seed_worker: info = torch.utils.data.get_worker_info(); info.dataset.rng = "
               "np.random.default_rng(info.seed); and pass worker_init_fn=seed_worker and "
               "generator=torch.Generator().manual_seed(seed) to the DataLoader.")
SAMPLER_HINT = ("weights = 1 / count of the sample's class, one weight per sample; "
                "WeightedRandomSampler(weights, num_samples=len(labels), replacement=True).")


def _pair(value, *, call: str, what: str, size: int = 2) -> list:
    if not isinstance(value, (tuple, list)) or len(value) != size:
        fail(f"{call} returned {short(value)}; expected {what}.", call=call, expected=what,
             got=short(value))
    return list(value)


def watched_call(sub, function: str, *args, call: str, rng: bool = False):
    """`function(*args)` in the worker, watched (`grader/probes/watch.py`): fails if it changed
    an input it was given (values, dtype, shape, requires_grad; numpy arrays and tensors alike)
    and, with `rng`, if it moved or reseeded a global random generator. Returns its result."""
    if not sub.has(function):
        sub.call(function, *args)  # fails with the usual "defines no ..." message
    record = sub.probe("watch:call_watched", label=call, function=function, args=list(args))
    if record["changed_inputs"]:
        fail(f"{call} changed its input: {'; '.join(record['changed_inputs'])}. A function must "
             "leave the arrays and tensors it is given as they were (they are the caller's "
             "data).", call=call, expected="inputs unchanged", got="inputs modified",
             hint="x.masked_fill_(...), x.zero_(), x[...] = ..., x.mul_(...) write into the "
                  "caller's tensor; x.masked_fill(...), torch.where(...), x.clone() make a "
                  "new one.", evidence={"changed_inputs": record["changed_inputs"]})
    if rng and record["changed_rng"]:
        fail(f"{call} changed the state of the global random generator "
             f"({', '.join(record['changed_rng'])}): it must draw from a generator of its own "
             "and leave the global random state as it was (reseeding it resets the caller's "
             "randomness at every call).", call=call, expected="global random state unchanged",
             got=f"{', '.join(record['changed_rng'])} moved",
             hint="np.random.default_rng(seed) or torch.Generator().manual_seed(seed), never "
                  "np.random.seed / torch.manual_seed / random.seed.")
    return record["value"]


def inputs_untouched(changed: list[str], *, call: str, hint: str) -> None:
    """`changed`: what a probe saw the student's code change in the inputs it was given
    (`watch.unchanged_inputs`)."""
    if changed:
        fail(f"{call} changed its input: {'; '.join(changed)}. A function must leave the arrays "
             "and tensors it is given as they were (they are the caller's data).", call=call,
             expected="inputs unchanged", got="inputs modified", hint=hint,
             evidence={"changed_inputs": changed})


def global_rng_untouched(changed: list[str], *, call: str, hint: str) -> None:
    """`changed`: the global generators a probe saw the call move (`watch.changed_rng`)."""
    if changed:
        fail(f"{call} changed the state of the global random generator ({', '.join(changed)}): "
             "it must take its randomness from the seeded generator it is given and leave the "
             "global random state as it was (reseeding it resets the caller's randomness).",
             call=call, expected="global random state unchanged",
             got=f"{', '.join(changed)} moved", hint=hint)


def _label_dtype(got, *, call: str, what: str) -> None:
    """A float tensor of labels is the catalogued fault `float-labels`."""
    if isinstance(got, torch.Tensor) and got.is_floating_point():
        fail(f"{call} returned {what} of dtype {got.dtype}; class labels must be int64 "
             "(torch.long).", call=call, expected="torch.int64", got=str(got.dtype),
             hint=LABEL_HINT, fault="float-labels")


# --------------------------------------------------------------------------- ArrayDataset


def verify_dataset(sub, features: np.ndarray, labels: np.ndarray, batch_size: int) -> None:
    """len, every item's (float32 features, int64 0-dim label), and default-collated batches."""
    n = len(labels)
    built = f"ArrayDataset(<{features.dtype} array of shape {features.shape}>, " \
            f"<{labels.dtype} labels of shape {labels.shape}>)"
    record = sub.probe("data_pipeline:dataset_items", label=built, features=features,
                       labels=labels, indices=list(range(n)), batch_size=batch_size)
    inputs_untouched(record["changed_inputs"], call=built, hint=DATASET_HINT)
    if record["len"] != n or type(record["len"]) is not int:
        fail(f"len({built}) returned {short(record['len'])}; expected {n}, the number of "
             "samples.", call=f"len({built})", expected=str(n), got=short(record["len"]),
             hint=DATASET_HINT)
    for i, item in enumerate(record["items"]):
        call = f"{built}[{i}]"
        x, y = _pair(item, call=call, what="a pair (features, label)")
        expect_array(x, torch.tensor(features[i], dtype=torch.float32), call=call + "[0]",
                     rtol=0.0, hint=DATASET_HINT)
        _label_dtype(y, call=call, what="a label")
        expect_array(y, torch.tensor(int(labels[i]), dtype=torch.int64), call=call + "[1]",
                     hint="the label is a 0-dim int64 tensor, torch.tensor(3), so that a "
                          "DataLoader stacks the labels of a batch into shape (B,).")
    if record["collate_error"]:
        fail(f"DataLoader({built}, batch_size={batch_size}) failed to make batches: "
             f"{record['collate_error']}", call=built, hint=DATASET_HINT)
    for b, batch in enumerate(record["batches"]):
        rows = slice(b * batch_size, (b + 1) * batch_size)
        call = f"batch {b} of DataLoader({built}, batch_size={batch_size})"
        x, y = _pair(batch, call=call, what="a pair (features, labels)")
        expect_array(x, torch.tensor(features[rows], dtype=torch.float32), call=call + "[0]",
                     rtol=0.0, hint=DATASET_HINT)
        expect_array(y, torch.tensor(labels[rows], dtype=torch.int64), call=call + "[1]",
                     hint=DATASET_HINT)


def verify_item_values(sub, features: np.ndarray, labels: np.ndarray) -> None:
    """Item i of ArrayDataset holds row i and label i, in whatever dtype and label shape
    (`verify_dataset` asks for those): for checks of another property of the dataset, which
    an item that is not the row asked for would have too."""
    built = f"ArrayDataset(<array of shape {features.shape}>, labels)"
    record = sub.probe("data_pipeline:dataset_items", label=built, features=features,
                       labels=labels, indices=list(range(len(labels))), batch_size=len(labels))
    for i, item in enumerate(record["items"]):
        call = f"{built}[{i}]"
        x, y = _pair(item, call=call, what="a pair (features, label)")
        expect_array(torch.as_tensor(x), torch.tensor(features[i]), call=call + "[0]",
                     rtol=1e-6, check_dtype=False, hint=DATASET_HINT)
        expect_array(torch.as_tensor(y).reshape(-1), torch.tensor([int(labels[i])]),
                     call=call + "[1]", check_dtype=False, hint=DATASET_HINT)


# --------------------------------------------------------------------------- pad_collate


def verify_collate(sub, batch: list[tuple], *, batch_of_one: bool = False) -> None:
    call = format_call("pad_collate", (batch,))
    try:
        got = watched_call(sub, "pad_collate", batch, call=call)
    except StudentRaised as exc:
        if batch_of_one and exc.reason != "not_implemented":
            fail(f"{exc}\nIt failed on a batch of one sample.", call=call, hint=COLLATE_HINT,
                 fault="collate-breaks-on-batch-of-one")
        raise
    padded, lengths, labels = padded_key(batch)
    got = _pair(got, call=call, what="a tuple (padded, lengths, labels)", size=3)
    shaped = [g for g in got if isinstance(g, torch.Tensor)]
    if batch_of_one and len(shaped) == 3 and (
            tuple(shaped[0].shape) != tuple(padded.shape) or shaped[1].dim() != 1
            or shaped[2].dim() != 1):
        fail(f"{call} returned shapes {tuple(shaped[0].shape)}, {tuple(shaped[1].shape)}, "
             f"{tuple(shaped[2].shape)} for a batch of one; expected {tuple(padded.shape)}, "
             f"{tuple(lengths.shape)}, {tuple(labels.shape)}: the batch dimension was lost.",
             call=call, hint="never squeeze() a batch: a batch of one keeps its batch "
                             "dimension of size 1.", fault="collate-breaks-on-batch-of-one")
    _label_dtype(got[2], call=call, what="labels")
    expect_array(got[0], padded, call=call + "[0] (padded)", rtol=0.0, hint=COLLATE_HINT)
    expect_array(got[1], lengths, call=call + "[1] (lengths)", hint=COLLATE_HINT)
    expect_array(got[2], labels, call=call + "[2] (labels)", hint=COLLATE_HINT)


# --------------------------------------------------------------------------- masked_mean


def verify_masked_mean(sub, values: torch.Tensor, lengths: list[int], *,
                       padding_counts: bool = False) -> None:
    """With `padding_counts`, the function is called a second time with other values at the
    padded positions: a result that changes is the catalogued fault `padding-in-loss`."""
    lengths_t = torch.tensor(lengths, dtype=torch.int64)
    call = format_call("masked_mean", (values, lengths_t))
    got = watched_call(sub, "masked_mean", values, lengths_t, call=call)
    expect_type(got, torch.Tensor, call=call, what="a 0-dim tensor (a loss to call backward on)",
                hint=MASK_HINT)
    want = masked_mean_key(values, lengths)
    leaked = got.dim() == 0 and got.is_floating_point() and \
        abs(float(got) - float(values.double().mean())) < 1e-5 * abs(want) < abs(float(got) - want)
    if got.dim() == 0 and got.is_floating_point() and padding_counts and not leaked:
        other = values.clone()
        for b, length in enumerate(lengths):
            other[b, length:] += 10.0
        again = watched_call(sub, "masked_mean", other, lengths_t, call=call)
        leaked = isinstance(again, torch.Tensor) and again.dim() == 0 and \
            abs(float(again) - float(got)) > 1e-5 * abs(want)
    if leaked:
        fail(f"{call} returned {float(got):.6g}; expected {want:.6g}, the mean over the valid "
             "positions only: the padded positions were counted (the result changes with "
             "what they hold, or with their number).", call=call, expected=f"{want:.6g}",
             got=f"{float(got):.6g}", hint=MASK_HINT, fault="padding-in-loss")
    # Measured: float32 sums of these sizes are within 2e-7 of the float64 key; 1e-5 is wide.
    expect_array(got, torch.tensor(want, dtype=values.dtype), call=call, rtol=1e-5, atol=1e-6,
                 hint=MASK_HINT)


def verify_masked_mean_grad(sub, values: torch.Tensor, lengths: list[int]) -> None:
    """masked_mean(values, lengths).backward() reaches `values`: its gradient is
    1 / sum(lengths) at every valid position and 0 at the padded ones."""
    lengths_t = torch.tensor(lengths, dtype=torch.int64)
    call = format_call("masked_mean", (values, lengths_t))
    record = sub.probe("data_pipeline:masked_mean_grad", label=call, values=values,
                       lengths=lengths_t)
    if not record["differentiable"]:
        fail(f"{call} returned {record['returned']}, which autograd cannot differentiate back "
             "to `values` (computed under torch.no_grad(), from values.detach() or .item(), "
             "or rebuilt with torch.tensor(...)): a loss must carry its graph.", call=call,
             expected="a 0-dim tensor with a grad_fn", got=record["returned"], hint=MASK_HINT)
    mask = torch.arange(values.shape[1])[None, :] < lengths_t[:, None]
    want = mask.to(values.dtype) / float(sum(lengths))
    grad = record["grad"]
    if isinstance(grad, torch.Tensor) and grad.shape == mask.shape and \
            bool((grad[~mask] != 0).any()):
        fail(f"the gradient of {call} with respect to values is not zero at padded positions "
             f"({short(grad)}): the padding counts in the loss, and training would push on it.",
             call=call, hint=MASK_HINT, fault="padding-in-loss")
    expect_array(record["grad"], want, call=f"the gradient of {call} with respect to values",
                 rtol=1e-5, atol=1e-7, hint=MASK_HINT)


# --------------------------------------------------------------------------- split_indices


def as_indices(value, *, call: str, what: str) -> list[int]:
    """A 1-D integer numpy array or tensor as a list of ints. The contract asks for arrays (a
    tensor passes too); a list does not index a numpy array row-wise the same way, and does
    not offer the array's methods a caller will use, so it fails."""
    if isinstance(value, torch.Tensor):
        value = value.numpy()
    if isinstance(value, list):
        fail(f"{call} returned a Python list for {what}; expected a 1-D integer numpy array "
             "(np.asarray(indices) makes one).", call=call, expected="a 1-D integer array",
             got=short(value), hint=SPLIT_HINT)
    if not isinstance(value, np.ndarray) or value.ndim != 1 or \
            not np.issubdtype(value.dtype, np.integer):
        fail(f"{call} returned {short(value)} for {what}; expected a 1-D array of integer "
             "indices.", call=call, expected="a 1-D integer array", got=short(value),
             hint=SPLIT_HINT)
    return [int(v) for v in value]


def split_of(sub, n: int, n_val: int, seed: int) -> tuple[list[int], list[int], str]:
    """The split, checked as a partition: disjoint, covering range(n), n_val in validation."""
    call = format_call("split_indices", (n, n_val, seed))
    got = _pair(watched_call(sub, "split_indices", n, n_val, seed, call=call, rng=True),
                call=call, what="a pair (train_idx, val_idx)")
    train = as_indices(got[0], call=call, what="train_idx")
    val = as_indices(got[1], call=call, what="val_idx")
    both = sorted(set(train) & set(val))
    if both:
        fail(f"{call}: indices {both[:8]} are in both train_idx and val_idx; a sample belongs "
             "to one split only.", call=call, hint=SPLIT_HINT)
    if len(val) != n_val or len(train) != n - n_val:
        fail(f"{call} returned {len(train)} training and {len(val)} validation indices; "
             f"expected {n - n_val} and {n_val}.", call=call, hint=SPLIT_HINT)
    if sorted(train + val) != list(range(n)):
        fail(f"{call}: train_idx and val_idx together are not 0..{n - 1}, each once.",
             call=call, hint=SPLIT_HINT)
    return train, val, call


# --------------------------------------------------------------------------- make_loaders


def loaders_record(sub, n: int, val_idx: list[int], batch_size: int, seeds: list[int],
                   epochs: int) -> tuple[list[int], list[dict], str]:
    train_idx = [i for i in range(n) if i not in set(val_idx)]
    call = (f"make_loaders(<dataset of {n} samples>, <{len(train_idx)} train_idx>, "
            f"val_idx={val_idx}, batch_size={batch_size}, seed=...)")
    runs = sub.probe("data_pipeline:loaders_run", label=call, n=n, train_idx=train_idx,
                     val_idx=val_idx, batch_size=batch_size, seeds=seeds, epochs=epochs)
    for run in runs:
        inputs_untouched(run["changed_inputs"], call=call, hint=LOADER_HINT)
    return train_idx, runs, call


def verify_epoch_covers(batches: list[list[int]], wanted: list[int], batch_size: int, *,
                        call: str, which: str) -> list[int]:
    """One epoch of a loader: batches of batch_size (the last may be short) holding every sample
    of `wanted` exactly once. Returns the order the samples came in."""
    order = [i for batch in batches for i in batch]
    foreign = sorted(set(order) - set(wanted))
    if foreign:
        other = "validation" if which == "training" else "training"
        fail(f"{call}: the {which} loader yielded samples {foreign[:8]} of the {other} split; "
             "no sample may be in both.", call=call, hint=LOADER_HINT)
    if sorted(order) != sorted(wanted):
        missing = sorted(set(wanted) - set(order))
        fail(f"{call}: one epoch of the {which} loader yielded {len(order)} samples; expected "
             f"each of the {len(wanted)} {which} samples once"
             + (f" (missing: {missing[:8]})." if missing else "."), call=call, hint=LOADER_HINT)
    sizes = [len(b) for b in batches]
    full, rest = divmod(len(wanted), batch_size)
    expected = [batch_size] * full + ([rest] if rest else [])
    if sizes != expected:
        fail(f"{call}: the {which} loader made batches of sizes {sizes}; expected {expected}: "
             f"batches of batch_size={batch_size}, the last one smaller (never dropped, never "
             "one batch of the whole split).", call=call, hint=LOADER_HINT)
    return order


# --------------------------------------------------------------------------- standardize


def verify_standardize(sub, features: np.ndarray, train_idx: list[int], val_idx: list[int],
                       *, shared: bool = False) -> None:
    call = format_call("standardize_splits", (features, train_idx, val_idx))
    arg = sub.shared(features, name="features") if shared else features
    got = _pair(watched_call(sub, "standardize_splits", arg, np.asarray(train_idx),
                             np.asarray(val_idx), call=call),
                call=call, what="a pair (train_x, val_x)")
    want_train, want_val = standardized_key(features, train_idx, val_idx)
    for value, want, which, rows in ((got[0], want_train, "train_x", train_idx),
                                     (got[1], want_val, "val_x", val_idx)):
        expect_type(value, np.ndarray, call=call, what=f"a numpy array for {which}")
        if not np.issubdtype(value.dtype, np.floating) or value.shape != want.shape:
            expect_array(value, want, call=f"{call}[{which}]", check_dtype=False)
        if not np.allclose(value, want, rtol=1e-5, atol=1e-5):
            fault = _fitted_elsewhere(features, train_idx, val_idx, value, rows)
            # float32 results are within 1e-6 of the key; 1e-5 is wide.
            if fault:
                fail(f"{call} returned {which} standardised with the statistics of {fault}; "
                     "expected those of the training rows only.", call=f"{call}[{which}]",
                     hint=STANDARDIZE_HINT, fault="normaliser-fit-on-validation")
            expect_array(value.astype(np.float64), want, call=f"{call}[{which}]", rtol=1e-5,
                         atol=1e-5, hint=STANDARDIZE_HINT)
        # The contract: at least features' precision (float32 features may give float64).
        if np.finfo(value.dtype).bits < np.finfo(features.dtype).bits:
            fail(f"{call} returned {which} of dtype {value.dtype}; expected {features.dtype} "
                 "(at least the precision of features: standardising must not lose digits).",
                 call=f"{call}[{which}]", expected=str(features.dtype), got=str(value.dtype),
                 hint=STANDARDIZE_HINT)


def _fitted_elsewhere(features, train_idx, val_idx, value, rows) -> str | None:
    """Which other rows' statistics (ddof 0 or 1) standardised `value`, if any."""
    for name, fit in (("all the rows", slice(None)), ("the validation rows", val_idx),
                      ("the rows of the split itself", rows)):
        if fit is rows and rows is train_idx:
            continue
        for ddof in (0, 1):
            data = features[fit]
            want = (features[rows] - data.mean(axis=0)) / data.std(axis=0, ddof=ddof)
            if np.allclose(value, want, rtol=1e-4, atol=1e-4):
                return name
    return None


# --------------------------------------------------------------------------- worker seeding


def worker_record(sub, *, n: int, batch_size: int, num_workers: int, seeds: list[int],
                  epochs: int):
    call = (f"make_worker_loader(<dataset of {n} samples with a random augmentation>, "
            f"batch_size={batch_size}, num_workers={num_workers}, seed=...)")
    record = sub.probe("data_pipeline:worker_run", label=call, timeout=60, n=n,
                       batch_size=batch_size, num_workers=num_workers, seeds=seeds,
                       epochs=epochs)
    if record.get("returned_the_dataset"):
        fail(f"{call} returned the dataset it was given, not a DataLoader over it.", call=call,
             expected="a DataLoader", got="the dataset",
             hint="return DataLoader(dataset, batch_size, shuffle=True, num_workers=num_workers, "
                  "worker_init_fn=seed_worker, generator=...).")
    if record["start_method"] not in (None, "fork"):
        fail(f"{call} returned a DataLoader whose workers start with "
             f"multiprocessing_context={record['start_method']!r}; the grader runs DataLoader "
             "workers with the default start method (fork) only: it loads your file as a module "
             "that a newly started interpreter cannot import, so spawned workers could not "
             "unpickle your seed_worker or the grader's dataset. Leave multiprocessing_context "
             "at its default, as the contract says.", call=call,
             expected="the default start method (fork)", got=record["start_method"],
             hint="DataLoader(dataset, batch_size, shuffle=True, num_workers=num_workers, "
                  "worker_init_fn=seed_worker, generator=...), no multiprocessing_context.")
    global_rng_untouched(record["changed_rng"], call=call, hint=WORKER_HINT)
    return record["runs"], call


def verify_worker_epoch(rows: list[list[float]], n: int, num_workers: int, *, call: str) -> None:
    """One epoch: every sample once, shuffled, loaded by `num_workers` workers, whose draws
    from the dataset's generator do not repeat one another."""
    order = [int(r[0]) for r in rows]
    if sorted(order) != list(range(n)):
        fail(f"{call}: an epoch yielded samples {order}; expected each of the {n} samples once.",
             call=call, hint=WORKER_HINT)
    if order == list(range(n)):
        fail(f"{call}: an epoch yielded the samples in their order 0..{n - 1}; the loader must "
             "shuffle.", call=call, hint=WORKER_HINT)
    workers = sorted({int(r[1]) for r in rows})
    if workers != list(range(num_workers)):
        fail(f"{call}: the samples were loaded by workers {workers} (-1: the main process); "
             f"expected the {num_workers} workers 0..{num_workers - 1}.", call=call,
             hint=WORKER_HINT)
    repeated = _repeats([r[2] for r in rows])
    if repeated:
        fail(f"{call}: different workers drew the same random augmentation ({repeated} draws "
             "repeat another worker's): each worker copies the dataset, generator state "
             "included, so each must reseed it.", call=call, hint=WORKER_HINT,
             fault="worker-augmentation-repeats")


def _repeats(values: list[float]) -> int:
    return sum(c - 1 for c in Counter(values).values() if c > 1)


def verify_worker_runs(runs, n: int, num_workers: int, *, call: str, same: tuple[int, int],
                       other: int | None = None) -> None:
    """Every epoch as above; epochs of one run draw different augmentations; runs `same` (the
    same seed) are identical; run `other` (another seed) differs."""
    for run in runs:
        for rows in run:
            verify_worker_epoch(rows, n, num_workers, call=call)
        if len(run) > 1:
            repeated = _repeats([r[2] for rows in run for r in rows])
            if repeated:
                fail(f"{call}: epoch after epoch the workers drew the same random augmentation "
                     f"({repeated} draws repeat an earlier epoch's): seed each worker's "
                     "generator from the worker's own seed, which changes every epoch.",
                     call=call, hint=WORKER_HINT, fault="worker-augmentation-repeats")
    a, b = same
    if runs[a] != runs[b]:
        fail(f"{call}: two loaders made with the same seed gave different epochs (order or "
             "augmentation); the same seed must give the same batches.", call=call,
             hint=WORKER_HINT)
    if other is not None and [[r[0] for r in rows] for rows in runs[other]] == \
            [[r[0] for r in rows] for rows in runs[a]]:
        fail(f"{call}: loaders made with different seeds gave the same order; the seed must "
             "drive the shuffling.", call=call, hint=WORKER_HINT)


# --------------------------------------------------------------------------- balanced_sampler


def sampler_record(sub, labels: np.ndarray, epochs: int, seed: int = 0):
    call = f"balanced_sampler(<{len(labels)} labels, counts {np.bincount(labels).tolist()}>)"
    return sub.probe("data_pipeline:sampler_draws", label=call, labels=labels, epochs=epochs,
                     seed=seed), call


def verify_balance(record: dict, labels: np.ndarray, *, call: str, tolerance: float) -> None:
    """Each epoch draws len(labels) valid indices; over all epochs each class gets about
    1 / classes of the draws."""
    n = len(labels)
    inputs_untouched(record["changed_inputs"], call=call, hint=SAMPLER_HINT)
    if record["len"] != n:
        fail(f"len({call}) returned {short(record['len'])}; expected {n}: an epoch draws as "
             "many samples as there are labels.", call=call, hint=SAMPLER_HINT)
    draws = [i for epoch in record["draws"] for i in epoch]
    if any(len(epoch) != n for epoch in record["draws"]):
        fail(f"{call}: an epoch yielded {len(record['draws'][0])} indices; expected {n}.",
             call=call, hint=SAMPLER_HINT)
    if any(not 0 <= i < n for i in draws):
        fail(f"{call} yielded indices outside 0..{n - 1}.", call=call, hint=SAMPLER_HINT)
    # Two independent epochs of n >= 48 draws coincide with probability below 1e-30.
    epochs = record["draws"]
    if any(a == b for a, b in zip(epochs, epochs[1:])):
        fail(f"{call} yields the same indices every epoch: each epoch (each pass over the "
             "sampler) must draw anew, or training sees one fixed resample of the data.",
             call=call, hint=SAMPLER_HINT + " A sampler draws in __iter__, not once in "
                                            "__init__ (and is not a list).")
    classes = int(labels.max()) + 1
    shares = np.bincount(labels[np.asarray(draws)], minlength=classes) / len(draws)
    if np.abs(shares - 1 / classes).max() > tolerance:
        fail(f"{call}: over {len(draws)} draws the classes got shares "
             f"{[round(float(s), 3) for s in shares]}; expected about {1 / classes:.3f} each.",
             call=call, hint=SAMPLER_HINT)


# --------------------------------------------------------------------------- randomness
# A shuffled epoch is a random permutation. Read as positions in a base order (train_idx, or
# the epoch before), the m - 1 steps from each sample to the next (mod m) then take many
# sizes; an order that rotates, reverses, strides or rotates the previous epoch repeats one
# step size for nearly all of them (a rotation: every step is +1). Measured on 2,000,000
# random permutations each (2026-12-07): P(some step size repeats >= 10 times) = 1.5e-6
# (m = 17, the visible case) and 2.0e-6 (m = 23, the hidden one), falling about tenfold per
# further repeat, none at 12 or more. At 13 a comparison raises a false alarm with probability
# about 4e-9; a check makes at most 12 comparisons: below 1e-7 per grading.
REPEATED_STEP_LIMIT = 13


def repeated_step(order: list[int], base: list[int]) -> int:
    """How often the most common step size occurs among the consecutive samples of `order`,
    as positions in `base` mod len(base)."""
    where = {v: i for i, v in enumerate(base)}
    m = len(base)
    steps = Counter((where[b] - where[a]) % m for a, b in zip(order, order[1:]))
    return max(steps.values()) if steps else 0


def verify_random_orders(orders: list[list[int]], train_idx: list[int], *, call: str) -> None:
    """Each epoch of one loader (`orders`) is a new random order: none in train_idx's order,
    no two alike, none a structured rearrangement (rotation, reversal, stride) of train_idx or
    of the epoch before (`REPEATED_STEP_LIMIT`)."""
    if any(o == train_idx for o in orders) or len({tuple(o) for o in orders}) < len(orders):
        fail(f"{call}: the training loader did not shuffle (an epoch in train_idx's order, or "
             "two epochs in the same order).", call=call, hint=LOADER_HINT,
             fault="no-shuffle-sorted-data")
    for k, order in enumerate(orders):
        for base, what in ((train_idx, "train_idx"),) + (
                ((orders[k - 1], f"epoch {k}"),) if k else ()):
            steps = repeated_step(order, base)
            if steps >= min(REPEATED_STEP_LIMIT, len(order) - 1):
                fail(f"{call}: epoch {k + 1} of the training loader is {what} rearranged by a "
                     f"fixed rule ({steps} of its {len(order) - 1} steps from one sample to "
                     f"the next skip the same number of places in {what}), not a random "
                     "order; a random shuffle repeats a step size a few times.", call=call,
                     hint=LOADER_HINT, fault="no-shuffle-sorted-data")


# split_indices draws the validation samples at random: over 20 seeds (n=40, n_val=10), the
# number of adjacent indices (i, i + 1) both in validation. Random draws: mean 45, sd 5.2
# (measured over 200,000 simulated sets of 20 splits, 2026-12-07: none outside [19, 68]); a
# block of rows gives 9 per split (180), evenly spaced indices 0. Outside [10, 100] fails:
# 6.7 sd or more from the mean, a false alarm rate far below 1e-9 (normal tail 2e-11).
ADJACENT_BOUNDS = (10, 100)


def verify_drawn_at_random(vals: list[list[int]], *, call: str) -> None:
    """The validation sets of many seeds (`vals`) look drawn at random: neither clumped into
    blocks nor evenly spaced (`ADJACENT_BOUNDS`)."""
    adjacent = sum(sum(1 for a, b in zip(sorted(v), sorted(v)[1:]) if b == a + 1)
                   for v in vals)
    low, high = ADJACENT_BOUNDS
    if not low <= adjacent <= high:
        kind = "blocks of neighbouring rows" if adjacent > high else "evenly spaced rows"
        fail(f"{call}: over {len(vals)} seeds the validation samples hold {adjacent} pairs of "
             f"neighbouring indices (random draws give about 45, between {low} and {high}): "
             f"they are {kind}, chosen by a rule, not drawn at random.", call=call,
             hint=SPLIT_HINT)

