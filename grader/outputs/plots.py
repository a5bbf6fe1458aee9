"""Pictures for the reports: small static SVG figures drawn from the evidence checks record.

Every figure is made here, in the grader process, from `CheckResult.evidence` (plain numbers the
check measured), never in a worker. Matplotlib draws with its Agg/SVG backends through
`matplotlib.figure.Figure` (no pyplot: no global figure state, nothing to close); the SVG is then
made fit for inlining in an HTML page that holds many of them:

- text stays text (`svg.fonttype: none`): a few KB instead of glyph outlines, selectable, and it
  scales with the page;
- ids are prefixed per figure (two inline figures must not share a clip path id) and ids nothing
  refers to are dropped; coordinates are rounded to 0.1 pt; the metadata block, the XML prolog
  and matplotlib's global `*{...}` style rule are removed;
- the fixed width/height become a viewBox the page scales (phone screens), and each figure gets
  `role="img"` with a `<title>` and a `<desc>` that say in words what it shows.

Output is deterministic: same evidence, same bytes (fixed hash salt, no date, fixed sizes).

Evidence read: the keys of `grader.evidence.E` declared `drawn` (loss, validation-loss and
learning-rate curves against the reference's, `grad_ratio`, `grad_errors`, the descent path on
its loss surface and the same descent at three learning rates (`lr_sweep`), per-layer gradient
histograms at the first and last step (`grad_histograms`), broadcasting shapes and strides),
read through that declaration.
Anything malformed (student numbers can be NaN, huge, missing) is drawn as far as it is
meaningful or skipped; a figure never breaks a report.
"""

from __future__ import annotations

import html
import io
import logging
import math
import re
import textwrap
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from grader.evidence import E

if TYPE_CHECKING:  # matplotlib itself is imported lazily, by the first picture
    from matplotlib.typing import RcKeyType

log = logging.getLogger("torchgrade")

# Colour-blind safe pair (blue / orange, Okabe-Ito), and every series also differs in line
# style and marker so that status never rests on colour alone (and prints in grey).
YOURS, REFERENCE, BAD, MUTED = "#0072B2", "#D55E00", "#B42318", "#57606A"
MAX_POINTS = 300  # longest series drawn (evidence is capped at 300 by the checks anyway)
WIDTH, HEIGHT = 5.2, 2.5  # inches; the page scales the viewBox
RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none", "svg.hashsalt": "torchgrade", "font.size": 9,
    "font.family": "DejaVu Sans", "axes.spines.top": False, "axes.spines.right": False,
    "axes.titlesize": 9, "legend.fontsize": 8, "legend.frameon": False,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "lines.linewidth": 1.6,
    "path.simplify": True, "path.simplify_threshold": 0.2,
    # Plain-text tick labels ("1e-06"): mathtext would cost ~20 ms per label to lay out.
    "axes.formatter.use_mathtext": False,
}


class Picture(BaseModel):
    """One figure of a check: inline SVG markup and what it shows in words."""

    kind: str
    title: str
    alt: str
    svg: str


# --------------------------------------------------------------------------- dispatch


def pictures_for(check: Any, *, prefix: str = "", limit: int = 8) -> list[Picture]:
    """The figures that explain a check's evidence (possibly none, at most `limit`), in
    reading order.

    `check` is a `CheckResult` (only `evidence` and `id` are read). Never raises: a figure that
    cannot be drawn from what the check recorded is left out (and logged)."""
    evidence = getattr(check, "evidence", None) or {}
    prefix = prefix or re.sub(r"[^A-Za-z0-9]+", "-", str(getattr(check, "id", "fig")))
    if not evidence:
        return []
    import matplotlib

    pictures: list[Picture] = []
    # Read when artists are made, and when saved. Entered once for all the makers (~0.5 ms
    # each time: most makers find nothing of theirs in the evidence and draw nothing).
    with matplotlib.rc_context(RC):
        for kind, make in MAKERS:
            if len(pictures) >= limit:
                break
            try:
                picture = make(evidence)
                if picture is None:
                    continue
                title, alt, figure = picture
                svg = to_inline_svg(figure, f"{prefix}-{kind}", title, alt)
            except Exception:  # noqa: BLE001 - a picture is never worth a broken report
                log.warning("torchgrade: could not draw the %s picture of %s", kind,
                            getattr(check, "id", "?"), exc_info=True)
                continue
            pictures.append(Picture(kind=kind, title=title, alt=alt, svg=svg))
    return pictures


# --------------------------------------------------------------------------- numbers


def numbers(values: Any, limit: int = MAX_POINTS) -> list[float] | None:
    """A list of floats (NaN for anything that is not a finite number), or None if `values` is
    not a non-empty list."""
    if not isinstance(values, (list, tuple)) or not values:
        return None
    return [number(v) for v in values[:limit]]


