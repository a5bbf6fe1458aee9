"""Report pictures (grader/outputs/plots.py) one kind at a time: which evidence keys draw which
picture, what its words say, and the SVG it makes. The fast tier; tests/test_report.py draws
them all together, on pages."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from grader.checking.compare import (GRAD_HIST_HI, GRAD_HIST_LAYERS, GRAD_HIST_LO,
                                     grad_histogram, grad_histogram_evidence)
from grader.models import CheckResult
from grader.outputs import plots

pytestmark = pytest.mark.fast


def check(evidence: dict, check_id: str = "ex.check") -> CheckResult:
    return CheckResult(id=check_id, exercise="ex", targets=["f"], visibility="visible",
                       points=0, max_points=1, status="failed", evidence=evidence)


def histograms(yours_last: float, *, names=("fc1.weight", "fc1.bias"), sizes=(30, 6)) -> dict:
    """`grad_histograms` evidence as training_loops_verify records it: gradients of size 1e-3
    at step 1 for both runs, `yours_last` for yours at the last step, 1e-4 for the
    reference's."""
    rng = np.random.default_rng(5)

    def flat(scale):
        return np.concatenate([scale * (1 + rng.random(n)) for n in sizes])

    layers = grad_histogram_evidence(list(names), list(sizes), {
        "yours_first": flat(1e-3), "yours_last": flat(yours_last),
        "reference_first": flat(1e-3), "reference_last": flat(1e-4)})
    return {"grad_histograms": {"steps": 5, "reference_steps": 5, "layers": layers}}


# A one-feature problem's loss moments (mean of x = 2.4, of x^2 = 7.5: the Hessian's
# eigenvalues are 15.5 and 0.46, as in manual_backward_verify's sweep) and gradient descent on
# it: at 0.01 it slides down, at 0.1 it jumps across the valley, at 0.5 it leaves the picture.
SURFACE = {"xx": 7.45, "x": 2.4, "xy": 29.0, "y": 9.2, "yy": 113.0}


def descend(lr: float, steps: int = 20, scale: float = 1.0) -> list:
    s = SURFACE
    w, b, path = 0.0, 0.0, []
    for _ in range(steps):
        dw = 2 * (w * s["xx"] + b * s["x"] - s["xy"])
        db = 2 * (w * s["x"] + b - s["y"])
        w, b = w - lr * scale * dw, b - lr * scale * db
        path.append([round(w, 6), round(b, 6)] if abs(w) < 1e300 else None)
    return path


def sweep(yours: dict | None = None, problems: dict | None = None) -> dict:
    yours = yours if yours is not None else {lr: descend(lr) for lr in (0.01, 0.1, 0.5)}
    return {"lr_sweep": {"surface": SURFACE, "steps": 20, "runs": [
        {"lr": lr, "reference": descend(lr), "yours": yours.get(lr),
         "problem": (problems or {}).get(lr, "")} for lr in (0.01, 0.1, 0.5)]}}


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
    "grad-hist": (histograms(1e-9), [
        "layer fc1.weight: median |grad| 1e-3 at step 1, 1e-9 at the last step (reference "
        "1e-3 / 1e-4) \u2014 your gradients vanish", "layer fc1.bias", "step 5"]),
    "lr-sweep": (sweep({0.01: descend(0.01), 0.1: descend(0.1, scale=0.5), 0.5: None},
                       {0.5: "the calls at lr 0.5 timed out after 1 s"}),
                 ["At lr 0.01:", "never crossing the valley", "At lr 0.1: reference",
                  "jumping across the valley", "yours strays up to",
                  "At lr 0.5: reference leaves the picture at step 1",
                  "yours: the calls at lr 0.5 timed out after 1 s"]),
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
    {"grad_histograms": {"layers": [{"name": "w", "yours_first": {"counts": [1] * 3}}]}},
    {"grad_histograms": {"layers": [{"name": "w", "yours_last": {
        "counts": [-1] * 16, "zero": 0, "nonfinite": 0}}]}},   # negative counts
    {"grad_histograms": {"layers": [{"name": "w", "yours_last": {
        "counts": [0] * 16, "zero": 0, "nonfinite": 0}}]}},    # no element at all
    {"grad_histograms": {"layers": "fc1"}},
    {"grad_histograms": [1, 2]},
    {"lr_sweep": {"surface": {**SURFACE, "xx": 2.4 ** 2}, "runs": [{"lr": 0.1}]}},  # no minimum
    {"lr_sweep": {"surface": {**SURFACE, "yy": "nan"}, "runs": [{"lr": 0.1}]}},
    {"lr_sweep": {"surface": SURFACE, "runs": []}},
    {"lr_sweep": {"surface": SURFACE, "runs": ["0.1"]}},
    {"lr_sweep": []},
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


