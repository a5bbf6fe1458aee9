"""The grader's own answers for the `parameters` checks that no library call gives (grader side
only: a student release ships the values the visible checks need, recorded by
`grader.release.replay`, not this code, which would be the answer to `count_parameters`)."""

from __future__ import annotations

from grader.checking.memo import reference_cache
from probes.parameters import build_case


@reference_cache
def expected_count(case: str, trainable_only: bool | None) -> int:
    """count_parameters' answer for a test model of `probes.parameters.CASES`."""
    model = build_case(case)
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
