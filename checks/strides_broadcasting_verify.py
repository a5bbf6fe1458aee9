"""Hints and evidence helpers of the `strides_broadcasting` checks (visible and hidden), shipped
with the visible checks."""

from __future__ import annotations

STRIDE_HINT = ("the stride of an axis is how many bytes to skip to move one step along it: "
               "itemsize times the product of the sizes of the later axes.")
CONTIGUOUS_HINT = ("C-contiguous means the last axis has stride itemsize and each earlier axis "
                   "steps over one whole row of the next; axes of length 1 never move, so "
                   "their stride does not matter.")
VIEW_HINT = ("a view is new (shape, strides) over the same buffer: reversing both reverses the "
             "axes without touching the data (that is what a.T does).")
BROADCAST_HINT = ("align the shapes from the right; on each axis the sizes must be equal or one "
                  "of them 1 (a missing axis counts as 1).")
WINDOW_HINT = ("np.lib.stride_tricks.as_strided(x, shape, strides) can present x as overlapping "
               "rows without copying; row i starts i*step elements in, so its stride is "
               "step * x.strides[0].")
CENTER_HINT = "x.mean(axis=0) has shape (D,) and broadcasts against (N, D) from the right."
PAIRWISE_HINT = ("|a-b|^2 = |a|^2 + |b|^2 - 2 a.b: two broadcast sums and one matrix product; "
                 "rounding can make it slightly negative, so clip at 0.")
TENSOR_HINT = ("torch.from_numpy shares the numpy buffer; torch.tensor (or .clone()) copies it.")


def record_shapes(evidence: dict, shapes, expected, *, labels=None, expected_strides=None
                  ) -> None:
    """The case about to be checked, for the report's picture of shapes aligned from the right
    (evidence only; the last case recorded is the one that failed, if one did): `shapes`,
    `shape_labels`, `expected_shape` (None: incompatible), `expected_strides`; the call's
    answer is added as `got_shape` / `got_strides` once it is known."""
    evidence.clear()
    evidence["shapes"] = [list(s) for s in shapes]
    evidence["expected_shape"] = None if expected is None else list(expected)
    if labels:
        evidence["shape_labels"] = list(labels)
    if expected_strides is not None:
        evidence["expected_strides"] = list(expected_strides)
