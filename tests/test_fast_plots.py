"""Report pictures (grader/outputs/plots.py) one kind at a time: which evidence keys draw which
picture, what its words say, and the SVG it makes. The fast tier; tests/test_report.py draws
them all together, on pages."""

from __future__ import annotations

import math
import re

import pytest

from grader.models import CheckResult
from grader.outputs import plots

pytestmark = pytest.mark.fast


def check(evidence: dict, check_id: str = "ex.check") -> CheckResult:
    return CheckResult(id=check_id, exercise="ex", targets=["f"], visibility="visible",
                       points=0, max_points=1, status="failed", evidence=evidence)


# kind -> (the smallest evidence that draws it, words its description must hold)
ONE_KIND = {
    "loss": ({"loss_curve": [2.0, 1.0, 3.0], "reference_loss_curve": [2.0, 1.0, 0.5]},
             ["first differ at step 3"]),
    "val-loss": ({"val_loss_curve": [0.9, 0.7], "reference_val_loss_curve": [0.8, 0.6]},
                 ["validation loss"]),
    "lr": ({"lr_per_step": [0.1, 0.1, 0.05, 0.05]}, ["changing at 1 step (first at step 3)"]),
    "grad-ratio": ({"grad_ratio": [1.0, 2.0, 3.0]}, ["2 steps are off", "step 2 at 2"]),
    "grad-errors": ({"grad_errors": [{"name": "W1", "error": 0.5, "allowed": 1e-6,
                                      "ratio": 2.0}]},
                    ["W1", "(too far)", "W1 is 2 times the right gradient"]),
    "descent": ({"loss_surface": {"xx": 4.2, "x": 1.7, "xy": 17.0, "y": 7.0, "yy": 58.0},
                 "reference_descent_path": [[0.5 * k, 0.2 * k] for k in range(1, 6)],
                 "descent_path": [[0.25 * k, 0.1 * k] for k in range(1, 6)]}, []),
    "broadcast": ({"shapes": [[8, 1, 6, 1], [7, 1, 5]], "expected_shape": [8, 7, 6, 5],
                   "got_shape": [8, 7, 6, 1]}, []),
}


def test_every_kind_is_exercised_here():
    assert {kind for kind, _ in plots.MAKERS} == set(ONE_KIND)


@pytest.mark.parametrize("kind", sorted(ONE_KIND))
def test_each_picture_is_drawn_from_its_own_keys(kind):
    evidence, words = ONE_KIND[kind]
    pictures = plots.pictures_for(check(evidence), prefix="p1")
    assert [p.kind for p in pictures] == [kind]
    picture = pictures[0]
    assert picture.svg.startswith('<svg class="plot" role="img" aria-labelledby="p1-')
    assert f"<title id=\"p1-{kind}-t\">" in picture.svg
    for w in words:
        assert w in picture.alt, picture.alt
    ids = re.findall(r'\sid="([^"]+)"', picture.svg)
    assert ids and all(i.startswith(f"p1-{kind}-") for i in ids)  # unique per figure
    assert set(re.findall(r'(?:href="#|url\(#)([^")]+)', picture.svg)) <= set(ids)
    assert "<metadata" not in picture.svg and "<?xml" not in picture.svg


def test_no_evidence_no_picture_and_a_limit_is_kept():
    assert plots.pictures_for(check({})) == []
    both = {**ONE_KIND["lr"][0], **ONE_KIND["grad-ratio"][0]}
    assert [p.kind for p in plots.pictures_for(check(both), limit=1)] == ["lr"]


@pytest.mark.parametrize("evidence", [
    {"loss_curve": [1.0]},                       # one point is no curve
    {"lr_per_step": "0.1"},
    {"grad_errors": [{"name": "W", "error": 1.0, "allowed": 0}]},  # no tolerance to compare
    {"grad_errors": ["W"]},
    {"shapes": [[2, "x"]]},
    {"shapes": [[1]] * 9},                       # more shapes than a picture shows
    {"loss_surface": {"xx": 1.0}, "reference_descent_path": [[0, 0]]},
], ids=lambda e: "-".join(e))
def test_evidence_a_picture_cannot_show_draws_nothing_and_never_raises(evidence):
    assert plots.pictures_for(check(evidence)) == []


def test_numbers_turn_anything_non_finite_into_nan():
    got = plots.numbers([1, "2", None, float("inf"), True])
    assert got[:2] == [1.0, 2.0] and math.isnan(got[2]) and math.isnan(got[3])
    assert plots.numbers([]) is None and plots.numbers("12") is None
    assert len(plots.numbers(list(range(1000)))) == plots.MAX_POINTS
    assert plots.describe_series([1.0, math.nan, 0.5]) == "from 1 to 0.5 (1 not finite)"
    assert plots.describe_series([math.nan]) == "no finite values"


def test_labels_from_evidence_are_short_and_plain():
    label = plots.safe_label("x" * 100 + "\n<script>")
    assert len(label) <= 28 and "\n" not in label and "<" not in label
    assert plots.safe_label("$x^2$") == "?x?2?"  # matplotlib would read $...$ as math
