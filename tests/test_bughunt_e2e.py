"""The end-to-end checks of the bug hunts (grader/checking/bughunt_e2e.py): recognising samples
by value under per-feature scaling, and each verdict on records made by hand (fast); the
declared outcomes of the fixed scripts equal what their runs give, and every bug hunt has the
four checks (the mutants and styles that prove them: tests/test_checks_catch_mutants.py)."""

from __future__ import annotations

import pytest
import torch

from grader.checking import bughunt_e2e as E
from grader.checking.compare import CheckFailure
from conftest import end_to_end_checks
from grader.course.faults import bughunts
from grader.course.folder import declared_check_ids, default_course

SPEC_ARGS = dict(exercise="bughunt_x", metric="accuracy", reference=0.9, tolerance=0.08)


class Sub:
    """What `grader.checking.memo.shared` needs of a student module."""

    def __init__(self):
        self.shared_records: dict = {}
        self.worker_records: list = []

    def note_worker_record(self, record) -> None:
        pass


def data(n: int = 50, d: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g) * torch.tensor([10.0, 1.0, 100.0]) + 5, \
        torch.randint(0, 3, (n,), generator=g)


def spec(rec: dict, X, y, val, **kw) -> E.EndToEnd:
    args = {**SPEC_ARGS, **kw}
    return E.EndToEnd(record=lambda sub: {"end_to_end": rec}, data=lambda: (X, y),
                      val=tuple(val), **args)


def run_record(X, y, train_idx, val_idx, transform=lambda t: t, train_y=None, params=None,
               out=None) -> dict:
    tr, va = torch.tensor(train_idx), torch.tensor(val_idx)
    return {"train_called": True,
            "params": params or [{"name": "w", "numel": 4, "requires_grad": True, "grads": 3,
                                  "largest_grad": 0.1, "scale": 1.0, "moved": True}],
            "train": {"x": transform(X[tr]).double(),
                      "y": (y[tr] if train_y is None else train_y).double()},
            "val": {"x": transform(X[va]).double(), "y": y[va].double(),
                    "out": out if out is not None else torch.nn.functional.one_hot(
                        y[va], 3).float()}}




def standardise(stats):
    mean, std = stats.mean(0), stats.std(0)
    return lambda t: ((t - mean) / std).float()


@pytest.mark.fast
def test_rows_are_recognised_as_they_are_and_under_per_feature_scaling():
    X, _ = data()
    val = torch.arange(0, 50, 5)
    train = torch.tensor([i for i in range(50) if i % 5])
    assert E.recognise(X[train].double(), X.double(), val).tolist() == train.tolist()
    scaled = standardise(X[train])(X[train]).double()
    assert E.recognise(scaled, X.double(), train).tolist() == train.tolist()
    # The validation split standardised with the training split's statistics.
    assert E.recognise(standardise(X[train])(X[val]).double(), X.double(), val).tolist() == \
        val.tolist()
    # Every sample (a leak), scaled with the training statistics: still recognised.
    every = standardise(X[train])(X).double()
    assert E.recognise(every, X.double(), train).tolist() == list(range(50))
    # Rows of no sample.
    noise = torch.randn(5, 3, dtype=torch.float64)
    assert (E.recognise(noise, X.double(), val) == -1).all()


@pytest.mark.fast
def test_split_passes_the_contracts_and_names_a_leak():
    X, y = data()
    val = list(range(0, 50, 5))
    train = [i for i in range(50) if i % 5]
    good = run_record(X, y, train * 2, val, standardise(X[train]))
    E.verify_split(Sub(), spec(good, X, y, val), {})
    leak = run_record(X, y, list(range(50)), val, standardise(X[train]))
    with pytest.raises(CheckFailure) as failed:
        E.verify_split(Sub(), spec(leak, X, y, val), evidence := {})
    assert failed.value.fault == "validation-leak"
    assert evidence["val_samples_in_training"] == len(val)
    short = run_record(X, y, train[:20], val)
    with pytest.raises(CheckFailure, match="never came"):
        E.verify_split(Sub(), spec(short, X, y, val), {})
    E.verify_split(Sub(), spec(short, X, y, val, slack=20), {})


