"""Visible checks for the bug hunt `bughunt_finetune` (bughunt/finetune.py).

They check what the script's docstring promises of `run(seed=0)`, whatever faults the copy
still holds, and carry no points: the bug hunt's points are in its hidden checks, one per fault,
which run when the work is handed in. See `bughunt_visible.py`.
"""

from __future__ import annotations

from bughunt_finetune_cases import CONTRACT
from bughunt_visible import (RUN_TIMEOUT, verify_contract, verify_finite,
                                           verify_outputs, verify_runs)
from grader import check


@check(points=0, targets="run", visibility="visible", timeout=RUN_TIMEOUT, reveal="symptom")
def test_run_finishes(sub, evidence):
    """`run(seed=0)` runs to the end within 60 s"""
    verify_runs(sub, CONTRACT, evidence)


@check(points=0, targets="run", visibility="visible", timeout=RUN_TIMEOUT, reveal="symptom")
def test_run_returns_its_contract(sub, evidence):
    """`run(seed=0)` returns what the docstring names, one history number per epoch"""
    verify_contract(sub, CONTRACT, evidence)


@check(points=0, targets="run", visibility="visible", timeout=RUN_TIMEOUT, reveal="symptom")
def test_history_is_finite(sub, evidence):
    """Every number in the history `run(seed=0)` returns is finite"""
    verify_finite(sub, CONTRACT, evidence)


@check(points=0, targets="run", visibility="visible", timeout=RUN_TIMEOUT, reveal="symptom")
def test_model_outputs_have_their_shapes(sub, evidence):
    """The model `run(seed=0)` returns computes outputs of the documented shapes"""
    verify_outputs(sub, CONTRACT, evidence)
