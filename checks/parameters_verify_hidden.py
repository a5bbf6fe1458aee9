"""Verifiers only the hidden `parameters` checks use: dropout placement seen from the outside,
and the autograd graph audit. Never shipped (a `_hidden` module: `checks/README.md`)."""

from __future__ import annotations

import torch

from parameters_cases import seeded_normal
from parameters_verify import (DROPOUT_HINT, MLP_HINT, REGISTER_HINT,
                                             expect_mlp_layers, mlp_label, probe)
from grader import fail


def dropout_case(sub, args, linears: list[tuple[torch.Tensor, torch.Tensor]], seed: int,
                 keep: float, scale: float) -> None:
    """Dropout placement seen from the outside. The grader sets the weights: the last hidden
    layer's activations h are recovered from the output by least squares (the last Linear has
    more outputs than inputs), and every element of h must be either 0 or relu(z) * scale,
    where z is the first layer's pre-activation (the layers in between are identities, so each
    dropout multiplies by its own mask), with about `keep` of them kept."""
    label = mlp_label(args)
    x = seeded_normal(seed, 3000, args[0])
    rec = probe(sub, "run", "MLP", list(args), seed, [{"mode": "train", "x": x, "seed": seed + 1}],
                assign_linears=[list(layer) for layer in linears], target="MLP",
                label=f"{label}.train()(x)", hint=DROPOUT_HINT)
    if rec["missing"]:
        expect_mlp_layers(rec["report"], args, call=label)
        fail(f"{label}: the grader could not set the weights: it needs {rec['missing'][0]}.",
             call=label, hint=MLP_HINT)
    out = rec["steps"][0]["output"]
    if out["type"] != "Tensor" or tuple(out["value"].shape) != (len(x), args[2]):
        fail(f"{label}.train()(x) did not return a tensor of shape {(len(x), args[2])}.",
             call=label, hint=MLP_HINT)
    (w1, b1), (w_last, b_last) = linears[0], linears[-1]
    y = out["value"].double()
    h = torch.linalg.lstsq(w_last.double(), (y - b_last.double()).T).solution.T
    fit = (h @ w_last.double().T + b_last.double() - y).abs().max().item()
    r = torch.relu(x.double() @ w1.double().T + b1.double())
    active = r > 0.1
    ratio = h[active] / r[active]
    kept = (ratio - scale).abs() < 0.02
    dropped = ratio.abs() < 0.02
    call = f"{label}.train()(x)  # x of shape {tuple(x.shape)}, weights set by the grader"
    share = kept.double().mean().item()
    evidence = {"kept_share": round(share, 4), "expected_kept_share": round(keep, 4),
                "lstsq_residual": float(f"{fit:.3g}")}
    # A correct model leaves a least-squares residual of about 2e-6 and ratios within 1e-5 of
    # 0 or `scale`; the thresholds (1e-3 and 0.02) are hundreds of times wider.
    if fit > 1e-3 or not bool((kept | dropped).all()):
        bad = ratio[~(kept | dropped)]
        seen = bad[:5].tolist() if len(bad) else []
        fail(f"{call}: in training mode the last hidden layer's activations should each be "
             f"either 0 or relu(pre-activation) * {scale:.4g} (kept by every dropout on the "
             f"way); found other factors, e.g. {[round(v, 3) for v in seen]} (least-squares "
             f"residual {fit:.2g}). Dropout is missing, misplaced (on the input or after the last "
             "Linear) or wrongly scaled.", call=call, hint=DROPOUT_HINT, evidence=evidence)
    # Over ~7000 elements the kept share of a correct dropout lies within 0.006 (one standard
    # deviation) of `keep`; 0.04 is about 6.5 standard deviations.
    if abs(share - keep) > 0.04:
        fail(f"{call}: {share:.1%} of the hidden activations survived dropout; expected about "
             f"{keep:.1%} for dropout={args[3]}.", call=call, hint=DROPOUT_HINT,
             evidence=evidence)


def audit(sub, cls: str, args: list, label: str, x: torch.Tensor, seed: int, *,
          upstream: torch.Tensor, **kwargs) -> dict:
    """The graph audit: every leaf autograd reaches from the output is one of
    model.parameters(), and every parameter gets a gradient. Returns the record."""
    rec = probe(sub, "gradients", cls, args, seed, x, upstream, target=cls, label=label,
                hint=REGISTER_HINT, **kwargs)
    call = f"{label}: the autograd graph of the output"
    if not rec["tracks_grad"]:
        fail(f"{call}: the output does not require grad, so no parameter can learn from it.",
             call=call, hint="do not compute forward under torch.no_grad() or from .detach()ed "
             "tensors.")
    stray = [leaf for leaf in rec["leaves"] if not leaf["registered"]]
    no_grad = [g["name"] for g in rec["grads"] if g["grad"] is None]
    evidence = {"unregistered_leaves": len(stray), "parameters_without_grad": len(no_grad),
                "modules_created_in_forward": rec.get("modules_created_in_forward", 0),
                "module_lists": rec.get("module_lists", []),
                "bare_tensors": rec.get("bare_tensors", [])}
    if stray:
        shapes = [tuple(leaf["shape"]) for leaf in stray]
        fail(f"{call} reaches tensors that require grad but are not in model.parameters(), of "
             f"shapes {shapes}: an optimizer built from model.parameters() never updates them.",
             call=call, expected="only registered parameters", got=f"{len(stray)} unregistered",
             hint=REGISTER_HINT, evidence=evidence)
    if no_grad:
        fail(f"{call}: after backward, the parameters {no_grad} have no gradient: the output "
             "does not depend on them.", call=call, hint=REGISTER_HINT, evidence=evidence)
    return rec
