"""Hidden checks for `data_pipeline`: the pitfalls (float labels, a whole-array copy per item,
a collate that breaks on a batch of one, padding counted in the loss, a split that is not
random, a shuffled validation loader, a training loader not driven by its seed, statistics
from other rows than the training ones, workers repeating their augmentation) and harder
inputs."""

from __future__ import annotations

import numpy as np

from data_pipeline_cases import (dataset_case, imbalanced_labels, position_values, sequences,
                                 two_populations)
from data_pipeline_cases_hidden import (LOADER_CASE, RANDOM_SPLITS, SAMPLER_COUNTS,
                                        SPLIT_CASES, STANDARDIZE_CASE, TIMING_ITEMS,
                                        timing_arrays)
from data_pipeline_verify import (DATASET_HINT, LOADER_HINT, SAMPLER_HINT, SPLIT_HINT,
                                  global_rng_untouched, loaders_record, sampler_record, split_of,
                                  verify_balance, verify_collate, verify_dataset,
                                  verify_item_values,
                                  verify_drawn_at_random, verify_epoch_covers,
                                  verify_masked_mean, verify_random_orders,
                                  verify_masked_mean_grad, verify_standardize,
                                  verify_worker_runs, worker_record)
from grader import check, fail


@check(points=2, targets="ArrayDataset")
def test_dataset_other_dtypes_and_shapes(sub):
    """ArrayDataset: float32 features of any shape, int64 labels from any integer dtype"""
    for seed, shape, label_dtype, feature_dtype in ((5, (2, 3), np.int32, np.float32),
                                                    (6, (1,), np.uint8, np.float64)):
        features, labels = dataset_case(seed=seed, n=7, shape=shape, label_dtype=label_dtype,
                                        feature_dtype=feature_dtype)
        verify_dataset(sub, features, labels, batch_size=3)


@check(points=2, targets="ArrayDataset", timeout=30)
def test_dataset_items_do_not_copy_the_array(sub):
    """ArrayDataset converts the arrays once, not at every item"""
    # Its items first: an item that is not the row asked for costs nothing to make either.
    verify_item_values(sub, *dataset_case(seed=5, n=7, shape=(2,)))
    features, labels = timing_arrays()
    call = f"ArrayDataset(<float64 array of shape {features.shape}>, labels)[i]"
    seconds = sub.probe("data_pipeline:dataset_item_seconds", label=call, features=features,
                        labels=labels, count=TIMING_ITEMS, timeout=30)
    # Measured: indexing converted tensors costs ~5 us an item on either size, converting the
    # whole 40000 x 64 array ~3 ms an item. 0.5 ms an item and 20x the small dataset's cost
    # both: only a per-item cost that grows with the array fails.
    if seconds["large"] > 5e-4 and seconds["large"] > 20 * seconds["small"]:
        fail(f"{call} took {seconds['large'] * 1e3:.2f} ms of CPU per item on "
             f"{len(features)} rows, against {seconds['small'] * 1e3:.3f} ms on "
             f"{TIMING_ITEMS} rows: each item converts or copies the whole array.", call=call,
             hint=DATASET_HINT)


@check(points=2, targets="pad_collate")
def test_pad_collate_batch_of_one(sub):
    """pad_collate keeps the batch dimension for a batch of one; Python int labels work"""
    verify_collate(sub, sequences(7, lengths=[3], dim=2, labels=[1]), batch_of_one=True)
    verify_collate(sub, sequences(8, lengths=[1], dim=4, labels=[0]), batch_of_one=True)
    batch = [(seq, int(label)) for seq, label in sequences(9, [2, 5, 5, 1], 1, [3, 0, 2, 1])]
    verify_collate(sub, batch)


@check(points=2, targets="masked_mean")
def test_masked_mean_ignores_padding_values(sub):
    """masked_mean ignores what the padded positions hold; float64 values give float64"""
    for seed, lengths, pad in ((3, [2, 5, 1], None), (4, [4, 1, 3, 2], 50.0)):
        values = position_values(seed, lengths, width=5, pad=pad)
        verify_masked_mean(sub, values, lengths, padding_counts=True)
    values = position_values(5, [1, 3], width=3, pad=-7.0).double()
    verify_masked_mean(sub, values, [1, 3], padding_counts=True)


@check(points=2, targets="masked_mean")
def test_masked_mean_is_differentiable(sub):
    """masked_mean is a loss: backward reaches `values`, 1 / sum(lengths) at each valid position"""
    values = position_values(6, [3, 1, 4], width=4, pad=5.0)
    verify_masked_mean_grad(sub, values, [3, 1, 4])
    verify_masked_mean_grad(sub, position_values(7, [2, 2], width=3, pad=None).double(), [2, 2])


