"""grader/probes/watch.py: what a call did to its inputs (numpy arrays and tensors: values,
dtype, shape, requires_grad) and to the global random generators. Pure functions, run here
without a worker; the data_pipeline checks that rest on them are proved by that exercise's
declared mutants (`torchgrade verify data_pipeline`)."""

from __future__ import annotations

import random
import types

import numpy as np
import pytest
import torch

from grader.probes.watch import (call_watched, changed_rng, global_rng_state, snapshot,
                                 unchanged_inputs)

pytestmark = pytest.mark.fast


def _inputs():
    return [np.arange(6.0).reshape(2, 3), [(torch.ones(2, 2), torch.tensor(1))],
            {"w": torch.zeros(3)}]


def test_nothing_changed_gives_no_change():
    args = _inputs()
    args[0][0, 0] = np.nan  # nan equals nan: an untouched nan is no change
    before = snapshot(args)
    assert unchanged_inputs(before, args) == []


@pytest.mark.parametrize("mutate, words", [
    (lambda a: a[0].__setitem__((1, 2), -1.0), ["[0]", "values", "[1, 2]", "5.0", "-1.0"]),
    (lambda a: a[1][0][0].zero_(), ["[1][0][0]", "values"]),
    (lambda a: a[1][0][0].unsqueeze_(0), ["shape", "(2, 2)", "(1, 2, 2)"]),
    (lambda a: a[2]["w"].requires_grad_(), ["['w']", "requires_grad", "False", "True"]),
    (lambda a: setattr(a[2]["w"], "data", torch.zeros(3, dtype=torch.float64)),
     ["dtype", "torch.float32", "torch.float64"]),
    (lambda a: a[1].append(None), ["list of 1 items", "list of 2 items"]),
    (lambda a: a[2].pop("w"), ["keys"]),
])
def test_every_kind_of_change_is_named(mutate, words):
    args = _inputs()
    before = snapshot(args)
    mutate(args)
    changes = unchanged_inputs(before, args, "args")
    assert len(changes) == 1, changes
    assert all(w in changes[0] for w in words), changes


def test_changes_are_bounded():
    args = [torch.zeros(1) for _ in range(50)]
    before = snapshot(args)
    for t in args:
        t += 1
    assert len(unchanged_inputs(before, args)) == 8


@pytest.mark.parametrize("move, name", [
    (lambda: random.random(), "random"),
    (lambda: np.random.seed(0), "np.random"),
    (lambda: np.random.random(), "np.random"),
    (lambda: torch.manual_seed(0), "torch"),
    (lambda: torch.rand(1), "torch"),
])
def test_each_global_generator_is_watched(move, name):
    before = global_rng_state()
    move()
    assert changed_rng(before, global_rng_state()) == [name]


def test_own_generators_leave_the_global_state_alone():
    before = global_rng_state()
    np.random.default_rng(3).permutation(10)
    torch.randperm(10, generator=torch.Generator().manual_seed(3))
    random.Random(3).random()
    assert changed_rng(before, global_rng_state()) == []


def test_call_watched_records_value_inputs_and_generators():
    def fill(values, lengths):
        np.random.seed(1)
        values.masked_fill_(torch.arange(values.shape[1])[None, :] >= lengths[:, None], 0.0)
        return values.sum()

    module = types.SimpleNamespace(fill=fill)
    values = torch.ones(2, 3)
    record = call_watched(module, function="fill", args=[values, torch.tensor([1, 3])])
    assert float(record["value"]) == 4.0
    assert len(record["changed_inputs"]) == 1
    assert record["changed_inputs"][0].startswith("argument 1: its values changed")
    assert record["changed_rng"] == ["np.random"]
