"""Visible checks for `data_pipeline` (CURRICULUM.md, `data_pipeline`).

Plain functions are called through `sub.call`; a Dataset, DataLoaders and a Sampler are live
objects, so probes (`probes/data_pipeline.py`) build them with the student's code in the
worker and record what they yield. Verdicts: `data_pipeline_verify.py`.
"""

from __future__ import annotations


from data_pipeline_cases import (LOADER_CASE, SPLIT_CASE, STANDARDIZE_CASE, dataset_case,
                                 imbalanced_labels, position_values, sequences, two_populations)
from data_pipeline_verify import (LOADER_HINT, loaders_record, sampler_record, split_of,
                                  verify_balance, verify_collate, verify_dataset,
                                  verify_epoch_covers, verify_masked_mean, verify_random_orders,
                                  verify_standardize, verify_worker_runs, worker_record)
from grader import check, fail


@check(points=3, targets="ArrayDataset", visibility="visible")
def test_dataset_items_and_batches(sub):
    """ArrayDataset has one item per sample: float32 features and an int64 label"""
    features, labels = dataset_case(seed=0, n=10, shape=(3,))
    verify_dataset(sub, features, labels, batch_size=4)


@check(points=3, targets="pad_collate", visibility="visible")
def test_pad_collate_pads_in_order(sub):
    """pad_collate pads with zeros to the longest sequence, keeps the order, labels int64"""
    verify_collate(sub, sequences(1, lengths=[2, 4, 1], dim=3, labels=[2, 0, 1]))


@check(points=2, targets="masked_mean", visibility="visible")
def test_masked_mean_over_valid_positions(sub):
    """masked_mean averages the valid positions only (zero padding here)"""
    values = position_values(2, lengths=[3, 1, 4], width=4, pad=0.0)
    verify_masked_mean(sub, values, [3, 1, 4])


@check(points=2, targets="split_indices", visibility="visible")
def test_split_indices_partition_is_repeatable(sub):
    """split_indices: a disjoint train / validation split, the same twice, global state untouched"""
    first = split_of(sub, **SPLIT_CASE)
    second = split_of(sub, **SPLIT_CASE)
    if first[:2] != second[:2]:
        fail(f"{first[2]} returned different splits on two calls; the same seed must give the "
             "same split.", call=first[2],
             hint="draw the permutation from a generator seeded with `seed`: "
                  "np.random.default_rng(seed).permutation(n).")


@check(points=3, targets="make_loaders", visibility="visible")
def test_loaders_cover_their_splits_and_shuffle_training(sub):
    """make_loaders: each loader yields its own split once per epoch; the training one shuffles"""
    case = LOADER_CASE
    train_idx, runs, call = loaders_record(sub, case["n"], case["val_idx"], case["batch_size"],
                                           seeds=[0], epochs=2)
    orders = [verify_epoch_covers(epoch, train_idx, case["batch_size"], call=call,
                                  which="training") for epoch in runs[0]["train"]]
    for epoch in runs[0]["val"]:
        verify_epoch_covers(epoch, case["val_idx"], case["batch_size"], call=call,
                            which="validation")
    if orders[0] == orders[1] or orders[0] == train_idx:
        fail(f"{call}: the training loader yielded its samples in the same order "
             + ("in both epochs." if orders[0] == orders[1] else "as train_idx."),
             call=call, hint=LOADER_HINT, fault="no-shuffle-sorted-data")
    verify_random_orders(orders, train_idx, call=call)


@check(points=3, targets="standardize_splits", visibility="visible")
def test_standardize_with_training_statistics(sub):
    """standardize_splits standardises both splits with the training rows' mean and std"""
    c = STANDARDIZE_CASE
    features = two_populations(c["seed"], c["n"], c["dim"], c["shift"])
    verify_standardize(sub, features, c["train_idx"], c["val_idx"])


@check(points=3, targets=["seed_worker", "make_worker_loader"], visibility="visible",
       timeout=60)
def test_worker_loader_reproducible_without_repeats(sub):
    """make_worker_loader with 2 workers: the same seed gives the same batches, no repeats"""
    runs, call = worker_record(sub, n=12, batch_size=3, num_workers=2, seeds=[5, 5], epochs=1)
    verify_worker_runs(runs, 12, 2, call=call, same=(0, 1))


@check(points=2, targets="balanced_sampler", visibility="visible")
def test_balanced_sampler_balances_classes(sub):
    """balanced_sampler draws each class about equally often (60 / 25 / 5), anew every epoch"""
    labels = imbalanced_labels(4, [60, 25, 5])
    record, call = sampler_record(sub, labels, epochs=40)
    # 3600 draws: a share's standard deviation is 0.008; 0.05 is six of them.
    verify_balance(record, labels, call=call, tolerance=0.05)


