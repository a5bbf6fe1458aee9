"""Verifiers only the hidden checks of the bug hunt `bughunt_classifier` (bughunt/classifier.py)
use, beside the shared ones of `bughunt_common.py`. Never shipped (a `_hidden` module:
`checks/README.md`)."""

from __future__ import annotations

import math

from bughunt_classifier_cases_hidden import SETUP, SETUP_CALL
from bughunt_common import fail, reference, rounded


def verify_run_schedule(record: dict, evidence: dict) -> None:
    """The optimizer and scheduler run() builds give, stepped once per epoch, the fixed
    script's learning rate for every epoch (LR halved every STEP_SIZE epochs)."""
    ref = reference("classifier")
    epochs = SETUP["schedule_epochs"]
    want = [ref.LR * 0.5 ** (e // ref.STEP_SIZE) for e in range(epochs)]
    schedule = record.get("schedule") or {}
    call = (f"{SETUP_CALL}: the optimizer and scheduler it builds, the scheduler stepped once "
            "per epoch")
    if schedule.get("error"):
        fail(f"{call}: {schedule['error']}", call=call)
    got = [max(lrs) for lrs in schedule.get("lrs", [])]
    evidence.update(run_lr_per_epoch=rounded(got, 8), run_expected_lr_per_epoch=rounded(want, 8))
    if len(got) != len(want) or not all(math.isclose(a, b, rel_tol=1e-6)
                                        for a, b in zip(got, want)):
        fail(f"{call}: the learning rate per epoch is {rounded(got, 6)}; the script's schedule "
             f"(lr {ref.LR} halved every {ref.STEP_SIZE} epochs) gives {rounded(want, 6)}.",
             call=call, expected=str(rounded(want, 6)), got=str(rounded(got, 6)))
