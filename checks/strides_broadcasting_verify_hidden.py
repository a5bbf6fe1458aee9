"""The cost measurement only a hidden `strides_broadcasting` check uses: a loop over rows run by
C code, told apart from vectorised code by the CPU time the worker spends. Never shipped (a
`_hidden` module: `checks/README.md`)."""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from strides_broadcasting_verify import PAIRWISE_HINT
from grader import expect_array, fail


# Rows of the tall inputs that time a loop run by C code; the calibration loop makes one numpy
# call per row; a call may use at most this share of the calibration's CPU time.
STEP_LIMIT = 50_000  # Python lines a traced pairwise_sq_dists may run before it is stopped
TIMED_ROWS = 100_000
LOOP_SHARE = 0.25


@functools.cache
def cpu_of_one_call_per_row(rows: int = TIMED_ROWS, repeats: int = 3) -> float:
    """CPU seconds this grader thread spends on `list(map(np.negative, x))` over `rows` rows of
    one number: the cheapest loop over rows that calls numpy once per row, on this machine
    (best of `repeats` on a quarter of the rows, scaled; measured once per process)."""
    x = np.zeros((rows // 4, 1))
    best = math.inf
    for _ in range(repeats):
        start = time.thread_time()
        list(map(np.negative, x))
        best = min(best, time.thread_time() - start)
    return best * 4


def expect_no_loop_run_by_c_code(sub) -> None:
    """A loop over rows driven by C code (`map`, `itertools.starmap`, `functools.reduce`, `sum`
    over numpy functions) runs no Python line, so the line count cannot see it. Its cost can:
    each row costs at least one numpy call (about 1 µs) where vectorised code spends 0.003-0.03
    µs per row (measured: 200,000 x 1 points against 1, numpy 0.5-5 ms, torch.cdist 7 ms; one
    numpy call per row 250 ms, so the limit of a quarter of that is 10x above the slowest
    vectorised style and 4x below the cheapest loop). The grader reads the worker's CPU time
    itself from the kernel (threads and child processes counted), so the worker cannot report a
    smaller one; the best of three tries decides, so that a busy machine cannot fail honest code.
    Both ways round: a tall `a` (a loop over its rows), then a tall `b`.

    Evidence, on failure only (timings differ from run to run; results.json must not):
    `cpu_us_per_row` (per case, the best try) and `one_call_per_row_us`."""
    rng = np.random.default_rng(208)
    tall, point = rng.standard_normal((TIMED_ROWS, 1)), rng.standard_normal((1, 1))
    limit = LOOP_SHARE * cpu_of_one_call_per_row()
    timing: dict = {"cpu_us_per_row": []}
    timing["one_call_per_row_us"] = round(limit / LOOP_SHARE / TIMED_ROWS * 1e6, 4)
    sub.call("pairwise_sq_dists", tall[:100], point)  # first-use costs (imports, caches) here
    sub.call("pairwise_sq_dists", point, tall[:100])
    for name, a, b in (("a", tall, point), ("b", point, tall)):
        call = (f"pairwise_sq_dists(a, b)  # a of shape {a.shape}, b of shape {b.shape}")
        best = math.inf
        for _ in range(3):
            got, seconds = sub.timed_call("pairwise_sq_dists", a, b)
            if seconds is None:  # no /proc here: the line count alone decides
                timing["cpu_us_per_row"].append(None)
                return
            best = min(best, seconds)
            if best <= limit:
                break
        timing["cpu_us_per_row"].append(round(best / TIMED_ROWS * 1e6, 4))
        if best > limit:
            per_row = best / TIMED_ROWS * 1e6
            one_call = limit / LOOP_SHARE / TIMED_ROWS * 1e6
            fail(f"{call} used {best * 1e3:.0f} ms of CPU: {per_row:.2f} µs per row of {name}, "
                 f"as much as a loop that calls numpy once per row ({one_call:.2f} µs per row "
                 "on this machine). That is a loop over rows run by C code (map, "
                 "itertools.starmap, functools.reduce, np.vectorize or sum over numpy "
                 "functions): the contract asks for no loop over rows.", call=call,
                 expected=f"a vectorised computation (under {limit * 1e3:.0f} ms here)",
                 got=f"{best * 1e3:.0f} ms of CPU", hint=PAIRWISE_HINT, evidence=timing)
        if not isinstance(got, np.ndarray) or got.shape != (a.shape[0], b.shape[0]):
            expect_array(got, np.zeros((a.shape[0], b.shape[0])), call=call, check_dtype=False)
