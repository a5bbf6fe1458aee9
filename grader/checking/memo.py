"""Compute once, judge many times: the two caches checks use to avoid running the same thing twice.

- `shared(sub, key, compute)`: what a submission's code did in one run (a probe's record, a
  training run) is made once per submission (per `sub`) and judged by every check that needs
  it. What the run raised (a timeout, a crash, the stub's NotImplementedError, a failed
  precondition) is kept and raised again in each of those checks, so each fails with the same
  message as if it had made the call itself; each of them also lists the probes the run used
  (`worker_records`), since its verdict rests on them. Only calls a check makes once on
  purpose belong here: a check that calls twice to test determinism, or that an input survives
  repeated calls, must keep calling.
- `reference_cache(fn)`: a grader-side reference function (`checks/*_reference.py`) computed once
  per grader process for each distinct set of argument values, since its answer depends only on
  them, never on a student: in bulk grading, every submission after the first gets the value
  without recomputing it.
"""

from __future__ import annotations

import copy
import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from grader.checking.compare import CheckFailure
from grader.checking.recorded import NotRecordable, digest
from grader.checking.student import StudentError

T = TypeVar("T")

# Distinct argument sets remembered per reference function (LRU): a reference called with values
# taken from a student's output (a gradient at the student's weights) misses for every wrong
# submission, and must not grow without bound over a class.
REFERENCE_CACHE_SIZE = 512


def shared(sub, key: Any, compute: Callable[[], T]) -> T:
    """`compute()` once per submission (per `sub`) and `key`, its value shared by every check
    that asks for the same key; a `StudentError` or `CheckFailure` it raised is raised again for
    each of them. Each of those checks rests on the probes `compute` ran (`sub.worker_records`).
    Any other exception (a bug of the grader's own) is not kept: the next check computes again.
    The records live on `sub` (`StudentModule.shared_records`, emptied when it closes): a kept
    exception's traceback holds frames that hold `sub`, a cycle the collector frees with it."""
    store = sub.shared_records
    # A run made with backward passes switched off, or operators refused, is not the run a
    # check that allows them asks for, nor the other way round (CheckInfo.autograd, .forbid).
    key = (key, getattr(sub, "autograd", True), tuple(getattr(sub, "forbid", ())))
    if key not in store:
        start = len(sub.worker_records)
        try:
            store[key] = (True, compute(), sub.worker_records[start:])
        except (StudentError, CheckFailure) as exc:
            store[key] = (False, exc, sub.worker_records[start:])
    ok, value, probes = store[key]
    for probe in probes:
        sub.note_worker_record(probe)
    if not ok:
        raise value
    return value


def reference_cache(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, remembering its result per distinct argument values (compared by value, as the
    release's recorded references are: `grader.checking.recorded.digest`) for this process.

    Contract of `fn`: deterministic in its arguments, it neither changes them nor depends on
    anything else (a reference implementation). Every caller gets its own deep copy, so a check
    that changes the value it got cannot change another's. Each call runs with the grader's
    torch generator saved and restored (`torch.random.fork_rng`): whether it was computed or
    remembered, a reference leaves the grader's random state as it found it. Arguments the digest
    cannot represent, and values that cannot be copied, are simply not remembered."""
    store: OrderedDict[str, Any] = OrderedDict()

    @functools.wraps(fn)
    def cached(*args: Any, **kwargs: Any) -> T:
        try:
            key = digest(f"{fn.__module__}.{fn.__qualname__}", args, kwargs)
        except NotRecordable:
            key = None
        if key is not None and key in store:
            store.move_to_end(key)
            return copy.deepcopy(store[key])
        with torch.random.fork_rng(devices=[]):
            value = fn(*args, **kwargs)
        if key is not None:
            try:
                store[key] = copy.deepcopy(value)
            except Exception:  # noqa: BLE001 - a value that cannot be copied is not remembered
                return value
            if len(store) > REFERENCE_CACHE_SIZE:
                store.popitem(last=False)
        return value

    cached.cache = store  # type: ignore[attr-defined]  # for tests: what is remembered
    return cached