def number(value: Any) -> float:
    """`value` as a float; NaN for anything that is not a finite number."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def finite(values: list[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def fmt(x: float) -> str:
    return "not a number" if math.isnan(x) else f"{x:.4g}"


def describe_series(values: list[float]) -> str:
    good = finite(values)
    if not good:
        return "no finite values"
    text = f"from {fmt(values[0])} to {fmt(values[-1])}"
    bad = len(values) - len(good)
    return text + (f" ({bad} not finite)" if bad else "")


def safe_label(text: Any, limit: int = 28) -> str:
    """A label from evidence (parameter names may come from student code): plain characters
    only, so matplotlib never reads `$...$` as math, short enough to fit."""
    label = re.sub(r"[^A-Za-z0-9_.,:=()\[\]/ +-]", "?", str(text))
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def new_figure(width: float = WIDTH, height: float = HEIGHT, *, left: float = 0.62,
               right: float = 0.12, bottom: float = 0.45, top: float = 0.12):
    """A figure with one axes and fixed margins in inches (a layout engine would lay the
    figure out twice: twice the time, for labels whose size is known: short numbers)."""
    # Figure without pyplot: no global state, and no backend switch in the caller's process
    # (a notebook that imports torchgrade keeps its own); saving as SVG needs no canvas.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.add_axes((left / width, bottom / height, 1 - (left + right) / width,
                  1 - (bottom + top) / height))
    return fig


def log_scale_if_wide(ax, *series: list[float]) -> bool:
    """Log y axis when positive values span more than two decades (a loss that falls fast, or
    explodes): both ends stay readable."""
    values = [v for s in series for v in finite(s)]
    if values and min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")
        plain_log_labels(ax.yaxis)
        return True
    return False


def y_limits(ax, yours: list[float], reference: list[float], log: bool) -> None:
    """Limits set from the finite values: matplotlib's own autoscaling gives up on values near
    1e300 (a loss that diverged) and shows 1 to 10. On a log axis a curve that explodes is cut
    four decades above the reference, which stays readable; the text says how far it went."""
    values = finite(yours) + finite(reference)
    if not values:
        return
    lo, hi = min(values), max(values)
    if log:
        if finite(reference):
            hi = min(hi, max(finite(reference)) * 1e4)
        ax.set_ylim(lo / 1.5, min(hi, 1e100) * 1.5)
    elif hi > lo:
        pad = 0.05 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)


def integer_ticks(axis) -> None:
    """Steps and epochs are whole numbers: no tick at 2.5."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def plain_log_labels(axis) -> None:
    """Log-axis tick labels as plain text (the default draws 10^k with mathtext: slow)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def mark_not_finite(ax, values: list[float], label: str) -> None:
    """Where a series stops being a finite number, say so on the plot (matplotlib would leave a
    silent gap)."""
    bad = [i for i, v in enumerate(values) if math.isnan(v)]
    if bad:
        mark_step(ax, bad[0] + 1, len(values), f"{label}: not a number from here", color=BAD,
                  linewidth=1.2, dy=-10, fontsize=8)


def mark_step(ax, x: int, last: int, text: str, *, color: str, linewidth: float, dy: float,
              fontsize: float) -> None:
    """A dotted vertical line at step `x` (of 1..`last`) with `text` at its top, on the side of
    the line that keeps the text in the picture (left of it in the right half)."""
    right = x > (last + 1) / 2
    ax.axvline(x, color=color, linestyle=":", linewidth=linewidth)
    ax.annotate(text, xy=(x, 1), xycoords=("data", "axes fraction"),
                xytext=(-3 if right else 3, dy), textcoords="offset points", fontsize=fontsize,
                color=color, va="top", ha="right" if right else "left")


# --------------------------------------------------------------------------- curves


def curves_figure(yours: list[float], reference: list[float] | None, *, xlabel: str,
                  ylabel: str):
    """None when there is nothing finite to draw (a loss that was never a number: the text
    says so, an empty chart would not)."""
    if not finite(yours) and not finite(reference or []):
        return None
    fig = new_figure()
    ax = fig.axes[0]
    # Yours wide and solid underneath, the reference dashed on top: where they agree both
    # stay visible.
    ax.plot(range(1, len(yours) + 1), yours, color=YOURS, linewidth=2.4,
            marker="o" if len(yours) <= 30 else None, markersize=4, label="yours")
    if reference:
        ax.plot(range(1, len(reference) + 1), reference, color=REFERENCE, linestyle="--",
                linewidth=1.3, marker="s" if len(reference) <= 30 else None, markersize=2.5,
                label="reference")
    log = log_scale_if_wide(ax, yours, reference or [])
    y_limits(ax, yours, reference or [], log)
    ax.set_xlim(0.5, max(len(yours), len(reference or [])) + 0.5)
    integer_ticks(ax.xaxis)
    mark_not_finite(ax, yours, "yours")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="best")
    ax.grid(alpha=0.25)
    return fig


def comparison_words(yours: list[float], reference: list[float] | None, what: str,
                     unit: str) -> str:
    text = (f"Line chart of {what} per {unit}: yours {describe_series(yours)} "
            f"over {len(yours)} {unit}s")
    if reference:
        text += f"; the reference {describe_series(reference)} over {len(reference)} {unit}s"
        pairs = [(a, b) for a, b in zip(yours, reference) if not (math.isnan(a) or math.isnan(b))]
        scale = max([abs(b) for _, b in pairs] + [1e-12])
        first = next((i for i, (a, b) in enumerate(zip(yours, reference))
                      if math.isnan(a) != math.isnan(b)
                      or abs(a - b) > 1e-3 * scale), None)
        text += (". They agree at every step" if first is None and len(yours) == len(reference)
                 else f". They first differ at {unit} {first + 1}" if first is not None
                 else ". They have different lengths")
    return text + "."


def loss_picture(evidence: dict):
    yours = numbers(E.loss_curve.get(evidence))
    if yours is None or len(yours) < 2:
        return None
    reference = numbers(E.reference_loss_curve.get(evidence))
    fig = curves_figure(yours, reference, xlabel="step", ylabel="loss")
    if fig is None:
        return None
    title = "Loss per batch: yours against the reference" if reference else "Loss per batch"
    return title, comparison_words(yours, reference, "the training loss", "step"), fig


def val_loss_picture(evidence: dict):
    yours = numbers(E.val_loss_curve.get(evidence))
    if yours is None:
        return None
    reference = numbers(E.reference_val_loss_curve.get(evidence))
    fig = curves_figure(yours, reference, xlabel="epoch", ylabel="validation loss")
    if fig is None:
        return None
    if reference:
        best = min(range(len(reference)), key=lambda i: (math.isnan(reference[i]), reference[i]))
        mark_step(fig.axes[0], best + 1, len(reference), "reference best", color=MUTED,
                  linewidth=0.8, dy=-2, fontsize=7)
    return ("Validation loss per epoch: yours against the reference",
            comparison_words(yours, reference, "the validation loss", "epoch"), fig)


def lr_picture(evidence: dict):
    yours = numbers(E.lr_per_step.get(evidence))
    if yours is None or len(yours) < 2:
        return None
    reference = numbers(E.reference_lr_per_step.get(evidence))
    fig = new_figure(WIDTH, 2.1)
    ax = fig.axes[0]
    ax.step(range(1, len(yours) + 1), yours, where="mid", color=YOURS, linewidth=2.4,
            label="yours")
    if reference:
        ax.step(range(1, len(reference) + 1), reference, where="mid", color=REFERENCE,
                linestyle="--", linewidth=1.3, label="reference")
    ax.set_xlabel("optimizer step")
    integer_ticks(ax.xaxis)
    ax.set_ylabel("learning rate")
    ax.legend(loc="best")
    ax.grid(alpha=0.25)
    changes = [i + 1 for i in range(1, len(yours)) if yours[i] != yours[i - 1]]
    words = (f"Step chart of the learning rate each optimizer step used: yours "
             f"{describe_series(yours)}, changing at {len(changes)} step"
             f"{'' if len(changes) == 1 else 's'}"
             + (f" (first at step {changes[0]})" if changes else ""))
    if reference:
        ref_changes = [i + 1 for i in range(1, len(reference)) if reference[i] != reference[i - 1]]
        words += (f"; the reference changes at {len(ref_changes)} step"
                  f"{'' if len(ref_changes) == 1 else 's'}"
                  + (f" (first at step {ref_changes[0]})" if ref_changes else ""))
    return "Learning rate at every optimizer step", words + ".", fig


def grad_ratio_picture(evidence: dict):
    raw = E.grad_ratio.get(evidence)
    if not isinstance(raw, list) or not raw:
        return None
    # One list (one training run) or one list per case (several runs): the first case that
    # goes wrong is the one worth showing, else the last.
    found = [numbers(c) for c in raw] if isinstance(raw[0], list) else [numbers(raw)]
    cases = [c for c in found if c]
    if not cases:
        return None
    ratios = next((c for c in cases if any(math.isnan(v) or abs(v - 1) > 1e-3 for v in c)),
                  cases[-1])
    fig = new_figure(WIDTH, 2.2)
    ax = fig.axes[0]
    steps = list(range(1, len(ratios) + 1))
    ok = [not math.isnan(v) and abs(v - 1) <= 1e-3 for v in ratios]
    heights = [0 if math.isnan(v) else v for v in ratios]
    bars = ax.bar(steps, heights, color=[YOURS if g else BAD for g in ok], width=0.6)
    for bar, good in zip(bars, ok):
        if not good:
            bar.set_hatch("///")
            bar.set_edgecolor("white")
    ax.axhline(1.0, color=REFERENCE, linestyle="--", linewidth=1.2, label="right: 1\u00d7")
    ax.set_ylim(min(0.0, min(heights) * 1.15), max(1.3, max(heights) * 1.15))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("p.grad / right gradient")
    ax.set_xticks(steps if len(steps) <= 20 else steps[:: max(1, len(steps) // 10)])
    ax.legend(loc="upper left")
    ax.grid(axis="y", alpha=0.25)
    wrong = [(i + 1, v) for i, (v, g) in enumerate(zip(ratios, ok)) if not g]
    words = (f"Bar chart of p.grad at each of {len(ratios)} optimizer steps, measured in units of "
             "the gradient that step should use (1 is right). ")
    words += ("Every step is at 1." if not wrong else
              f"{len(wrong)} step{'s are' if len(wrong) > 1 else ' is'} off, hatched: "
              + ", ".join(f"step {k} at {fmt(v)}" for k, v in wrong[:6])
              + (" ..." if len(wrong) > 6 else "") + ".")
    return "Gradient used by each optimizer step", words, fig


def grad_errors_picture(evidence: dict):
    entries = E.grad_errors.get(evidence)
    if not isinstance(entries, list) or not entries:
        return None
    rows = []
    for e in entries[:16]:
        if not isinstance(e, dict):
            continue
        ratio = number(e.get("error"))
        allowed = number(e.get("allowed"))
        if math.isnan(allowed) or allowed <= 0:
            continue
        rows.append((safe_label(e.get("name", "?")), ratio, allowed, e.get("ratio")))
    if not rows:
        return None
    # The worst error in units of what the tolerance allows there: <= 1 passes.
    units = [math.inf if math.isnan(err) else err / allowed for _, err, allowed, _ in rows]
    shown = [min(max(u, 1e-6), 1e8) for u in units]
    longest = max(len(name) for name, *_ in rows)
    fig = new_figure(WIDTH + 0.6, 0.75 + 0.3 * len(rows), left=0.15 + 0.065 * longest,
                     top=0.2, right=1.7)
    ax = fig.axes[0]
    y = list(range(len(rows)))[::-1]
    ok = [u <= 1 for u in units]
    bars = ax.barh(y, shown, color=[YOURS if g else BAD for g in ok], height=0.6, left=1e-6)
    for bar, good in zip(bars, ok):
        if not good:
            bar.set_hatch("///")
            bar.set_edgecolor("white")
    ax.set_xscale("log")
    plain_log_labels(ax.xaxis)
    ax.set_xlim(1e-6, max(10, max(shown) * 5))
    ax.axvline(1.0, color=REFERENCE, linestyle="--", linewidth=1.2)
    ax.annotate("tolerance", xy=(1.0, 1), xycoords=("data", "axes fraction"), xytext=(0, 2),
                textcoords="offset points", fontsize=7, color="#8A3C00", va="bottom",
                ha="center")
    ax.set_yticks(y)
    ax.set_yticklabels([name for name, *_ in rows])
    for yy, u, good, (_, _, _, r) in zip(y, units, ok, rows):
        text = ("not finite" if math.isinf(u) else f"{u:.2g}\u00d7") + ("" if good else "  \u2718")
        if isinstance(r, (int, float)) and math.isfinite(r):
            text += f"  (= {r:.3g} \u00d7 the right value)"
        ax.annotate(text, xy=(min(max(u, 1e-6), 1e8) if not math.isinf(u) else 1e8, yy),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_xlabel("worst error \u00f7 allowed error (log scale; right of the line fails)")
    ax.grid(axis="x", alpha=0.25)
    words = ("Horizontal bar chart, one bar per gradient, of its worst element's error divided "
             "by the error the check allows (1 is the limit): "
             + "; ".join(f"{name} {'not finite' if math.isinf(u) else f'{u:.2g} times'}"
                         f"{'' if good else ' (too far)'}"
                         for (name, *_), u, good in zip(rows, units, ok)) + ".")
    multiples = [f"{name} is {float(r):.3g} times the right gradient" for name, _, _, r in rows
                 if isinstance(r, (int, float)) and math.isfinite(r)]
    if multiples:
        words += " " + "; ".join(multiples) + "."
    return "How far each gradient is from autograd's", words, fig


# --------------------------------------------------------------------------- descent path


def descent_picture(evidence: dict):
    """The path of a gradient descent of (w, b) on the contours of its loss, on a one-feature
    problem whose loss L(w, b) = mean((w x + b - y)^2) is fixed by five moments of the data."""
    moments = E.loss_surface.get(evidence)
    reference = points(E.reference_descent_path.get(evidence))
    yours = points(E.descent_path.get(evidence))
    if not isinstance(moments, dict) or not reference:
        return None
    import numpy as np

    sxx, sx, sxy, sy, syy = (float(moments[k]) for k in ("xx", "x", "xy", "y", "yy"))

    def loss(w, b):
        return w * w * sxx + 2 * w * b * sx + b * b - 2 * w * sxy - 2 * b * sy + syy

    det = sxx - sx * sx
    w_star, b_star = (sxy - sx * sy) / det, (sy * sxx - sx * sxy) / det
    frame = [(0.0, 0.0), (w_star, b_star)] + [p for p in reference if p]
    ws, bs = [p[0] for p in frame], [p[1] for p in frame]
    span = max(max(ws) - min(ws), max(bs) - min(bs), 1e-6)
    w_lo, w_hi = min(ws) - 0.25 * span, max(ws) + 0.25 * span
    b_lo, b_hi = min(bs) - 0.25 * span, max(bs) + 0.25 * span
    W, B = np.meshgrid(np.linspace(w_lo, w_hi, 60), np.linspace(b_lo, b_hi, 60))
    Z = loss(W, B)
    floor = loss(w_star, b_star)
    levels = floor + (Z.max() - floor) * np.geomspace(2e-3, 1, 9)

    fig = new_figure(WIDTH, 3.3, right=1.15)
    ax = fig.axes[0]
    ax.contour(W, B, Z, levels=levels, colors=MUTED, linewidths=0.6, alpha=0.7)
    leaves = None  # the step after which your path is out of the frame
    if yours:
        track = [(0.0, 0.0)]
        for p in yours:
            if p is None:
                break
            track.append((min(max(p[0], w_lo - 10 * span), w_hi + 10 * span),
                          min(max(p[1], b_lo - 10 * span), b_hi + 10 * span)))
        leaves = next((k for k, (w, b) in enumerate(track)
                       if not (w_lo <= w <= w_hi and b_lo <= b <= b_hi)), None)
        ax.plot([p[0] for p in track], [p[1] for p in track], color=YOURS, linewidth=2.4,
                marker="o", markersize=4, label="yours")
        if leaves is not None:
            ax.annotate(f"yours leaves the picture at step {leaves}", xy=(0.02, 0.02),
                        xycoords="axes fraction", fontsize=8, color=BAD)
    ref_track = [(0.0, 0.0)] + [p for p in reference if p]
    ax.plot([p[0] for p in ref_track], [p[1] for p in ref_track], color=REFERENCE,
            linestyle="--", linewidth=1.3, marker="s", markersize=2.5, label="reference")
    ax.plot([0], [0], marker="D", color="black", markersize=5, linestyle="none", label="start")
    ax.plot([w_star], [b_star], marker="*", color="black", markersize=9, linestyle="none",
            label="minimum")
    ax.set_xlim(w_lo, w_hi)
    ax.set_ylim(b_lo, b_hi)
    ax.set_xlabel("w")
    ax.set_ylabel("b")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    words = (f"Contour map of the loss over w and b for a one-feature linear regression, minimum "
             f"at w = {w_star:.3g}, b = {b_star:.3g}. The reference gradient descent starts at "
             f"(0, 0) and after {len(reference)} steps reaches w = {ref_track[-1][0]:.3g}, "
             f"b = {ref_track[-1][1]:.3g}.")
    if yours:
        last = next((p for p in reversed(yours) if p), None)
        words += (" Yours " + (f"ends at w = {last[0]:.3g}, b = {last[1]:.3g}" if last else
                               "returned no usable point")
                  + ("" if leaves is None else f" and leaves the picture at step {leaves}")
                  + ".")
        far = max((math.dist(p, q) for p, q in zip(yours, reference) if p and q), default=0.0)
        words += (" It follows the reference path." if far <= 1e-3 * span
                  else f" It strays up to {far:.3g} from the reference path.")
    else:
        words += " Your path could not be recorded."
    return "Gradient descent on the loss surface: your path and the reference's", words, fig


def points(values: Any) -> list[tuple[float, float] | None] | None:
    """[(w, b), ...] from a list of pairs; None for a pair that is not two finite numbers."""
    if not isinstance(values, list) or not values:
        return None
    out: list[tuple[float, float] | None] = []
    for p in values[:MAX_POINTS]:
        pair = numbers(p) if isinstance(p, (list, tuple)) and len(p) == 2 else None
        out.append(None if not pair or any(math.isnan(v) for v in pair) else (pair[0], pair[1]))
    return out


# --------------------------------------------------------------------------- learning rates


def quadratic_loss(moments: Any):
    """(loss(w, b), (w*, b*), steep direction) of L = mean((w x + b - y)^2) from its five
    moments {xx, x, xy, y, yy}; None when they are not finite numbers or fix no single
    minimum."""
    if not isinstance(moments, dict):
        return None
    values = [number(moments.get(k)) for k in ("xx", "x", "xy", "y", "yy")]
    if any(math.isnan(v) for v in values):
        return None
    sxx, sx, sxy, sy, syy = values
    det = sxx - sx * sx
    if not det > 1e-12 * max(sxx, 1e-300):
        return None

    def loss(w, b):
        return w * w * sxx + 2 * w * b * sx + b * b - 2 * w * sxy - 2 * b * sy + syy

    # The Hessian's eigenvector of the larger eigenvalue: across the valley.
    half_gap = math.hypot((sxx - 1) / 2, sx)
    steep = (sx, (1 - sxx) / 2 + half_gap) if abs(sx) > 1e-12 else (
        (1.0, 0.0) if sxx >= 1 else (0.0, 1.0))
    norm = math.hypot(*steep) or 1.0
    return loss, ((sxy - sx * sy) / det, (sy * sxx - sx * sxy) / det), (
        steep[0] / norm, steep[1] / norm)


def leaves_at(track: list[tuple[float, float] | None], box: tuple[float, float, float, float]
              ) -> int | None:
    """The first step (1-based) whose point is missing or outside `box` (w_lo, w_hi, b_lo,
    b_hi); None when every point stays in."""
    w_lo, w_hi, b_lo, b_hi = box
    for k, p in enumerate(track, start=1):
        if p is None or not (w_lo <= p[0] <= w_hi and b_lo <= p[1] <= b_hi):
            return k
    return None


def crossings(track: list[tuple[float, float] | None], minimum: tuple[float, float],
              steep: tuple[float, float]) -> int:
    """How many steps jump across the valley's floor (the line through the minimum along its
    floor): sign changes of the offset from the minimum in the steep direction, from (0, 0).
    Offsets within 1e-4 of the start's distance count as on the floor (paths are recorded to
    6 digits: a path that has settled on the floor would otherwise cross it at random)."""
    sides = []
    tolerance = 1e-4 * max(math.hypot(*minimum), 1e-12)
    for p in [(0.0, 0.0)] + [q for q in track if q is not None]:
        d = (p[0] - minimum[0]) * steep[0] + (p[1] - minimum[1]) * steep[1]
        if abs(d) > tolerance:
            sides.append(d > 0)
    return sum(a != b for a, b in zip(sides, sides[1:]))


PATH_STYLES: dict[str, dict[str, Any]] = {
    "reference": {"color": REFERENCE, "linestyle": "--", "linewidth": 1.2, "marker": "s",
                  "markersize": 2.2},
    "yours": {"color": YOURS, "linewidth": 2.2, "marker": "o", "markersize": 3.2}}


def lr_sweep_picture(evidence: dict):
    """The same descent at three learning rates, one contour panel each: your path against the
    reference's, and the step at which either leaves the picture."""
    sweep = E.lr_sweep.get(evidence)
    if not isinstance(sweep, dict):
        return None
    surface = quadratic_loss(sweep.get("surface"))
    raw = sweep.get("runs")
    if surface is None or not isinstance(raw, list) or not raw:
        return None
    loss, (w_star, b_star), steep = surface
    runs = []
    for run in raw[:3]:
        if not isinstance(run, dict):
            return None
        lr = number(run.get("lr"))
        reference = points(run.get("reference")) or []
        yours = points(run.get("yours"))
        reference = reference if any(reference) else []  # not one usable point: no path
        yours = yours if yours and any(yours) else None
        problem = safe_label(run.get("problem") or "", 70)
        runs.append((lr, reference, yours, problem))
    import numpy as np

    # One frame for all panels: the start, the minimum and every reference point no higher
    # than the start (a path that climbs out of the bowl leaves the picture).
    start_loss = loss(0.0, 0.0)
    frame = [(0.0, 0.0), (w_star, b_star)] + [
        p for _, ref, _, _ in runs for p in ref if p and loss(*p) <= start_loss]
    ws, bs = [p[0] for p in frame], [p[1] for p in frame]
    span = max(max(ws) - min(ws), max(bs) - min(bs), 1e-6)
    box = (min(ws) - 0.15 * span, max(ws) + 0.15 * span,
           min(bs) - 0.15 * span, max(bs) + 0.15 * span)
    # The loss is a quadratic: its contours are ellipses around the minimum, drawn from the
    # Hessian's eigenvectors with 49 points each (a contour of a sampled grid would cost three
    # times the bytes, times three panels). Levels: the start's height over the floor times
    # 1e-3 .. 4, evenly in log.
    sxx, sx = (number(sweep["surface"].get(k)) for k in ("xx", "x"))
    eigenvalues, vectors = np.linalg.eigh(np.array([[sxx, sx], [sx, 1.0]]))
    t = np.linspace(0, 2 * np.pi, 49)
    rise = max(start_loss - loss(w_star, b_star), 1e-12)
    ellipses = []
    for c in rise * np.geomspace(1e-3, 4, 8):
        radii = np.sqrt(c / eigenvalues)
        ring = vectors @ np.vstack([radii[0] * np.cos(t), radii[1] * np.sin(t)])
        ellipses.append((w_star + ring[0], b_star + ring[1]))

    from matplotlib.figure import Figure

    width, height = WIDTH + 1.0, 2.75
    fig = Figure(figsize=(width, height))
    words = [f"Three contour maps of the loss over w and b of a one-feature linear regression "
             f"(minimum at w = {w_star:.3g}, b = {b_star:.3g}), one per learning rate, each "
             f"with {fmt(number(sweep.get('steps')))} gradient-descent steps from (0, 0): yours "
             f"(solid) and the reference's (dashed)."]
    panel = (width - 0.5) / len(runs)
    for i, (lr, reference, yours, problem) in enumerate(runs):
        ax = fig.add_axes(((0.42 + i * panel) / width, 0.5 / height, (panel - 0.22) / width,
                           1 - 0.95 / height))
        for ws_, bs_ in ellipses:
            ax.plot(ws_, bs_, color=MUTED, linewidth=0.5, alpha=0.6)
        ax.set_xlim(box[0], box[1])
        ax.set_ylim(box[2], box[3])
        ax.set_title(f"lr = {fmt(lr)}")
        ax.set_xlabel("w")
        # One frame for all: the b axis is labelled once (ticks cost bytes in every panel).
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(4))
        if i == 0:
            ax.set_ylabel("b")
            ax.yaxis.set_major_locator(MaxNLocator(5))
        else:
            ax.set_yticks([])
        ax.tick_params(labelsize=7)
        marks = []
        sentence = f"At lr {fmt(lr)}:"
        for who, track, style in (("reference", reference, PATH_STYLES["reference"]),
                                  ("yours", yours, PATH_STYLES["yours"])):
            if not track:
                sentence += (f" yours: {problem or 'no path recorded'}." if who == "yours"
                             else " no reference path.")
                if who == "yours":
                    ax.annotate(textwrap.fill(f"yours: {problem or 'no path recorded'}", 26),
                                xy=(0.03, 0.03), xycoords="axes fraction", fontsize=6.5,
                                color=BAD)
                continue
            out = leaves_at(track, box)
            # Drawn up to the first point out of the picture (clipped near it), no further:
            # a diverging path would only sweep lines across the panel.
            clipped = [(0.0, 0.0)]
            for p in track[:out]:
                if p is None:
                    break
                clipped.append((min(max(p[0], box[0] - span), box[1] + span),
                                min(max(p[1], box[2] - span), box[3] + span)))
            ax.plot([p[0] for p in clipped], [p[1] for p in clipped], label=who, **style)
            ends = next((p for p in reversed(track) if p), None)
            if out is not None and track[out - 1] is None:
                marks.append(f"{who}: no point from step {out}")
                sentence += f" {who} has no usable point from step {out} on"
            elif out is not None:
                marks.append(f"{who} leaves at step {out}")
                sentence += f" {who} leaves the picture at step {out}"
            elif ends is not None:
                sentence += f" {who} ends at w = {ends[0]:.3g}, b = {ends[1]:.3g}"
            across = crossings(track[:out - 1] if out else track, (w_star, b_star), steep)
            sentence += (f" after jumping across the valley {across} time"
                         f"{'' if across == 1 else 's'};" if across and out
                         else f", jumping across the valley {across} time"
                         f"{'' if across == 1 else 's'};" if across
                         else ";" if out else ", never crossing the valley;")
        for j, mark in enumerate(marks):
            ax.annotate(mark, xy=(0.03, 0.97 - 0.1 * j), xycoords="axes fraction", fontsize=6.5,
                        va="top", color=BAD if mark.startswith("yours") else "#8A3C00")
        ax.plot([0], [0], marker="D", color="black", markersize=4, linestyle="none")
        ax.plot([w_star], [b_star], marker="*", color="black", markersize=8, linestyle="none")
        if yours and reference:
            # Compared while both are in the picture: two diverging paths are both just gone.
            inside = min(leaves_at(yours, box) or len(yours) + 1,
                         leaves_at(reference, box) or len(reference) + 1) - 1
            far = max((math.dist(p, q) for p, q in zip(yours[:inside], reference[:inside])
                       if p and q), default=math.nan)
            sentence = sentence.rstrip(";,") + (
                "; yours follows the reference." if far <= 1e-3 * span
                else f"; yours strays up to {far:.3g} from the reference." if far == far
                else ".")
        words.append(sentence.rstrip(";,") + ("" if sentence.endswith(".") else "."))
    handles = fig.axes[0].get_legend_handles_labels()
    if handles[0]:
        fig.legend(*handles, loc="upper right", ncol=2, fontsize=7, frameon=False)
    return ("Gradient descent at three learning rates: your paths and the reference's",
            " ".join(words), fig)


