"""Compute once, judge many times (issue 21, the checks' own compute): `grader.checking.memo`.

The unit tests (fast tier) pin the contracts of `shared` (one run per submission, its failure
raised again with the same message in every check that needs it, the probes it ran listed by
each) and `reference_cache` (one computation per distinct argument values, a private copy per
caller, the grader's random state untouched). The last test grades real submissions and counts
the calls into student code: no check of `training_loops` or of a bug hunt trains the same thing
twice with the same arguments (it failed before this change: `train_epoch_run` ran twice on the
same case in the visible checks, and twice within one hidden check).
"""

from __future__ import annotations

import gc
import weakref
from collections import Counter

import numpy as np
import pytest
import torch

from grader.checking.memo import REFERENCE_CACHE_SIZE, reference_cache, shared
from grader.checking.recorded import digest
from grader.checking.student import StudentError, StudentModule
from grader.course.folder import active_course
from grader.intake.submission import load_submission

from conftest import run_and_score


class FakeSub:
    """What `shared` uses of a `StudentModule`: its worker records, per check."""

    def __init__(self):
        self.worker_records: list[str] = []
        self.shared_records: dict = {}

    def note_worker_record(self, probe: str) -> None:
        if probe not in self.worker_records:
            self.worker_records.append(probe)

    def end_check(self) -> list[str]:
        records, self.worker_records = self.worker_records, []
        return records


@pytest.mark.fast
def test_shared_computes_once_per_submission_and_key():
    sub, other, runs = FakeSub(), FakeSub(), Counter()

    def compute(who):
        runs[who] += 1
        who.worker_records.append("m:probe")
        return {"value": runs[who]}

    assert shared(sub, "k", lambda: compute(sub)) == {"value": 1}
    assert sub.end_check() == ["m:probe"]
    # A second check of the same submission: the same value, not computed again, and it too
    # rests on the probe the run used.
    assert shared(sub, "k", lambda: compute(sub)) == {"value": 1}
    assert sub.end_check() == ["m:probe"]
    assert runs[sub] == 1
    # Another key, or another submission, computes on its own.
    shared(sub, "other", lambda: compute(sub))
    shared(other, "k", lambda: compute(other))
    assert runs[sub] == 2 and runs[other] == 1
    # So does a check that runs with backward passes switched off (@check(autograd=False)):
    # the run the others made with them is not the one it asks for.
    sub.autograd = False
    assert shared(sub, "k", lambda: compute(sub)) == {"value": 3}
    sub.autograd = True
    assert shared(sub, "k", lambda: compute(sub)) == {"value": 1}


@pytest.mark.fast
def test_shared_raises_a_students_failure_again_in_every_check():
    sub, runs = FakeSub(), []

    def times_out():
        runs.append(1)
        sub.worker_records.append("m:probe")
        raise StudentError("train(...) timed out after 5 s (an endless loop, or far too slow).",
                           status="timeout", call="train(...)")

    messages = []
    for _ in range(3):
        with pytest.raises(StudentError) as info:
            shared(sub, "k", times_out)
        messages.append((str(info.value), info.value.status, sub.end_check()))
    assert len(runs) == 1
    assert messages == [("train(...) timed out after 5 s (an endless loop, or far too slow).",
                         "timeout", ["m:probe"])] * 3


@pytest.mark.fast
def test_shared_does_not_keep_a_graders_own_bug():
    sub, runs = FakeSub(), []

    def broken():
        runs.append(1)
        raise KeyError("a bug of the grader")

    for _ in range(2):
        with pytest.raises(KeyError):
            shared(sub, "k", broken)
    assert len(runs) == 2


@pytest.mark.fast
def test_a_kept_failure_does_not_keep_its_submission_alive():
    """The kept exception's traceback holds the frames that hold `sub`: kept in a table keyed
    weakly by `sub` (as the bug hunts' checks kept theirs), every failed submission of a class
    stayed in memory for the life of the grading process."""
    sub = FakeSub()

    def fails():
        raise StudentError("run(seed=0) crashed.", status="crashed", call="run(seed=0)")

    for _ in range(2):
        with pytest.raises(StudentError):
            shared(sub, "k", fails)
    gone = weakref.ref(sub)
    del sub
    gc.collect()
    assert gone() is None


