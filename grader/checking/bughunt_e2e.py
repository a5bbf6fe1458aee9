"""End-to-end checks of a bug hunt: the student's whole `run(seed)`, judged on what it is for.

The other checks of a bug hunt audit one piece of the training at a time, on the grader's own
models and batches; a fix that breaks something none of those pieces covers would pass them
all. These verdicts look at the script's own run, recorded once per submission by the probe
`grader.probes.bughunt_e2e.end_to_end`, with the grader's seed and data:

- `verify_parameters_learn`: every tensor of the student's network that the contract trains
  received a gradient and moved during training; the ones the contract freezes (as many
  elements as the fixed script's frozen ones) did not move; the network has as many learnable
  elements as the contract's;
- `verify_split`: the samples the training loader yields are the contract's training samples,
  those of the validation loader its validation samples, the two disjoint;
- `verify_pairing`: each of those samples comes with its own label;
- `verify_outcome`: the returned model does, on the validation samples, as well as the fixed
  script's run does on the same seed and data, within the bug hunt's tolerance.

Samples are recognised by value, not by the script's report and not by tensor identity: each
row a loader yields is matched to the row of the grader's own copy of the data (`EndToEnd.data`,
the script's data function, which never needs a fix) it came from. A loader may hand out
transformed features (standardised, min-max scaled, scaled inside a `Dataset` or a
`collate_fn`): any per-feature increasing affine map, fitted separately for each loader, is
undone first. Rows no such map explains are "not recognised".

What each bug hunt declares (which samples validate, which metric, the tolerance, how many
elements it freezes) is data next to its checks: an `EndToEnd` in the bug hunt's
`*_cases_hidden.py`. Records come from the worker and are untrusted: every verdict is
computed here, from values, and a record of the wrong shape fails the check.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from grader.checking.compare import fail
from grader.checking.memo import shared
from grader.checking.student import StudentRaised

# A matched row lies within this distance (in units of the raw feature's spread) of its sample
# after the affine map is undone. float32 standardisation leaves ~1e-6; the nearest other
# sample of the shipped data sets lies 1e-2 or more away.
MATCH_TOL = 1e-3


@dataclass(frozen=True)
class EndToEnd:
    """What one bug hunt's end-to-end checks need to know, declared next to its checks.

    `data()` returns the grader's copy of the samples `run(seed)` draws, (inputs, labels) in
    the order of the script's data function; `val` the indices (in that order) the contract
    validates on, every other sample trains. `record(sub)` is the record of the student's run
    that holds the end-to-end part (`grader.probes.bughunt_run.run_report(watch=True)`, shared
    with the visible checks). `metric` is "accuracy" (argmax of the first
    output) or "mse" (of the single output). `frozen` is the number of parameter elements the
    contract freezes, `parameters` the number the contract's network has. `reference`: the
    fixed script's outcome at `seed` (measured with `reference_record`; a test keeps it
    equal). `tolerance`: how far below the fixed script's accuracy (or how many times its
    mean squared error) a correct run may end. `slack`: training samples one pass of a
    correct training loader may leave out (a `drop_last` loader; two passes are read)."""

    exercise: str
    record: Callable[[Any], dict]
    data: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    val: tuple[int, ...]
    metric: str
    reference: float
    tolerance: float
    parameters: int = 0
    frozen: int = 0
    slack: int = 0
    seed: int = 0
    call: str = "run(seed=0)"
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def raw(self) -> tuple[torch.Tensor, torch.Tensor]:
        if "raw" not in self._cache:
            X, y = self.data()
            X = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X)
            y = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
            self._cache["raw"] = (X.reshape(len(X), -1).double(), y.reshape(-1).double())
        return self._cache["raw"]


# --------------------------------------------------------------------------- records


def record(sub, spec: EndToEnd, crash_says_nothing: bool = False) -> dict | None:
    """The end-to-end record of the student's run (`spec.record`, made once per submission
    and shared by the four checks); a run that never called train fails. A run that raised
    fails the outcome check; with `crash_says_nothing` (the checks of one part of the run:
    parameters, split, pairing) it gives None instead: those checks have nothing to judge and
    pass, so that a script that crashes loses the outcome's points once, not four times."""
    try:
        whole = spec.record(sub)
    except StudentRaised:
        if crash_says_nothing:
            return None
        raise
    rec = whole.get("end_to_end") if isinstance(whole, dict) else None
    if not isinstance(rec, dict) or rec.get("train_called") is not True:
        fail(f"{spec.call} never called train(...): the grader watches the training run() "
             "starts; keep run() calling it.", call=spec.call, expected="run() calls train",
             got="no call")
    return rec