# --------------------------------------------------------------------------- gradient histograms

HIST_LO, HIST_HI = -12, 4  # grader.checking.compare.GRAD_HIST_LO / _HI (decades)
HIST_SLOTS = HIST_HI - HIST_LO
ZERO_SLOT, INF_SLOT = HIST_LO - 3, HIST_HI + 2  # left edges of the zeros' and non-finite bars


HIST_STYLES: dict[str, dict[str, Any]] = {
    "yours": {"color": YOURS, "linewidth": 1.8},
    "reference": {"color": REFERENCE, "linestyle": "--", "linewidth": 1.2}}


def histogram(value: Any) -> dict | None:
    """A recorded gradient histogram as {"counts": 16 floats, "zero", "nonfinite", "median"
    (log10, NaN if none)}, or None when it is malformed."""
    if not isinstance(value, dict):
        return None
    counts = numbers(value.get("counts"), HIST_SLOTS + 1)
    if counts is None or len(counts) != HIST_SLOTS or any(math.isnan(c) or c < 0
                                                          for c in counts):
        return None
    zero, nonfinite = number(value.get("zero")), number(value.get("nonfinite"))
    if math.isnan(zero) or math.isnan(nonfinite) or zero < 0 or nonfinite < 0:
        return None
    total = sum(counts) + zero + nonfinite
    if total <= 0:
        return None
    return {"counts": counts, "zero": zero, "nonfinite": nonfinite, "total": total,
            "median": number(value.get("median"))}


