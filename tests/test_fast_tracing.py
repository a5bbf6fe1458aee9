"""grader/probes/tracing.py: counting the Python lines a call runs, and stopping it at a step
limit. Run here without a worker; the strides check that rests on it is proved by that
exercise's declared mutants (`torchgrade verify strides_broadcasting`)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from grader.probes.tracing import count_steps

pytestmark = pytest.mark.fast


def _module(**functions) -> types.SimpleNamespace:
    return types.SimpleNamespace(**functions)


def rows(a):
    out = np.zeros(len(a))
    for i in range(len(a)):
        out[i] = a[i].sum()
    return out


def cells(a):
    out = np.zeros((len(a), len(a)))
    for i in range(len(a)):
        for j in range(len(a)):
            out[i, j] = float(a[i] @ a[j])
    return out


def swallowing(a):
    """A double loop whose body swallows every exception, the step limit's included."""
    total = 0.0
    for i in range(len(a)):
        for j in range(len(a)):
            try:
                total += float(a[i] @ a[j])
            except BaseException:  # noqa: BLE001 - what a student may write
                pass
    return total


A = np.random.default_rng(0).standard_normal((300, 4))


def test_a_call_under_the_limit_runs_to_the_end_and_is_counted():
    record = count_steps(_module(rows=rows), "rows", A, step_limit=50_000)
    assert not record["stopped"] and not record["tampered"]
    assert np.array_equal(record["value"], A.sum(axis=1))
    assert 300 <= record["steps"] <= 50_000  # a loop over 300 rows


def test_a_call_over_the_limit_is_stopped_there():
    record = count_steps(_module(cells=cells), "cells", A, step_limit=5_000)
    # Stopped within a step of the limit, not after its 90,000 inner iterations.
    assert record["stopped"] and record["value"] is None and 5_000 < record["steps"] <= 5_001
    assert not record["tampered"]
    unlimited = count_steps(_module(cells=cells), "cells", A[:40])
    assert not unlimited["stopped"] and unlimited["steps"] > 1_600


def test_code_that_swallows_the_stop_is_still_stopped_and_not_called_a_tamperer():
    record = count_steps(_module(swallowing=swallowing), "swallowing", A, step_limit=5_000)
    assert record["stopped"] and record["steps"] > 5_000 and record["value"] is None
    assert record["tampered"] == []  # the limit switched the tracing off, not the call


def test_a_thread_started_before_the_call_counts_only_if_it_works_during_it():
    import queue
    import threading
    import time

    idle = threading.Thread(target=time.sleep, args=(5,), daemon=True)
    idle.start()
    work: queue.Queue = queue.Queue()
    done: queue.Queue = queue.Queue()

    def serve():
        a = work.get()
        done.put(rows(a))

    helper = threading.Thread(target=serve, daemon=True)
    helper.start()

    def by_the_helper(a):
        work.put(a)
        return done.get()

    assert count_steps(_module(vectorised=lambda a: a.sum(1)), "vectorised", A)["threads"] == 0
    record = count_steps(_module(by_the_helper=by_the_helper), "by_the_helper", A)
    assert record["threads"] >= 1 and record["steps"] < len(A)  # its loop ran uncounted