def test_new_pictures_are_deterministic_to_the_byte():
    for kind in ("grad-hist", "lr-sweep"):
        first = plots.pictures_for(check(ONE_KIND[kind][0]), prefix="d")
        again = plots.pictures_for(check(ONE_KIND[kind][0]), prefix="d")
        assert [p.svg for p in first] == [p.svg for p in again] and first, kind
        assert 1_000 < len(first[0].svg) < 40_000, (kind, len(first[0].svg))


@pytest.mark.parametrize("last, words", [
    (1e-4, "Your gradients are of the reference's size throughout."),
    (1e2, "your gradients explode"),
    (1e-3, "your gradients are 10 times the reference's"),   # a decade: no verdict, a factor
    (1e-5, "your gradients are 10 times smaller than the reference's"),
    (0.0, "all zero at the last step"),
    (float("nan"), "not finite at the last step"),
])
def test_gradient_histograms_say_what_the_last_step_shows(last, words):
    evidence = histograms(last)
    alt = plots.pictures_for(check(evidence))[0].alt
    assert words in alt, alt
    if last in (1e-3, 1e-4, 1e-5):
        assert "vanish" not in alt and "explode" not in alt


def test_gradient_histograms_survive_junk_in_some_panels():
    evidence = histograms(1e-9)
    layers = evidence["grad_histograms"]["layers"]
    layers[0]["reference_last"] = "junk"
    layers[1]["yours_last"] = {"counts": [float("inf")] * 16, "zero": 0, "nonfinite": 0}
    layers.append({"name": "$\\frac{1}{0}$<script>" * 5, "yours_first": layers[0]["yours_first"]})
    layers.append(None)
    pictures = plots.pictures_for(check(evidence))
    assert [p.kind for p in pictures] == ["grad-hist"]
    alt = pictures[0].alt
    assert "reference 1e-3 / not recorded" in alt and "<script>" not in alt
    assert "layer fc1.bias: median |grad| 1e-3 at step 1, not recorded at the last step" in alt


def test_a_learning_rate_whose_run_failed_gets_a_panel_saying_so():
    evidence = sweep({0.01: descend(0.01), 0.1: [None] * 20, 0.5: descend(0.5)},
                     {0.1: "no step returned a finite (w[0], b)"})
    alt = plots.pictures_for(check(evidence))[0].alt
    assert "At lr 0.1: reference ends at" in alt and "yours: no step returned a finite" in alt
    # both leave at 0.5 at once: paths are compared only while both are in the picture (two
    # diverging paths 1e17 apart are no finding)
    assert alt.endswith("At lr 0.5: reference leaves the picture at step 1; yours leaves the "
                        "picture at step 1.")


def test_grad_histogram_counts_decades_zeros_and_non_finite():
    h = grad_histogram(np.array([0.0, 0.0, 1e-20, 5e-3, -5e-3, 2.0, 1e9, np.inf, np.nan]))
    assert len(h["counts"]) == GRAD_HIST_HI - GRAD_HIST_LO
    assert h["zero"] == 2 and h["nonfinite"] == 2 and sum(h["counts"]) == 5
    assert h["counts"][0] == 1 and h["counts"][-1] == 1       # clipped into the end bins
    assert h["counts"][-3 - GRAD_HIST_LO] == 2                 # 5e-3 and -5e-3: 1e-3 .. 1e-2
    assert h["median"] == round(math.log10(5e-3), 3)
    assert grad_histogram(np.zeros(4))["median"] is None
    assert grad_histogram(object()) is None


def test_grad_histogram_evidence_caps_layers_and_refuses_a_wrong_length():
    names = [f"l{i}" for i in range(12)]
    out = grad_histogram_evidence(names, [2] * 12, {"yours_first": np.ones(24),
                                                    "reference_first": np.ones(23)})
    assert [r["name"] for r in out] == names[:GRAD_HIST_LAYERS]
    assert all(r["yours_first"]["counts"][-GRAD_HIST_LO] == 2 for r in out)   # |g| = 1
    assert all(r["reference_first"] is None for r in out)
    assert grad_histogram_evidence(["a"], ["x"], {}) == []