def decade(log10_value: float) -> str:
    """A power of ten as text: "1e-3", "1", "1e2"; "0" for no value (all zero)."""
    if math.isnan(log10_value):
        return "0"
    k = round(log10_value)
    return "1" if k == 0 else f"1e{k}"


def hist_state(h: dict | None) -> str:
    """The median |grad| as a power of ten, or what stands in its way (in words)."""
    if h is None:
        return "not recorded"
    if h["nonfinite"]:
        return f"{int(h['nonfinite'])} of {int(h['total'])} not finite"
    if h["zero"] == h["total"]:
        return "all zero"
    return decade(h["median"])


def median_words(first: dict | None, last: dict | None) -> str:
    """"median |grad| 1e-3 at step 1, 1e-9 at the last step" (the words adapt when a
    histogram has no median to give)."""
    a, b = hist_state(first), hist_state(last)
    if a.startswith("1e") or a == "0":
        a = f"median |grad| {a}"
    elif b.startswith("1e") or b == "0":
        b = f"median |grad| {b}"
    return f"{a} at step 1, {b} at the last step"


def verdict_words(yours: dict | None, reference: dict | None) -> str:
    """What the last step's histograms say, in three words: vanish, explode, or nothing."""
    if yours is None or reference is None:
        return ""
    if yours["nonfinite"] and not reference["nonfinite"]:
        return "your gradients are not finite"
    if yours["zero"] == yours["total"] and reference["zero"] < reference["total"]:
        return "your gradients are all zero"
    mine, theirs = yours["median"], reference["median"]
    if math.isnan(mine) or math.isnan(theirs):
        return ""
    # Two decades or more apart: vanishing or exploding; half a decade: a factor worth saying.
    if mine <= theirs - 2:
        return "your gradients vanish"
    if mine >= theirs + 2:
        return "your gradients explode"
    if mine >= theirs + 0.5:
        return f"your gradients are {10 ** (mine - theirs):.2g} times the reference's"
    if mine <= theirs - 0.5:
        return f"your gradients are {10 ** (theirs - mine):.2g} times smaller than the reference's"
    return ""