def reference_record(spec: EndToEnd) -> dict:
    """The same record of the fixed script, made here in the grader (it is the course's own
    code) without touching the grader's random state. For measuring (`spec.reference` is
    declared from it; a test keeps the two equal), not for grading."""
    from grader.api import solution_module
    from grader.probes.bughunt_e2e import end_to_end

    py_state, np_state = random.getstate(), np.random.get_state()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers run
    try:
        with torch.random.fork_rng(devices=[]):
            return end_to_end(solution_module(spec.exercise), seed=spec.seed)
    finally:
        torch.set_num_threads(threads)
        random.setstate(py_state)
        np.random.set_state(np_state)


# --------------------------------------------------------------------------- recognising rows


def _as_rows(part: Any, width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    if not isinstance(part, dict):
        return None
    x, y = part.get("x"), part.get("y")
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.dim() != 2 \
            or y.dim() != 1 or len(x) != len(y) or x.shape[1] != width:
        return None
    return x.double(), y.double()


def recognise(rows: torch.Tensor, raw: torch.Tensor, hint: torch.Tensor) -> torch.Tensor:
    """For each row of `rows`, the index of the sample of `raw` it shows, or -1. The rows may
    be the samples under one per-feature increasing affine map (standardisation, scaling): the
    map is first guessed from the spread of the rows against that of the samples they should
    be (`raw[hint]`), else of all samples, else of the others (whichever explains the most
    rows), then refitted on the rows it matched."""
    if len(rows) == 0:
        return torch.zeros(0, dtype=torch.long)
    rows, inverse = torch.unique(rows, dim=0, return_inverse=True)
    # Exact first: rows handed out as they are.
    index = {r.numpy().tobytes(): i for i, r in enumerate(raw)}
    best = torch.tensor([index.get(r.numpy().tobytes(), -1) for r in rows], dtype=torch.long)
    others = torch.tensor(sorted(set(range(len(raw))) - set(hint.tolist())), dtype=torch.long)
    for candidate in (hint, torch.arange(len(raw)), others):
        if bool((best >= 0).all()):
            break
        if len(candidate) < 2:
            continue
        found = _affine_match(rows, raw, raw[candidate])
        if int((found >= 0).sum()) > int((best >= 0).sum()):
            best = found
    return best[inverse]


def _affine_match(rows: torch.Tensor, raw: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """`recognise` under the affine map guessed from `ref`, refitted four times."""
    n_feat = raw.shape[1]
    spread = raw.std(dim=0)
    spread = torch.where(spread > 0, spread, torch.ones_like(spread))
    distinct = torch.unique(rows, dim=0)
    if len(distinct) < 2:
        return torch.full((len(rows),), -1, dtype=torch.long)
    ref_std = ref.std(dim=0)
    a = distinct.std(dim=0) / torch.where(ref_std > 0, ref_std, torch.ones_like(ref_std))
    a = torch.where(a > 0, a, torch.ones_like(a))
    b = distinct.mean(dim=0) - a * ref.mean(dim=0)
    for _ in range(4):
        dist = torch.cdist((rows - b) / a / spread, raw / spread)
        nearest, match = dist.min(dim=1)
        if bool((nearest <= MATCH_TOL * math.sqrt(n_feat)).all()):
            break  # every row explained: the map is found
        good = nearest < max(float(nearest.median()) * 4, MATCH_TOL)
        if int(good.sum()) < 2:
            break
        src, dst = raw[match[good]], rows[good]
        for j in range(n_feat):  # least squares per feature: rows = a * raw + b
            s, d = src[:, j], dst[:, j]
            var = float(((s - s.mean()) ** 2).sum())
            if var > 0:
                a[j] = float(((s - s.mean()) * (d - d.mean())).sum()) / var
                b[j] = float(d.mean() - a[j] * s.mean())
            else:
                a[j], b[j] = 1.0, float(d.mean() - s.mean())
        a = torch.where(a.abs() > 1e-12, a, torch.ones_like(a))
    dist = torch.cdist((rows - b) / a / spread, raw / spread)
    nearest, match = dist.min(dim=1)
    return torch.where(nearest <= MATCH_TOL * math.sqrt(n_feat), match,
                       torch.full_like(match, -1))


def data_of(rec: dict, spec: EndToEnd) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The samples the run drew: what the script's data function returned during the run (its
    record), else the grader's copy (`spec.data`); and whether they differ from the grader's
    (a script that changed its data function, which never needs a fix)."""
    X, y = spec.raw()
    part = rec.get("data")
    if isinstance(part, dict) and "error" not in part:
        rows = _as_rows(part, int(part["x"].shape[1])
                        if isinstance(part.get("x"), torch.Tensor) and part["x"].dim() == 2
                        else -1)
        if rows is not None:
            same = rows[0].shape == X.shape and bool(torch.allclose(
                rows[0], X, rtol=1e-6, atol=1e-6)) and bool(torch.equal(rows[1], y))
            return rows[0], rows[1], not same
    return X, y, False


def samples(sub, spec: EndToEnd) -> dict | None:
    """The training and validation rows of the student's run, recognised: for each part,
    {"index": sample per row (-1 unrecognised), "y": its label as the loader gave it} or
    {"error": text}; None when the run raised. Computed once per submission."""
    def compute() -> dict | None:
        rec = record(sub, spec, crash_says_nothing=True)
        if rec is None:
            return None
        X, y, _ = data_of(rec, spec)
        val = torch.tensor(spec.val, dtype=torch.long)
        train = torch.tensor(sorted(set(range(len(X))) - set(spec.val)), dtype=torch.long)
        out: dict[str, Any] = {}
        for part, hint in (("train", train), ("val", val)):
            rows = _as_rows(rec.get(part), X.shape[1])
            if rows is None:
                error = rec.get(part, {}).get("error") if isinstance(rec.get(part), dict) \
                    else None
                out[part] = {"error": str(error or "no rows of the input width "
                                         f"{X.shape[1]} and one label each")[:300]}
                continue
            out[part] = {"index": recognise(rows[0], X, hint), "y": rows[1]}
        out.update(X=X, y=y)
        return out
    return shared(sub, ("end_to_end", "samples"), compute)


# --------------------------------------------------------------------------- verdicts


# A tensor whose largest gradient element stays below this fraction of its largest value (plus
# this much) gets updates below float32 resolution: it may keep its values although training
# reaches it (a convolution's bias before BatchNorm, whose gradient is zero up to rounding:
# measured 1e-9 .. 1e-7 in the fixed classifier). Gradients of tensors that learn: 1e-3 or more.
NEGLIGIBLE_GRAD = 1e-6


def verify_parameters_learn(sub, spec: EndToEnd, evidence: dict) -> None:
    """Every learnable tensor of the student's model got a gradient and moved, except the
    frozen ones, which did not move and are as many elements as the contract freezes; and the
    model has as many learnable elements as the contract's network."""
    rec = record(sub, spec, crash_says_nothing=True)
    if rec is None:
        return
    params = rec.get("params")
    call = spec.call
    if not isinstance(params, list) or not params:
        fail(f"{call}: run() passed train(...) no nn.Module as its model (or one without "
             "parameters): the grader watches the model train(...) trains.", call=call,
             expected="an nn.Module with parameters", got="none")
    try:
        entries: list[dict[str, Any]] = [{"name": str(p["name"]), "numel": int(p["numel"]),
                    "requires_grad": bool(p["requires_grad"]), "grads": int(p["grads"]),
                    "largest": float(p["largest_grad"]), "scale": float(p["scale"]),
                    "moved": bool(p["moved"]),
                    "used": p.get("used") if isinstance(p.get("used"), bool) else None}
                   for p in params]
    except (KeyError, TypeError, ValueError):
        fail(f"{call}: the record of the model's parameters came back malformed.", call=call)
    for e in entries:
        e["negligible"] = (not e["moved"] and e["requires_grad"] and e["grads"] > 0
                           and e["largest"] <= NEGLIGIBLE_GRAD * (1 + e["scale"]))
    still = [e for e in entries if not e["moved"] and not e["negligible"]]
    still_numel = sum(e["numel"] for e in still)
    cut = [e for e in still if e["requires_grad"] and e["grads"] == 0]
    learnable = sum(e["numel"] for e in entries)
    if still_numel > spec.frozen:
        evidence["params_without_grad"] = [e["name"] for e in cut if e["used"] is not False][:50]
    evidence.update(params_unchanged=[e["name"] for e in still][:50],
                    unchanged_elements=still_numel, frozen_elements=spec.frozen,
                    learnable_elements=learnable, expected_elements=spec.parameters)
    unused = [e for e in cut if e["used"] is False]
    if cut and still_numel > spec.frozen and len(unused) == len(cut):
        names = ", ".join(e["name"] for e in cut[:6])
        fail(f"{call}: {len(cut)} of the model's parameter tensors ({names}) never received a "
             "gradient and kept their initial values: the model's forward does not use them "
             "(it computes with other tensors, made elsewhere).", call=call,
             expected="every parameter used and trained", got=f"{len(cut)} unused")
    if cut and still_numel > spec.frozen:
        names = ", ".join(e["name"] for e in cut[:6])
        fail(f"{call}: during training no backward pass gave {len(cut)} of the model's "
             f"parameter tensors a gradient ({names}), so they kept their initial values: the "
             "loss does not reach them although they are meant to learn.", call=call,
             expected="every trained parameter gets a gradient and moves",
             got=f"{len(cut)} without a gradient", fault="detach-on-path")
    frozen = [e for e in still if not e["requires_grad"]]
    if frozen and still_numel > spec.frozen:
        names = ", ".join(e["name"] for e in frozen[:6])
        fail(f"{call}: {still_numel} parameter elements never changed during training; "
             f"{len(frozen)} of the tensors ({names}) do not require gradients (frozen, "
             f"requires_grad False), so no backward pass reaches them; the contract freezes "
             f"{spec.frozen} elements and trains the rest.", call=call,
             expected=f"{spec.frozen} unchanged elements", got=f"{still_numel} unchanged")
    if still_numel > spec.frozen:
        names = ", ".join(e["name"] for e in still[:6])
        fail(f"{call}: {still_numel} parameter elements never changed during training "
             f"({names}), although backward passes gave them gradients; the contract freezes "
             f"{spec.frozen}. The update step does not reach them.", call=call,
             expected=f"{spec.frozen} unchanged elements", got=f"{still_numel} unchanged")
    if still_numel < spec.frozen:
        fail(f"{call}: only {still_numel} parameter elements kept their values during "
             f"training; the contract freezes {spec.frozen}, so a layer meant to stay frozen "
             "trained.", call=call, expected=f"{spec.frozen} unchanged elements",
             got=f"{still_numel} unchanged")
    if learnable < spec.parameters:
        fail(f"{call}: the model train(...) trains has {learnable} learnable elements "
             f"(parameters, and tensors that require grad); the contract's network has "
             f"{spec.parameters}. The others cannot learn (kept as buffers or as constants).",
             call=call, expected=f"{spec.parameters} learnable elements", got=f"{learnable}")


def _index(part: dict, name: str, call: str) -> torch.Tensor:
    if "error" in part:
        fail(f"{call}: the grader could not read the {name} loader run() passed to train: "
             f"{part['error']}", call=call, expected=f"a {name} loader of (x, y) batches",
             got=part["error"][:80])
    return part["index"]


def verify_split(sub, spec: EndToEnd, evidence: dict) -> None:
    """The training loader yields the contract's training samples, the validation loader its
    validation samples: disjoint, every validation sample once."""
    parts = samples(sub, spec)
    if parts is None:
        return
    call = spec.call
    X = parts["X"]
    want_val = set(spec.val)
    want_train = set(range(len(X))) - want_val
    tr = _index(parts["train"], "training", call)
    va = _index(parts["val"], "validation", call)
    tr_set, va_set = {int(i) for i in tr if i >= 0}, {int(i) for i in va if i >= 0}
    leaked_train = tr_set & want_val
    leaked_val = va_set & want_train
    evidence.update(distinct_train_samples=len(tr_set), distinct_val_samples=len(va_set),
                    val_samples_in_training=len(leaked_train),
                    training_samples_in_validation=len(leaked_val),
                    unrecognised_rows=int((tr < 0).sum()) + int((va < 0).sum()))
    if leaked_train or leaked_val or (tr_set & va_set):
        both = len(tr_set & va_set)
        fail(f"{call}: {len(leaked_train)} of the {len(want_val)} validation samples are "
             f"among the samples the training loader yields, and {len(leaked_val)} training "
             f"samples among the validation loader's ({both} samples in both): the model is "
             "validated on samples it trained on, so its validation numbers say nothing about "
             "new data.", call=call, expected="disjoint training and validation samples",
             got=f"{both} shared", fault="validation-leak")
    unrecognised = int((tr < 0).sum()) + int((va < 0).sum())
    if unrecognised > (len(tr) + len(va)) // 10:
        fail(f"{call}: {unrecognised} of the {len(tr) + len(va)} rows the loaders yield are "
             "no sample of the data (under any per-feature scaling the grader can undo).",
             call=call, expected="the data's samples", got=f"{unrecognised} unrecognised")
    if va_set != want_val or len(va) != len(want_val):
        fail(f"{call}: one pass of the validation loader yields {len(va)} rows of "
             f"{len(va_set)} distinct samples, {len(va_set & want_val)} of them validation "
             f"samples; the contract validates on its {len(want_val)} samples, each once.",
             call=call, expected=f"the {len(want_val)} validation samples",
             got=f"{len(va_set & want_val)} of them")
    missing = len(want_train - tr_set)
    if missing > spec.slack:
        fail(f"{call}: two passes of the training loader yield {len(tr_set)} distinct samples; "
             f"the contract trains on all {len(want_train)} others ({missing} never came).",
             call=call, expected=f"{len(want_train)} training samples",
             got=f"{len(tr_set)}")


def verify_pairing(sub, spec: EndToEnd, evidence: dict) -> None:
    """Every recognised sample the loaders yield comes with its own label."""
    parts = samples(sub, spec)
    if parts is None:
        return
    call = spec.call
    y = parts["y"]
    for name, key in (("training", "train"), ("validation", "val")):
        index = _index(parts[key], name, call)
        got = parts[key]["y"]
        known = index >= 0
        if int(known.sum()) < max(1, len(index) // 2):
            fail(f"{call}: the grader recognised {int(known.sum())} of the {len(index)} rows "
                 f"of the {name} loader as samples of the data, too few to tell whether each "
                 "keeps its label.", call=call, expected="the data's samples",
                 got=f"{int(known.sum())} recognised")
        want = y[index[known]]
        have = got[known]
        wrong = (have - want).abs() > 1e-4 * (1 + want.abs())
        if key == "train":
            evidence["train_wrong_labels"] = int(wrong.sum())
        else:
            evidence["val_wrong_labels"] = int(wrong.sum())
        if bool(wrong.any()):
            fail(f"{call}: {int(wrong.sum())} of the {int(known.sum())} {name} samples came "
                 "with another sample's label: inputs and labels were separated (shuffled, "
                 "sorted or indexed apart), so the model learns from mismatched pairs.",
                 call=call, expected="each sample with its own label",
                 got=f"{int(wrong.sum())} mismatched", fault="labels-separated-from-samples")


def outcome(rec: dict, spec: EndToEnd, index: torch.Tensor | None = None) -> float | None:
    """The metric of a run's record on the validation samples it recognises (labels from the
    samples the run drew): accuracy, or mean squared error; None if it cannot be computed.
    `index`: the validation rows already recognised (`samples`)."""
    part = rec.get("val")
    if not isinstance(part, dict) or not isinstance(part.get("out"), torch.Tensor):
        return None
    X, y, _ = data_of(rec, spec)
    rows = _as_rows(part, X.shape[1])
    out = part["out"]
    if rows is None or out.dim() != 2 or len(out) != len(rows[0]):
        return None
    if index is None or len(index) != len(out):
        index = recognise(rows[0], X, torch.tensor(spec.val, dtype=torch.long))
    known = index >= 0
    if not bool(known.any()):
        return None
    labels = y[index[known]]
    out = out[known].double()
    if spec.metric == "accuracy":
        return float((out.argmax(dim=1) == labels.long()).double().mean())
    if out.shape[1] != 1:
        return None
    return float(((out[:, 0] - labels) ** 2).mean())


def verify_outcome(sub, spec: EndToEnd, evidence: dict) -> None:
    """The run's model does on the validation samples what the fixed script's does (on the
    same seed and data), within `spec.tolerance`."""
    rec = record(sub, spec)
    assert rec is not None  # without crash_says_nothing, record() raises or returns a record
    call = spec.call
    ref = spec.reference
    parts = samples(sub, spec)
    val = parts["val"] if parts is not None else None
    got = outcome(rec, spec, val.get("index") if isinstance(val, dict) else None)
    evidence.update(outcome=got, reference_outcome=ref, outcome_metric=spec.metric)
    if data_of(rec, spec)[2]:
        # The script drew other data than the contract's (it changed its data function, which
        # never needs a fix): the fixed script's outcome says nothing about it.
        evidence["script_data_differs"] = True
        return
    if got is None or not math.isfinite(got):
        fail(f"{call}: the model run() returned gives no {spec.metric} on the validation "
             "samples (its outputs on the validation loader could not be compared with the "
             "samples' labels).", call=call, expected=f"a {spec.metric}", got=str(got))
    if spec.metric == "accuracy":
        bound = ref - spec.tolerance
        if got < bound:
            fail(f"{call}: after training, the model run() returned classifies "
                 f"{got:.1%} of the validation samples correctly; the fixed script reaches "
                 f"{ref:.1%} on the same seed and data (a correct fix: at least {bound:.1%}). "
                 "The run does not learn what it should.", call=call,
                 expected=f">= {bound:.1%}", got=f"{got:.1%}")
    else:
        bound = ref * spec.tolerance
        if got > bound:
            fail(f"{call}: after training, the model run() returned has a mean squared error "
                 f"of {got:.4g} on the validation samples; the fixed script reaches {ref:.4g} on "
                 f"the same seed and data (a correct fix: at most {bound:.4g}). The run does not "
                 "learn what it should.", call=call, expected=f"<= {bound:.4g}",
                 got=f"{got:.4g}")
