"""Inputs of the hidden `data_pipeline` checks only (never shipped)."""

from __future__ import annotations

import numpy as np

# make_loaders: 3 epochs; validation indices neither sorted nor a block
LOADER_CASE = {"n": 30, "val_idx": [29, 4, 17, 11, 0, 23, 8], "batch_size": 5}

# split_indices: several seeds; a split that is a block of the first or last rows is not random
# split_indices at random: 20 seeds of one size, judged together (`verify_drawn_at_random`)
RANDOM_SPLITS = [{"n": 40, "n_val": 10, "seed": s} for s in range(100, 120)]

SPLIT_CASES = [{"n": 40, "n_val": 10, "seed": s} for s in (1, 2, 3)] + \
              [{"n": 7, "n_val": 1, "seed": 4}, {"n": 9, "n_val": 8, "seed": 5}]

# standardize_splits: shifted second half; index arrays unsorted
STANDARDIZE_CASE = {"seed": 11, "n": 30, "dim": 4, "shift": -6.0,
                    "train_idx": [27, 1, 14, 3, 5, 20, 8, 9, 29, 12, 0, 16, 24, 18, 22, 7],
                    "val_idx": [2, 28, 4, 26, 10, 13, 11, 15, 25, 17, 19, 6, 21, 23]}

# balanced_sampler: 4 classes, one of a single sample
SAMPLER_COUNTS = [30, 12, 5, 1]

# ArrayDataset: rows large enough that converting the whole array per item costs milliseconds
TIMING_ROWS, TIMING_COLUMNS, TIMING_ITEMS = 40_000, 64, 100


def timing_arrays() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(12)
    return rng.normal(size=(TIMING_ROWS, TIMING_COLUMNS)), rng.integers(0, 5, TIMING_ROWS)