def grad_histograms_picture(evidence: dict):
    """Small multiples: one row per parameter tensor, the first and the last optimizer step
    side by side, each the share of gradient elements per decade of |grad|, yours (solid,
    filled) against the reference's (dashed), with the zeros and non-finite counted apart."""
    data = E.grad_histograms.get(evidence)
    if not isinstance(data, dict) or not isinstance(data.get("layers"), list):
        return None
    rows = []
    for layer in data["layers"][:8]:
        if not isinstance(layer, dict):
            continue
        hists = {k: histogram(layer.get(k)) for k in
                 ("yours_first", "yours_last", "reference_first", "reference_last")}
        if hists["yours_first"] or hists["yours_last"]:
            rows.append((safe_label(layer.get("name", "?"), 22), hists))
    if not rows:
        return None
    last = number(data.get("steps"))
    ref_last = number(data.get("reference_steps"))
    last_text = f"step {int(last)}" if not math.isnan(last) and last >= 1 else "last step"

    from matplotlib.figure import Figure

    row_h, top, bottom, left, right, gap = 0.62, 0.5, 0.5, 1.35, 0.1, 0.25
    width = WIDTH + 0.6
    height = top + bottom + row_h * len(rows)
    fig = Figure(figsize=(width, height))
    # One axes for all the panels, in inches: an axes of its own per panel (up to 16) cost
    # ~15 ms each to make and again to draw, most of the report's drawing time.
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    col_w, panel_h = (width - left - right - gap) / 2, row_h - 0.16
    x_lo, x_hi = ZERO_SLOT - 0.3, INF_SLOT + 1.3
    edges = [HIST_LO + i for i in range(HIST_SLOTS + 1)]
    ticks = [ZERO_SLOT + 0.5, -12, -8, -4, 0, 4, INF_SLOT + 0.5]
    labels = ["0", "1e-12", "1e-8", "1e-4", "1", "1e4", "inf"]
    tick = 2 / 72  # inches: a 2 pt tick mark
    labelled = set()
    frame_x: list[float] = []
    frame_y: list[float] = []
    for r, (name, hists) in enumerate(rows):
        for c, (when, step_text) in enumerate((("first", "step 1"), ("last", last_text))):
            x0 = left + c * (col_w + gap)
            y0 = bottom + (len(rows) - 1 - r) * row_h + 0.08

            def px(slot: float, x0: float = x0) -> float:
                return x0 + (slot - x_lo) / (x_hi - x_lo) * col_w

            def py(share: float, y0: float = y0) -> float:
                return y0 + share / 1.05 * panel_h

            # The panel's left and bottom spines, then its tick marks: drawn as one line.
            frame_x += [x0, x0, x0 + col_w, math.nan]
            frame_y += [y0 + panel_h, y0, y0, math.nan]
            for who, style in (("yours", HIST_STYLES["yours"]),
                               ("reference", HIST_STYLES["reference"])):
                h = hists[f"{who}_{when}"]
                if h is None:
                    continue
                share = [py(v / h["total"]) for v in h["counts"]]
                xs = [px(e) for e in edges]
                if who == "yours":  # filled underneath, so the dashed reference stays visible
                    ax.stairs(share, xs, baseline=y0, fill=True, alpha=0.2, color=YOURS,
                              linewidth=0)
                ax.stairs(share, xs, baseline=y0,
                          label=None if who in labelled else who, **style)
                labelled.add(who)
                for slot, v in ((ZERO_SLOT, h["zero"]), (INF_SLOT, h["nonfinite"])):
                    if v:
                        ax.stairs([py(v / h["total"])], [px(slot), px(slot + 1)], baseline=y0,
                                  label=None, hatch="///" if who == "yours" else None, **style)
                if x_lo <= h["median"] <= x_hi:  # NaN: no median, never drawn
                    ax.plot([px(h["median"])] * 2, [y0 + 0.75 * panel_h, y0 + panel_h],
                            **style)
            for at, text in zip(ticks, labels):
                frame_x += [px(at), px(at), math.nan]
                frame_y += [y0, y0 - tick, math.nan]
                if r == len(rows) - 1:
                    ax.text(px(at), y0 - tick - 0.03, text, ha="center", va="top",
                            fontsize=7)
            if r == 0:
                ax.text(x0 + col_w / 2, y0 + panel_h + 0.05, step_text, ha="center",
                        va="bottom", fontsize=8)
            if c == 0:
                ax.text(x0 - 0.1, y0 + panel_h / 2, name, ha="right", va="center",
                        fontsize=7.5)
            verdict = verdict_words(hists[f"yours_{when}"], hists[f"reference_{when}"])
            if verdict:  # short in the panel (the description says it whole)
                short_verdict = (verdict.replace("your gradients ", "").replace("are ", "")
                                 .replace(" times the reference's", "\u00d7 the reference")
                                 .replace(" times smaller than the reference's",
                                          "\u00d7 smaller"))
                ax.text(x0 + 0.99 * col_w, y0 + 0.98 / 1.05 * panel_h, short_verdict,
                        ha="right", va="top", fontsize=6.5, color=BAD)
    ax.plot(frame_x, frame_y, color="black", linewidth=0.8)
    handles = ax.get_legend_handles_labels()
    if handles[0]:
        fig.legend(*handles, loc="upper left", ncol=2, fontsize=7, frameon=False,
                   bbox_to_anchor=(0.01, 1.0))
    fig.text(0.5, 0.03, "|grad| per element (log scale, one bar per decade; "
             "0 and inf counted apart)", ha="center", fontsize=7.5)

    parts = []
    worst = ""
    for name, h in rows:
        text = f"layer {name}: {median_words(h['yours_first'], h['yours_last'])}"
        if h["reference_first"] or h["reference_last"]:
            text += (f" (reference {hist_state(h['reference_first'])} / "
                     f"{hist_state(h['reference_last'])})")
        verdict = verdict_words(h["yours_last"], h["reference_last"]) or \
            verdict_words(h["yours_first"], h["reference_first"])
        if verdict:
            text += f" \u2014 {verdict}"
            worst = worst or verdict
        parts.append(text)
    ref_note = (f", {int(ref_last)} for the reference" if not math.isnan(ref_last)
                and ref_last != last else "")
    words = ("Histograms of log10 |grad| per parameter tensor at the first and the last "
             f"optimizer step ({last_text}{ref_note}), yours (solid, filled) against the "
             "reference's (dashed) on the same data: " + "; ".join(parts) + ". "
             + (f"In short: {worst}." if worst else
                "Your gradients are of the reference's size throughout."))
    return "Gradients per layer at the first and the last step", words, fig