@check(points=2, targets="split_indices")
def test_split_indices_random_and_seeded(sub):
    """split_indices draws the validation samples at random, from its seed, not the global one"""
    splits = []
    for case in SPLIT_CASES:
        train, val, call = split_of(sub, **case)
        n, n_val = case["n"], case["n_val"]
        splits.append(sorted(val))
        if 1 < n_val < n - 1 and sorted(val) in (list(range(n_val)),
                                                 list(range(n - n_val, n))):
            fail(f"{call} put the {'first' if val and min(val) == 0 else 'last'} {n_val} "
                 "samples in validation; the split must be drawn at random (data often comes "
                 "sorted).", call=call, hint=SPLIT_HINT)
    again = sorted(split_of(sub, **SPLIT_CASES[0])[1])
    if again != splits[0]:
        fail("split_indices(40, 10, seed=1) gave another split when called again; the same "
             "seed must give the same split.", call="split_indices(40, 10, 1)", hint=SPLIT_HINT)
    if splits[0] == splits[1] == splits[2]:
        fail("split_indices(40, 10, seed) gave the same validation samples for seeds 1, 2 and "
             "3; the seed must drive the draw.", call="split_indices(40, 10, seed)",
             hint=SPLIT_HINT)
    verify_drawn_at_random([sorted(split_of(sub, **case)[1]) for case in RANDOM_SPLITS],
                           call="split_indices(40, 10, seed) for seeds 100 to 119")


@check(points=2, targets="make_loaders")
def test_validation_loader_never_shuffled(sub):
    """make_loaders: the validation loader yields val_idx in order, in batch_size batches"""
    case = LOADER_CASE
    train_idx, runs, call = loaders_record(sub, case["n"], case["val_idx"], case["batch_size"],
                                           seeds=[3], epochs=3)
    for epoch, batches in enumerate(runs[0]["val"]):
        order = verify_epoch_covers(batches, case["val_idx"], case["batch_size"], call=call,
                                    which="validation")
        if order != case["val_idx"]:
            fail(f"{call}: epoch {epoch + 1} of the validation loader yielded {order}; "
                 f"expected val_idx's order {case['val_idx']}: validation is never shuffled.",
                 call=call, hint=LOADER_HINT, fault="validation-shuffled")


@check(points=2, targets="make_loaders")
def test_training_loader_shuffles_from_its_seed(sub):
    """make_loaders: training order from `seed` alone, the global random state left alone"""
    case = LOADER_CASE
    train_idx, runs, call = loaders_record(sub, case["n"], case["val_idx"], case["batch_size"],
                                           seeds=[7, 7, 8], epochs=3)
    for run in runs:
        global_rng_untouched(run["changed_rng"], call=call, hint=LOADER_HINT)
    orders = [[verify_epoch_covers(e, train_idx, case["batch_size"], call=call,
                                   which="training") for e in run["train"]] for run in runs]
    for run_orders in orders:
        verify_random_orders(run_orders, train_idx, call=call)
    if orders[0] != orders[1]:
        fail(f"{call}: two loaders made with seed=7 yielded different training epochs; the "
             "shuffling must come from a generator seeded with `seed`.", call=call,
             hint=LOADER_HINT)
    if orders[0] == orders[2]:
        fail(f"{call}: loaders made with seed=7 and seed=8 yielded the same training epochs; "
             "the seed must drive the shuffling.", call=call, hint=LOADER_HINT)


@check(points=2, targets="standardize_splits")
def test_standardize_uses_training_rows_only(sub):
    """standardize_splits: training statistics, unsorted indices, input unchanged, precision"""
    c = STANDARDIZE_CASE
    features = two_populations(c["seed"], c["n"], c["dim"], c["shift"])
    verify_standardize(sub, features, c["train_idx"], c["val_idx"], shared=True)
    verify_standardize(sub, features.astype(np.float32), c["train_idx"], c["val_idx"],
                       shared=True)


@check(points=3, targets=["seed_worker", "make_worker_loader"], timeout=90)
def test_workers_draw_new_augmentations_every_epoch(sub):
    """3 workers, 2 epochs: no augmentation repeats; seeded; global random state left alone"""
    runs, call = worker_record(sub, n=15, batch_size=2, num_workers=3, seeds=[9, 9, 10],
                               epochs=2)
    verify_worker_runs(runs, 15, 3, call=call, same=(0, 1), other=2)


@check(points=2, targets="balanced_sampler")
def test_balanced_sampler_draws_every_sample(sub):
    """balanced_sampler: 4 classes (one of one sample), every sample drawn, each epoch anew"""
    labels = imbalanced_labels(13, SAMPLER_COUNTS)
    record, call = sampler_record(sub, labels, epochs=60, seed=1)
    # 2880 draws: a share's standard deviation is 0.008; 0.05 is six of them.
    verify_balance(record, labels, call=call, tolerance=0.05)
    drawn = set(i for epoch in record["draws"] for i in epoch)
    # The rarest sample (one of 30 of its class) is drawn ~24 times on average.
    never = sorted(set(range(len(labels))) - drawn)
    if never:
        fail(f"{call}: over {len(labels) * 60} draws, samples {never[:8]} were never drawn; "
             "every sample of a class must be as likely as the others of its class.",
             call=call, hint=SAMPLER_HINT)
