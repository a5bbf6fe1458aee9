"""Wrong implementations of `strides_broadcasting`: the classic mistakes, each with the checks
it must fail (see mutants/__init__.py)."""

from mutants import mutant_factory

M = mutant_factory("strides_broadcasting")


MUTANTS = [
    M("c_strides_fortran_order", """
def c_strides(shape, itemsize):
    out, step = [], itemsize
    for n in shape:
        out.append(step)
        step *= n
    return tuple(out)
""", "c_strides_matches_numpy", "c_strides_edge_cases"),
    M("c_strides_from_numpy", """
def c_strides(shape, itemsize):
    return np.empty(shape, dtype=np.dtype((np.void, itemsize))).strides
""", "c_strides_edge_cases"),
    M("c_strides_argument_renamed", "", "c_strides_edge_cases",
      replace=(("def c_strides(shape: tuple[int, ...], itemsize: int)",
                "def c_strides(shape: tuple[int, ...], item_size: int)"),
               ("    step = itemsize\n", "    step = item_size\n"))),
    M("c_strides_seeded_with_itemsize", """
def c_strides(shape, itemsize):
    strides = [itemsize]
    for n in reversed(shape[1:]):
        strides.insert(0, strides[0] * n)
    return tuple(strides)
""", "c_strides_edge_cases"),
    M("is_c_contiguous_length_one_axes_matter", """
def is_c_contiguous(shape, strides, itemsize):
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if s != expected:
            return False
        expected *= n
    return True
""", "is_c_contiguous_real_arrays", "is_c_contiguous_length_one_and_empty"),
    M("is_c_contiguous_forgets_empty_arrays", """
def is_c_contiguous(shape, strides, itemsize):
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True
""", "is_c_contiguous_length_one_and_empty"),
    M("transpose_view_copies", """
def transpose_view(a):
    return np.ascontiguousarray(a.T)
""", "transpose_view_values_and_layout", "transpose_view_any_layout"),
    M("transpose_view_swaps_first_and_last_axes", """
def transpose_view(a):
    return np.swapaxes(a, 0, -1) if a.ndim else a  # the full reversal only up to 3-d
""", "transpose_view_any_layout"),
    M("transpose_view_assumes_contiguous_input", """
def transpose_view(a):
    return np.lib.stride_tricks.as_strided(a.ravel(), a.shape[::-1], a.strides[::-1])
""", "transpose_view_any_layout"),
    M("broadcast_shape_aligns_from_the_left", """
def broadcast_shape(*shapes):
    ndim = max((len(s) for s in shapes), default=0)
    padded = [tuple(s) + (1,) * (ndim - len(s)) for s in shapes]
    out = []
    for sizes in zip(*padded):
        big = {n for n in sizes if n != 1}
        if len(big) > 1:
            raise ValueError("incompatible")
        out.append(big.pop() if big else 1)
    return tuple(out)
""", "broadcast_shape_compatible", "broadcast_shape_edge_cases"),
    M("broadcast_shape_max_without_checks", """
def broadcast_shape(*shapes):
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    return tuple(max(sizes) for sizes in zip(*padded))
""", "broadcast_shape_edge_cases", "broadcast_shape_incompatible"),
    M("broadcast_shape_needs_a_shape", """
def broadcast_shape(*shapes):
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            raise ValueError("incompatible")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
""", "broadcast_shape_edge_cases"),
    M("broadcast_strides_forgets_new_axes", """
def broadcast_strides(shape, strides, target_shape):
    return tuple(0 if n != t else s for n, s, t in zip(shape, strides, target_shape[-len(shape):]))
""", "broadcast_strides_matches_numpy", "broadcast_strides_any_layout",
       "broadcast_strides_incompatible"),
    M("broadcast_strides_keeps_length_one_strides", """
def broadcast_strides(shape, strides, target_shape):
    if len(shape) > len(target_shape):
        raise ValueError("too many axes")
    offset = len(target_shape) - len(shape)
    out = [0] * offset
    for n, s, t in zip(shape, strides, target_shape[offset:]):
        if n == t:
            out.append(s)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError("incompatible")
    return tuple(out)
""", "broadcast_strides_any_layout"),
    M("broadcast_strides_drops_leading_length_one_axes", "", "broadcast_strides_incompatible",
      replace=(("    if len(shape) > len(target_shape):\n",
                "    while len(shape) > len(target_shape) and shape[0] == 1:\n"
                "        shape, strides = shape[1:], strides[1:]\n"
                "    if len(shape) > len(target_shape):\n"),)),
    M("broadcast_strides_never_raises", """
def broadcast_strides(shape, strides, target_shape):
    offset = len(target_shape) - len(shape)
    return (0,) * offset + tuple(s if n == t and n != 1 else 0
                                 for n, s, t in zip(shape, strides, target_shape[offset:]))
""", "broadcast_strides_incompatible"),
    M("sliding_windows_one_row_short", """
def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("bad window")
    count = max((len(x) - window) // step, 1)
    (s,) = x.strides
    return np.lib.stride_tricks.as_strided(x, (count, window), (step * s, s), writeable=False)
""", "sliding_windows_values", "sliding_windows_steps_and_layouts"),
    M("sliding_windows_step_renamed", """
def sliding_windows(x, window, stride=1):
    if window < 1 or stride < 1 or window > len(x):
        raise ValueError("need 1 <= window <= len(x) and stride >= 1")
    count = (len(x) - window) // stride + 1
    (s,) = x.strides
    return np.lib.stride_tricks.as_strided(x, shape=(count, window), strides=(stride * s, s),
                                           writeable=False)
""", "sliding_windows_steps_and_layouts"),
    M("sliding_windows_copies", """
def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("bad window")
    rows = (len(x) - window) // step + 1
    return np.array([x[i * step:i * step + window] for i in range(rows)])
""", "sliding_windows_is_a_read_only_view", "sliding_windows_steps_and_layouts"),
    M("sliding_windows_writeable", """
def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("bad window")
    count = (len(x) - window) // step + 1
    (s,) = x.strides
    return np.lib.stride_tricks.as_strided(x, (count, window), (step * s, s))
""", "sliding_windows_is_a_read_only_view"),
    M("sliding_windows_assumes_contiguous_x", """
def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("bad window")
    count = (len(x) - window) // step + 1
    return np.lib.stride_tricks.as_strided(x, (count, window), (step * x.itemsize, x.itemsize),
                                           writeable=False)
""", "sliding_windows_steps_and_layouts"),
    M("sliding_windows_no_validation", """
def sliding_windows(x, window, step=1):
    count = (len(x) - window) // step + 1
    (s,) = x.strides
    return np.lib.stride_tricks.as_strided(x, (max(count, 0), max(window, 0)), (step * s, s),
                                           writeable=False)
""", "sliding_windows_invalid"),
    M("center_columns_global_mean", """
def center_columns(x):
    return x - x.mean()
""", "center_columns_values", "center_columns_shapes_and_layouts"),
    M("center_columns_in_place", """
def center_columns(x):
    x -= x.mean(axis=0)
    return x
""", "center_columns_leaves_input_alone", "center_columns_shapes_and_layouts"),
    M("center_columns_in_place_on_a_copy", """
def center_columns(x):
    out = x.copy()
    out -= out.mean(axis=0)  # an int array cannot hold the fractional result
    return out
""", "center_columns_shapes_and_layouts"),
    M("center_columns_assumes_c_order", """
def center_columns(x):
    n, d = x.shape
    columns = np.lib.stride_tricks.as_strided(x, (d, n), (x.itemsize, x.itemsize * d))
    return x - columns.mean(axis=1)
""", "center_columns_shapes_and_layouts"),
    M("pairwise_missing_factor_two", """
def pairwise_sq_dists(a, b):
    return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - a @ b.T, 0)
""", "pairwise_sq_dists_values", "pairwise_sq_dists_never_negative",
       "pairwise_sq_dists_is_vectorised"),
    M("pairwise_centres_its_inputs_in_place", """
def pairwise_sq_dists(a, b):
    mean = a.mean(axis=0)
    a -= mean  # distances do not change under a shift, but the caller's points do
    b -= mean
    sq = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(sq, 0.0)
""", "pairwise_sq_dists_never_negative"),
    M("pairwise_not_clipped", """
def pairwise_sq_dists(a, b):
    return (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
""", "pairwise_sq_dists_never_negative"),
    M("pairwise_python_loops", """
def pairwise_sq_dists(a, b):
    out = np.zeros((len(a), len(b)))
    for i in range(len(a)):
        for j in range(len(b)):
            out[i, j] = float(((a[i] - b[j]) ** 2).sum())
    return out
""", "pairwise_sq_dists_is_vectorised"),
    M("pairwise_loop_over_rows", """
def pairwise_sq_dists(a, b):
    return np.array([((row - b) ** 2).sum(axis=1) for row in a])
""", "pairwise_sq_dists_is_vectorised"),
    # Loops over rows that hide from a line counter that looks only at the student's file, on
    # the calling thread, with tracing left on.
    M("pairwise_loop_over_rows_tracing_off", """
import sys


def pairwise_sq_dists(a, b):
    sys.settrace(None)
    return np.array([((row - b) ** 2).sum(axis=1) for row in a])
""", "pairwise_sq_dists_is_vectorised"),
    M("pairwise_loop_over_rows_in_a_thread", """
from concurrent.futures import ThreadPoolExecutor


def pairwise_sq_dists(a, b):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: np.array([((row - b) ** 2).sum(axis=1) for row in a])).result()
""", "pairwise_sq_dists_is_vectorised"),
    M("pairwise_loop_over_rows_compiled_as_numpy", """
_hidden = {"np": np}
exec(compile("def rows(a, b):\\n    return np.array([((r - b) ** 2).sum(axis=1) for r in a])\\n",
             np.__file__, "exec"), _hidden)


def pairwise_sq_dists(a, b):
    return _hidden["rows"](a, b)
""", "pairwise_sq_dists_is_vectorised"),
    M("to_tensor_always_copies", """
def to_tensor(arr, share):
    return torch.tensor(arr)
""", "to_tensor_share_true_shares_memory", "to_tensor_dtypes_and_shapes"),
    M("to_tensor_always_shares", """
def to_tensor(arr, share):
    return torch.from_numpy(arr)
""", "to_tensor_share_false_copies", "to_tensor_dtypes_and_shapes"),
    M("to_tensor_contiguous_first", """
def to_tensor(arr, share):
    arr = np.ascontiguousarray(arr)
    return torch.from_numpy(arr) if share else torch.tensor(arr)
""", "to_tensor_dtypes_and_shapes"),
]

# Correct variants (they must fail nothing): the styles a strict check could wrongly reject.
MUTANTS += [
    M("correct_pairwise_broadcast_3d", """
def pairwise_sq_dists(a, b):
    return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
"""),
    M("correct_pairwise_loop_over_dimensions", """
def pairwise_sq_dists(a, b):
    out = np.zeros((len(a), len(b)))
    for k in range(a.shape[1]):
        out += (a[:, k, None] - b[None, :, k]) ** 2
    return out
"""),
    M("correct_c_strides_with_np_prod_floats", """
def c_strides(shape, itemsize):
    return tuple(itemsize * np.prod(shape[i + 1:]) for i in range(len(shape)))
"""),
    M("correct_is_c_contiguous_returns_numpy_bool", """
def is_c_contiguous(shape, strides, itemsize):
    if 0 in shape:
        return np.True_
    return np.bool_(all(s == c for n, s, c in zip(shape, strides, c_strides(shape, itemsize))
                        if n != 1))
"""),
]

# Catalogued faults (grader/course/faults.toml) these mutants hold: their failing checks must say so.
DIAGNOSES = {
    "to_tensor_always_shares": ["numpy-alias-mutation"],
}