# --------------------------------------------------------------------------- broadcasting


def shape_of(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, (list, tuple)) or len(value) > 12:
        return None
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        return None


def broadcast_picture(evidence: dict):
    """Shapes aligned from the right, one row each, then the result: the picture of NumPy's
    rule. A column where sizes clash is marked; stretched axes (1 or missing) are hatched."""
    raw = E.shapes.get(evidence)
    if not isinstance(raw, list) or not raw or len(raw) > 8:
        return None
    shapes = [s for s in map(shape_of, raw) if s is not None]
    if len(shapes) != len(raw):
        return None
    expected = shape_of(E.expected_shape.get(evidence))
    got = shape_of(E.got_shape.get(evidence))
    labels = [safe_label(x, 14) for x in E.shape_labels.get(evidence, [])] or [
        f"shape {i + 1}" for i in range(len(shapes))]
    extra = [(safe_label(name, 16), strides)
             for name, key in (("expected strides", E.expected_strides),
                               ("your strides", E.got_strides))
             if (strides := shape_of(key.get(evidence))) is not None]
    ndim = max([len(s) for s in shapes] + [len(expected or ()), len(got or ())]
               + [len(v) for _, v in extra] + [1])
    clash = []
    for k in range(1, ndim + 1):
        sizes = {s[-k] for s in shapes if len(s) >= k and s[-k] != 1}
        if len(sizes) > 1:
            clash.append(ndim - k)
    rows: list[tuple[str, tuple[int, ...] | None, str]] = [
        (labels[i] if i < len(labels) else f"shape {i + 1}", s, "input")
        for i, s in enumerate(shapes)]
    rows.append(("result", expected, "result"))
    if got is not None and got != expected:
        rows.append(("yours", got, "yours"))
    rows += [(name, value, "extra") for name, value in extra]

    from matplotlib.patches import Rectangle

    # What should have come out, per row, for marking the cells of yours that differ.
    want = {"yours": expected, "your strides": shape_of(E.expected_strides.get(evidence))}
    cols = max(ndim, 3.4 if expected is None else 0)
    head = 0.45 if clash else 0.0
    fig = new_figure(1.6 + 0.62 * cols, 0.3 + 0.36 * len(rows) + 0.36 * head, left=0, right=0,
                     bottom=0, top=0)
    ax = fig.axes[0]
    ax.set_xlim(-2.6, cols + 0.05)
    ax.set_ylim(-len(rows) + 0.05, 0.95 + head)
    ax.axis("off")
    number_box = {"boxstyle": "square,pad=0.12", "facecolor": "white", "edgecolor": "none"}
    for r, (label, shape, kind) in enumerate(rows):
        y = -r
        ax.text(-0.15, y + 0.45, label, ha="right", va="center", fontsize=8,
                color=BAD if label in want else "black",
                fontweight="bold" if kind == "result" else "normal")
        if shape is None:
            ax.text(0.05, y + 0.45, "incompatible: ValueError", va="center", fontsize=8,
                    color=BAD)
            continue
        other = want.get(label)
        for k, size in enumerate(shape):
            col = ndim - len(shape) + k
            stretched = kind == "input" and size == 1 and any(
                len(s) >= ndim - col and s[col - ndim] != 1 for s in shapes)
            clashing = kind == "input" and col in clash and size != 1
            wrong = other is not None and (len(other) != len(shape) or other[k] != size)
            bad = clashing or wrong
            face = "#fde2e1" if bad else "#dff3e4" if kind == "result" else "#e8f1fa"
            ax.add_patch(Rectangle((col + 0.04, y + 0.08), 0.92, 0.74, facecolor=face,
                                   edgecolor=BAD if bad else MUTED,
                                   linewidth=1.6 if bad else 1.0,
                                   hatch="///" if stretched else None))
            ax.text(col + 0.5, y + 0.45, str(size), ha="center", va="center", fontsize=8,
                    fontweight="bold" if bad else "normal", bbox=number_box)
        if kind == "input":  # the axes a shape lacks: broadcast too, drawn as dotted slots
            for col in range(ndim - len(shape)):
                ax.add_patch(Rectangle((col + 0.04, y + 0.08), 0.92, 0.74, fill=False,
                                       edgecolor=MUTED, linewidth=0.8, linestyle=":"))
    for col in clash:
        ax.text(col + 0.5, 0.95, "\u2718 clash", ha="center", va="bottom", fontsize=7,
                color=BAD)
    parts = [f"{label} {shape if shape is not None else 'incompatible'}"
             for label, shape, _ in rows]
    words = ("Shapes aligned from the right, one row each, axis by axis: " + "; ".join(parts)
             + ". An axis of size 1 (hatched) or a missing axis (dotted) stretches to the other "
             "size; two different sizes other than 1 cannot broadcast"
             + (f", as in axis {', '.join(str(c - ndim) for c in clash)} here" if clash else "")
             + ".")
    return "Broadcasting: shapes aligned from the right", words, fig