@pytest.mark.fast
def test_pairing_fails_on_labels_shuffled_apart_from_their_samples():
    X, y = data()
    val = list(range(0, 50, 5))
    train = [i for i in range(50) if i % 5]
    E.verify_pairing(Sub(), spec(run_record(X, y, train, val), X, y, val), {})
    shuffled = y[torch.tensor(train)][torch.randperm(len(train),
                                                     generator=torch.Generator().manual_seed(1))]
    rec = run_record(X, y, train, val, train_y=shuffled)
    with pytest.raises(CheckFailure) as failed:
        E.verify_pairing(Sub(), spec(rec, X, y, val), evidence := {})
    assert failed.value.fault == "labels-separated-from-samples"
    assert evidence["train_wrong_labels"] > 0


def param(name, numel=4, requires_grad=True, grads=3, largest=0.1, moved=True):
    return {"name": name, "numel": numel, "requires_grad": requires_grad, "grads": grads,
            "largest_grad": largest, "scale": 1.0, "moved": moved}


@pytest.mark.fast
def test_parameters_cut_off_unmoved_or_wrongly_frozen_fail_and_negligible_ones_pass():
    X, y = data()
    val = list(range(0, 50, 5))
    train = [i for i in range(50) if i % 5]

    def verdict(params, frozen=0, parameters=8):
        rec = run_record(X, y, train, val, params=params)
        E.verify_parameters_learn(Sub(), spec(rec, X, y, val, frozen=frozen,
                                              parameters=parameters), evidence := {})
        return evidence

    verdict([param("a"), param("b")])
    # A bias before BatchNorm: gradients at rounding level, no movement.
    verdict([param("a"), param("b", largest=1e-9, moved=False)])
    # Frozen by requires_grad, or by leaving it out of the optimizer.
    verdict([param("a"), param("b", requires_grad=False, grads=0, moved=False)], frozen=4)
    verdict([param("a"), param("b", moved=False)], frozen=4)
    with pytest.raises(CheckFailure) as failed:
        verdict([param("a"), param("b", grads=0, largest=0.0, moved=False)])
    assert failed.value.fault == "detach-on-path"
    with pytest.raises(CheckFailure, match="update step does not reach"):
        verdict([param("a"), param("b", moved=False)])
    with pytest.raises(CheckFailure, match="meant to stay frozen"):
        verdict([param("a"), param("b")], frozen=4)
    with pytest.raises(CheckFailure, match="learnable elements"):
        verdict([param("a")], parameters=8)


@pytest.mark.fast
def test_outcome_is_judged_against_the_reference_within_the_tolerance():
    X, y = data()
    val = list(range(0, 50, 5))
    train = [i for i in range(50) if i % 5]
    right = run_record(X, y, train, val)
    E.verify_outcome(Sub(), spec(right, X, y, val, reference=1.0), {})
    wrong = run_record(X, y, train, val, out=torch.zeros(len(val), 3))
    with pytest.raises(CheckFailure, match="does not learn"):
        E.verify_outcome(Sub(), spec(wrong, X, y, val, reference=1.0), {})


@pytest.mark.fast
def test_every_bug_hunt_has_the_end_to_end_checks():
    checks = declared_check_ids(default_course().checks_dir)
    for exercise in bughunts():
        assert end_to_end_checks(exercise) <= checks, exercise


@pytest.mark.parametrize("exercise", sorted(bughunts()))
def test_declared_reference_outcome_is_the_fixed_scripts(exercise):
    """`EndToEnd.reference` is what the fixed script's run(seed) gives (measured in the grader,
    as a submission's run is measured in the worker)."""
    import importlib
    import sys

    sys.path.insert(0, str(default_course().checks_dir))
    try:
        cases = importlib.import_module(f"{exercise}_cases_hidden")
    finally:
        sys.path.pop(0)
    spec_ = cases.END_TO_END
    got = E.outcome(E.reference_record(spec_), spec_)
    # (the tolerances are 0.08 in accuracy or 6x in mean squared error: a last-digit
    # difference of another machine's float arithmetic does not matter, a changed script does)
    assert got == pytest.approx(spec_.reference, rel=1e-3)