@pytest.mark.fast
def test_reference_cache_computes_once_per_distinct_values():
    calls = []

    @reference_cache
    def reference(x: np.ndarray, lr: float) -> dict:
        calls.append(lr)
        return {"w": x * lr, "losses": [float(lr)]}

    x = np.arange(6.0).reshape(2, 3)
    first = reference(x, 0.5)
    # Equal values in another array: remembered. Other values: computed.
    again = reference(x.copy(), 0.5)
    assert calls == [0.5]
    np.testing.assert_array_equal(again["w"], first["w"])
    reference(x + 1, 0.5)
    reference(x, 0.25)
    assert calls == [0.5, 0.5, 0.25]
    # Each caller gets its own copy: a check that changes what it got changes nobody else's.
    again["w"][0, 0] = 99.0
    again["losses"].append(1.0)
    third = reference(x, 0.5)
    assert third["w"][0, 0] == 0.0 and third["losses"] == [0.5]
    assert reference.__name__ == "reference" and len(reference.cache) == 3


@pytest.mark.fast
def test_reference_cache_leaves_the_graders_random_state_alone():
    @reference_cache
    def noisy_reference(n: int) -> torch.Tensor:
        torch.manual_seed(n)  # a reference seeding (or drawing from) the global generator
        return torch.randn(3)

    torch.manual_seed(123)
    expected = torch.rand(2)
    torch.manual_seed(123)
    computed = noisy_reference(1)
    remembered = noisy_reference(1)
    assert torch.equal(torch.rand(2), expected)
    assert torch.equal(computed, remembered)


@pytest.mark.fast
def test_reference_cache_is_bounded_and_passes_unrecordable_arguments_through():
    calls = []

    @reference_cache
    def reference(value):
        calls.append(value)
        return value if not callable(value) else value()

    for k in range(REFERENCE_CACHE_SIZE + 10):
        reference(k)
    assert len(reference.cache) == REFERENCE_CACHE_SIZE
    reference(REFERENCE_CACHE_SIZE + 9)  # the newest are kept
    assert len(calls) == REFERENCE_CACHE_SIZE + 10
    reference(0)  # the oldest went
    assert len(calls) == REFERENCE_CACHE_SIZE + 11
    # A value the digest cannot represent (a function) is computed every time, never refused.
    assert reference(lambda: 7) == 7 and reference(lambda: 7) == 7
    assert len(calls) == REFERENCE_CACHE_SIZE + 13


def test_no_check_trains_the_same_thing_twice(zygote, monkeypatch):
    """Grade the reference solutions of training_loops and of a bug hunt, counting every probe
    by its exact arguments: none runs twice for one submission (the visible and hidden checks
    judge each training run from one record). Calls made on purpose more than once (a check of
    determinism) go through `sub.call`, not these probes."""
    made: Counter = Counter()
    probe = StudentModule.probe

    def counting(self, which, /, *args, timeout=None, label="", **kwargs):
        made[(self.exercise, which, digest(which, args, kwargs))] += 1
        return probe(self, which, *args, timeout=timeout, label=label, **kwargs)

    monkeypatch.setattr(StudentModule, "probe", counting)
    exercises = ["training_loops", "bughunt_regression"]
    submission = load_submission(active_course().solutions_dir, exercises=exercises,
                                 student="reference")
    result = run_and_score(submission, exercises=exercises, zygote=zygote)
    assert all(c.status == "passed" for c in result.checks), \
        [c.id for c in result.checks if c.status != "passed"]
    twice = {key[:2]: n for key, n in made.items() if n > 1}
    assert not twice, f"the same probe with the same arguments ran more than once: {twice}"
    assert any(name == "training_loops:train_epoch_run" for _, name, _ in made)