MAKERS = [("broadcast", broadcast_picture), ("descent", descent_picture),
          ("lr-sweep", lr_sweep_picture), ("grad-errors", grad_errors_picture),
          ("grad-hist", grad_histograms_picture), ("loss", loss_picture),
          ("val-loss", val_loss_picture), ("lr", lr_picture), ("grad-ratio", grad_ratio_picture)]


# --------------------------------------------------------------------------- SVG for inlining

_NUMBER = re.compile(r"-?\d+\.\d+")


def _round_numbers(match: re.Match) -> str:
    return _NUMBER.sub(lambda m: f"{float(m.group()):.1f}".rstrip("0").rstrip("."),
                       match.group())


def to_inline_svg(fig, prefix: str, title: str, alt: str) -> str:
    """The figure as SVG markup for inlining: see the module docstring."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None,
                                               "Type": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    # Inline in HTML the parser puts <svg> in the SVG namespace: no xmlns needed, and SVG 2's
    # plain href replaces xlink:href (a report holds no URL at all).
    text = re.sub(r'\s(xmlns(:xlink)?|version)="[^"]*"', "", text, count=3)
    text = text.replace("xlink:href=", "href=")
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'<style type="text/css">.*?</style>\s*', "", text, flags=re.S)
    text = re.sub(r"<defs>\s*</defs>\s*", "", text)
    referenced = set(re.findall(r'(?:href="#|url\(#)([^")]+)', text))
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", prefix)

    def rename_id(m: re.Match) -> str:
        return f' id="{prefix}-{m.group(1)}"' if m.group(1) in referenced else ""

    text = re.sub(r' id="([^"]+)"', rename_id, text)
    text = re.sub(r'(href="#|url\(#)([^")]+)', lambda m: f"{m.group(1)}{prefix}-{m.group(2)}",
                  text)
    # Coordinates to 0.1 pt (invisible at any zoom a report is read at), text untouched.
    text = re.sub(r'(?<=\s)(?:d|x|y|x1|x2|y1|y2|width|height|transform)="[^"]*"',
                  _round_numbers, text)
    text = re.sub(r"\n\s*", "\n", text)
    head_end = text.index(">") + 1
    head = text[:head_end]
    width = re.search(r'\swidth="([\d.]+)pt"', head)
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    # Scales down to a narrow screen, never up past its natural size (1 pt = 4/3 CSS px).
    style = f' style="max-width: {float(width.group(1)) * 4 / 3:.0f}px"' if width else ""
    head = head.replace("<svg ", f'<svg class="plot" role="img" aria-labelledby="{prefix}-t '
                                  f'{prefix}-d"{style} ', 1)
    return (head + f'\n<title id="{prefix}-t">{html.escape(title)}</title>'
            f'<desc id="{prefix}-d">{html.escape(alt)}</desc>' + text[head_end:])
