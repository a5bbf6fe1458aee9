"""Hidden checks for `parameters`: registration seen from every side (state_dict round trip,
.double(), the autograd graph), dropout placement, RunningNorm in both modes and in backward,
shared and frozen parameters, head names that share a prefix, the optimizer-before-replacement
bug with frozen layers."""

from __future__ import annotations

import math

import torch

from parameters_cases import seeded_normal, tied_values
from parameters_verify import (DROPOUT_HINT, MLP_HINT, NORM_HINT, REGISTER_HINT,
                                             TIED_HINT, check_groups, check_replace_head,
                                             check_running_norm, expect_mlp_layers, expect_output,
                                             mlp_label, mlp_reference, mlp_shapes, parameter_count,
                                             probe, run_count_cases, tied_reference)
from parameters_verify_hidden import audit, dropout_case
from grader.checking.compare import error_evidence
from grader import check, expect_array, fail, short

# --------------------------------------------------------------------------- MLP


@check(points=1, targets="MLP")
def test_mlp_any_depth(sub):
    """MLP works with no hidden layer, with many, one output, one row, the default dropout"""
    # (N, out_dim) even when N or out_dim is 1: a .squeeze() would drop the axis.
    for i, (args, n) in enumerate([((5, [], 2, 0.0), 10), ((3, [4, 5, 6, 7], 2, 0.3), 10),
                                   ((3, [4], 1, 0.0), 6), ((4, [8, 6], 3, 0.2), 1)]):
        label = mlp_label(args)
        x = seeded_normal(400 + i, n, args[0], scale=2.0)
        rec = probe(sub, "run", "MLP", list(args), 401 + i, [{"mode": "eval", "x": x, "seed": 1}],
                    target="MLP", label=f"{label}(x)", hint=MLP_HINT)
        linears = expect_mlp_layers(rec["report"], args, call=label)
        want = sum((a + 1) * b for a, b in mlp_shapes(args))
        if parameter_count(rec["report"]) != want:
            fail(f"{label} has {parameter_count(rec['report'])} scalar parameters; expected "
                 f"{want}.", call=label, hint=MLP_HINT)
        expect_output(rec["steps"][0]["output"], mlp_reference(linears, x),
                      call=f"{label}.eval()(x)", hint=MLP_HINT)
    # Without a dropout argument the contract's default, 0.0, applies: training mode is then
    # deterministic and equals the plain layers.
    args, label = (4, [6], 3, 0.0), "MLP(4, [6], 3)  # the default dropout=0.0"
    x = seeded_normal(403, 64, 4, scale=2.0)
    steps = [{"mode": "train", "x": x, "seed": 1}, {"mode": "train", "x": x, "seed": 2}]
    rec = probe(sub, "run", "MLP", list(args[:3]), 404, steps, target="MLP",
                label=f"{label}.train()(x)", hint=DROPOUT_HINT)
    expected = mlp_reference(expect_mlp_layers(rec["report"], args, call=label), x)
    for k, step in enumerate(rec["steps"], 1):
        expect_output(step["output"], expected, call=f"{label}.train()(x), call {k}",
                      hint="MLP(in_dim, hidden, out_dim, dropout: float = 0.0): without a "
                           "dropout argument nothing is dropped, even in training mode.")


@check(points=2, targets="MLP")
def test_mlp_dropout_in_training_mode(sub):
    """MLP applies dropout(p) after every hidden ReLU in training mode, and nowhere else"""
    g = torch.Generator().manual_seed(410)
    w1, b1 = torch.randn(5, 6, generator=g) * 0.5, torch.randn(5, generator=g) * 0.5
    w3, b3 = torch.randn(8, 5, generator=g) * 0.5, torch.randn(8, generator=g) * 0.5
    # Two hidden layers, the second an identity: each element passes two dropouts.
    dropout_case(sub, (6, [5, 5], 8, 0.25), [(w1, b1), (torch.eye(5), torch.zeros(5)), (w3, b3)],
                 411, keep=0.75 ** 2, scale=1 / 0.75 ** 2)
    v1, c1 = torch.randn(6, 4, generator=g) * 0.5, torch.randn(6, generator=g) * 0.5
    v2, c2 = torch.randn(9, 6, generator=g) * 0.5, torch.randn(9, generator=g) * 0.5
    dropout_case(sub, (4, [6], 9, 0.6), [(v1, c1), (v2, c2)], 412, keep=0.4, scale=1 / 0.4)


@check(points=1, targets="MLP")
def test_mlp_eval_mode_turns_dropout_off(sub, evidence):
    """MLP in eval mode is deterministic: dropout is off, two forwards agree with the layers"""
    args = (4, [8, 6], 3, 0.5)
    label = mlp_label(args)
    x = seeded_normal(420, 32, 4, scale=2.0)
    steps = [{"mode": "eval", "x": x, "seed": 1}, {"mode": "eval", "x": x, "seed": 2}]
    rec = probe(sub, "run", "MLP", list(args), 421, steps, target="MLP", label=f"{label}(x)",
                hint=DROPOUT_HINT)
    outputs = [step["output"]["value"] for step in rec["steps"]]
    if all(isinstance(o, torch.Tensor) for o in outputs) and outputs[0].shape == outputs[1].shape:
        evidence["eval_outputs_differ"] = not torch.equal(outputs[0], outputs[1])
        evidence["modules_created_in_forward"] = rec.get("modules_created_in_forward", 0)
    expected = mlp_reference(expect_mlp_layers(rec["report"], args, call=label), x)
    for k, step in enumerate(rec["steps"], 1):
        expect_output(step["output"], expected, call=f"{label}.eval()(x), call {k}",
                      hint=DROPOUT_HINT + " F.dropout(x, p) alone is always in training mode.")


@check(points=2, targets="MLP")
def test_mlp_state_dict_round_trip(sub):
    """MLP's state_dict loaded into a fresh instance gives identical outputs"""
    args = (4, [8, 6], 3, 0.2)
    label = mlp_label(args)
    x = seeded_normal(430, 16, 4)
    call = f"fresh = {label}; fresh.load_state_dict(model.state_dict()); both in eval mode"
    rec = probe(sub, "round_trip", "MLP", list(args), 431, 432, x, target="MLP", label=label,
                hint=REGISTER_HINT)
    want = sum((a + 1) * b for a, b in mlp_shapes(args))
    saved = sum(math.prod(s["shape"]) for s in rec["state_dict"] if s["shape"] is not None)
    if saved < want:
        fail(f"{call}: model.state_dict() holds {saved} numbers; the model's Linear layers "
             f"have {want}.", call=call, hint=REGISTER_HINT)
    if rec["out_a"]["type"] != "Tensor":
        fail(f"{call}: forward returned a {rec['out_a']['type']}.", call=call, hint=MLP_HINT)
    # A forward that ignores x (zeros, a bias) is "identical" after any round trip.
    out = rec["out_a"]["value"]
    if out.ndim != 2 or out.shape[0] != 16 or bool((out == out[:1]).all()):
        fail(f"{call}: model(x) for 16 different rows x gave {short(out)}: the same output for "
             "every row, so the round trip shows nothing.", call=call, hint=MLP_HINT)
    expect_output(rec["out_b"], rec["out_a"]["value"].double(),
                  call=f"{call}: fresh(x) against model(x)", rtol=1e-6, atol=1e-7,
                  hint=REGISTER_HINT)


@check(points=1, targets="MLP")
def test_mlp_follows_double(sub):
    """MLP.double() converts every layer: a float64 forward works and matches its layers"""
    args = (4, [8, 6], 3, 0.1)
    label = mlp_label(args)
    x = seeded_normal(440, 12, 4).double()
    call = f"{label}.double().eval()(x) with x float64"
    rec = probe(sub, "double_forward", "MLP", list(args), 441, x, target="MLP", label=call,
                hint=REGISTER_HINT + " .double() converts registered tensors only.")
    linears = expect_mlp_layers(rec["report"], args, call=label)
    not_double = [p["name"] for p in rec["report"]["parameters"] if p["dtype"] != "float64"]
    if not_double:
        fail(f"{call}: after .double() the parameters {not_double} are not float64.", call=call,
             hint=REGISTER_HINT)
    # float64 throughout: the solution lands within 1e-16.
    expect_output(rec["output"], mlp_reference(linears, x), call=call, rtol=1e-12, atol=1e-12,
                  dtype=torch.float64, hint=REGISTER_HINT)


@check(points=2, targets="MLP")
def test_mlp_graph_audit(sub):
    """Every tensor MLP's output depends on is one of its registered parameters"""
    args = [4, [8, 6], 3, 0.0]
    x = seeded_normal(450, 10, 4)
    audit(sub, "MLP", args, f"{mlp_label(args)}.train()(x)", x, 451,
          upstream=seeded_normal(452, 10, 3))


# --------------------------------------------------------------------------- count_parameters


@check(points=2, targets="count_parameters")
def test_count_parameters_shared_and_buffers(sub):
    """count_parameters counts a shared parameter once, buffers never, and 0 when there is none"""
    descriptions = {
        "shared": "Linear(6,6) embed, Linear(6,3) mid, Linear(6,6) unembed whose weight is "
                  "embed.weight, and mid registered a second time",
        "shared_frozen": "the model above with the shared weight and mid.bias frozen, plus "
                         "Linear(3,5)",
        "with_buffers": "Linear(4,5), BatchNorm1d(5), Linear(5,2) and a buffer of 7 numbers",
        "no_parameters": "ReLU() and Flatten() in a Sequential: nothing to count",
        "all_frozen": "Linear(3,2) with both its weight and its bias frozen",
    }
    run_count_cases(sub, [("shared", None), ("shared", True), ("shared_frozen", None),
                          ("shared_frozen", True), ("with_buffers", None),
                          ("with_buffers", True), ("no_parameters", None),
                          ("all_frozen", None), ("all_frozen", True)], descriptions)


# --------------------------------------------------------------------------- RunningNorm


@check(points=3, targets="RunningNorm", forbid=["batch_norm"])
def test_running_norm_both_modes_step_after_step(sub):
    """RunningNorm matches nn.BatchNorm1d in training and eval mode, defaults included"""
    plan = [("eval", 6), ("train", 4), ("train", 2), ("eval", 5), ("train", 9), ("eval", 3),
            ("eval", 7), ("train", 3)]
    for k, (c, momentum, eps) in enumerate([(5, 0.1, 1e-5), (3, 0.3, 1e-3), (6, 0.05, 0.5),
                                            (1, 0.2, 1e-5)]):
        check_running_norm(sub, c, momentum, eps, plan, seed=460 + 10 * k)
    # The contract's defaults are nn.BatchNorm1d's: momentum=0.1, eps=1e-5.
    check_running_norm(sub, 4, 0.1, 1e-5, plan, seed=500, defaults=True)


@check(points=2, targets="RunningNorm", forbid=["batch_norm"])
def test_running_norm_gradients_match_batchnorm(sub, evidence):
    """RunningNorm backpropagates through the batch statistics like nn.BatchNorm1d"""
    c, n = 5, 7
    label = f"RunningNorm({c}).train()(x)"
    g = torch.Generator().manual_seed(470)
    weight, bias = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    x = torch.randn(n, c, generator=g) * (torch.rand(c, generator=g) * 2 + 0.5) + 1.5
    upstream = torch.randn(n, c, generator=g)
    rec = probe(sub, "gradients", "RunningNorm", [c], 471, x, upstream, input_grad=True,
                assign={"weight": weight, "bias": bias}, target="RunningNorm", label=label,
                hint=NORM_HINT)
    if rec["missing"]:
        fail(f"{label}: the grader needs {rec['missing'][0]} (the contract names the "
             "parameters weight and bias, shape (num_features,)).", call=label, hint=NORM_HINT)
    bn = torch.nn.BatchNorm1d(c).double()
    with torch.no_grad():
        bn.weight.copy_(weight)
        bn.bias.copy_(bias)
    xd = x.double().requires_grad_(True)
    (bn(xd) * upstream.double()).sum().backward()
    grads = {gr["name"]: gr["grad"] for gr in rec["grads"]}
    call = f"{label}; (out * g).sum().backward()"
    if rec["x_grad"] is None:
        fail(f"{call}: x.grad is None: the output does not depend on x through autograd.",
             call=call, hint=NORM_HINT)
    # For the report (evidence only): every gradient's worst error against the tolerance.
    evidence["grad_errors"] = [e for e in (
        error_evidence(f"{name}.grad", got, want.float(), rtol=1e-4, atol=1e-5)
        for name, got, want in (("weight", grads.get("weight"), bn.weight.grad),
                                ("bias", grads.get("bias"), bn.bias.grad),
                                ("x", rec["x_grad"], xd.grad))) if e is not None]
    # float32 against float64: the solution's worst error is about 1e-6 relative.
    for name, want in (("weight", bn.weight.grad), ("bias", bn.bias.grad)):
        if grads.get(name) is None:
            fail(f"{call}: {name}.grad is None.", call=call, hint=NORM_HINT)
        expect_array(grads[name], want.float(), call=f"{call}: {name}.grad", rtol=1e-4,
                     atol=1e-5, check_dtype=False, hint=NORM_HINT)
    expect_array(rec["x_grad"], xd.grad.float(), call=f"{call}: x.grad", rtol=1e-4, atol=1e-5,
                 check_dtype=False, hint="the batch mean and variance depend on x too: compute "
                 "them with autograd on (no torch.no_grad(), no .detach()) in training mode.")


@check(points=1, targets="RunningNorm", forbid=["batch_norm"])
def test_running_norm_built_by_hand(sub):
    """RunningNorm is built without nn.BatchNorm* or F.batch_norm"""
    label = "RunningNorm(4)"
    steps = [{"mode": "train", "x": seeded_normal(480, 6, 4), "seed": 1},
             {"mode": "eval", "x": seeded_normal(481, 3, 4), "seed": 2}]
    rec = probe(sub, "run", "RunningNorm", [4], 482, steps, record_ops=True,
                target="RunningNorm", label=label, hint=NORM_HINT)
    used = [m["type"] for m in rec["report"]["modules"] if "BatchNorm" in m["type"]]
    used += [op for op in rec["ops"] if "batch_norm" in op]
    if used:
        fail(f"{label} uses {used[0]}; the exercise is to compute the normalisation yourself.",
             call=label, hint="x.mean(dim=0), x.var(dim=0, unbiased=False) and a few tensor "
             "operations are all it takes.")
    # ... and it does normalise: a forward that returns x uses no BatchNorm either. Loosely
    # (each feature's mean ~0 and variance ~1 in training mode, with the initial weight and
    # bias): the exact values are other checks' points.
    out = rec["steps"][0]["output"]
    value = out["value"].double() if out["type"] == "Tensor" else None
    if value is None or value.shape != (6, 4) or not bool(
            (value.mean(0).abs() < 1e-3).all() and ((value.var(0, unbiased=False) - 1).abs()
                                                    < 0.25).all()):
        fail(f"{label} in training mode on 6 rows returned {short(value)}: not x normalised "
             "per feature (mean 0, variance 1 before weight and bias).", call=label,
             hint=NORM_HINT)


# --------------------------------------------------------------------------- TiedAutoencoder


@check(points=2, targets="TiedAutoencoder")
def test_tied_autoencoder_gradients_reach_the_shared_weight(sub, evidence):
    """TiedAutoencoder's weight gets the gradient of both halves; every graph leaf is registered"""
    in_dim, code_dim = 7, 4
    label = f"TiedAutoencoder({in_dim}, {code_dim})(x)"
    weight, enc_bias, dec_bias = tied_values(490, in_dim, code_dim)
    x, upstream = seeded_normal(491, 9, in_dim), seeded_normal(492, 9, in_dim)
    rec = audit(sub, "TiedAutoencoder", [in_dim, code_dim], label, x, 493, upstream=upstream,
                assign_by_size=[weight, enc_bias, dec_bias])
    if rec["missing"]:
        fail(f"{label}: to set W, b_enc and b_dec the grader needs {rec['missing'][0]}.",
             call=label, hint=TIED_HINT)
    leaves = [p.double().requires_grad_(True) for p in (weight, enc_bias, dec_bias)]
    (tied_reference(*leaves, x) * upstream.double()).sum().backward()
    by_size = {int(torch.Size(gr["shape"]).numel()): gr for gr in rec["grads"]}
    call = f"{label}; (out * g).sum().backward()"
    # For the report (evidence only): every gradient's worst error against the tolerance.
    evidence["grad_errors"] = [e for e in (
        error_evidence(what, by_size[leaf.numel()]["grad"].reshape(leaf.shape)
                       if isinstance(by_size.get(leaf.numel(), {}).get("grad"), torch.Tensor)
                       else None, leaf.grad.float(), rtol=1e-5, atol=1e-6)
        for what, leaf in zip(("W", "b_enc", "b_dec"), leaves)) if e is not None]
    for what, leaf in zip(("W", "b_enc", "b_dec"), leaves):
        got = by_size[leaf.numel()]
        # float32 against float64: the solution's worst error is about 3e-7 relative.
        expect_array(got["grad"].reshape(leaf.shape), leaf.grad.float(),
                     call=f"{call}: the gradient of {what} ({got['name']})", rtol=1e-5, atol=1e-6,
                     check_dtype=False,
                     hint="W is used twice, so its gradient is the sum of the encoder's and the "
                     "decoder's parts; a .detach() or a copy of W cuts one of them off.")


# --------------------------------------------------------------------------- param_groups


@check(points=2, targets="param_groups", timeout=20)  # timeout: see test_parameters.py
def test_param_groups_nested_head_and_frozen(sub):
    """param_groups finds a nested head by its exact name, and leaves frozen parameters out"""
    check_groups(sub, "nested_head_net", "classifier", 0.003, 0.03,
                 "model: classifier_norm LayerNorm(8), stem Linear(4,8) (frozen), body "
                 "Sequential(Linear, ReLU, Linear), classifier Sequential(Linear(8,8) with a "
                 "frozen bias, ReLU, Linear(8,3))")


@check(points=1, targets="param_groups", timeout=20)
def test_param_groups_shared_parameter_in_one_group(sub):
    """param_groups puts a parameter shared by the head and the body in exactly one group"""
    check_groups(sub, "tied_head_net", "head", 0.02, 0.2,
                 "model: encoder Linear(6,6), body Linear(6,6), head Linear(6,6) whose weight "
                 "is encoder.weight")


# --------------------------------------------------------------------------- replace_head


@check(points=2, targets="replace_head", timeout=20)
def test_replace_head_with_frozen_features(sub):
    """replace_head works for any attribute name and gives SGD exactly the trainable parameters"""
    check_replace_head(sub, "fine_tune_net", "fc", 7, 0.2, 500, 5,
                       "model: features Sequential(Linear(5,8), ReLU) (frozen), mid Linear(8,6), "
                       "fc Linear(6,10)")


@check(points=1, targets="TiedAutoencoder")
def test_tied_autoencoder_starts_from_random_weights(sub):
    """A new TiedAutoencoder's W is a random initialisation: finite, moderate, not all equal"""
    # (64, 32) twice, under two torch seeds: a random initialisation draws another W, an
    # uninitialised torch.empty usually gets the same memory (and its garbage) back.
    seen: list[torch.Tensor] = []
    for i, (in_dim, code_dim) in enumerate(((7, 4), (64, 32), (64, 32), (5, 8))):
        label = f"TiedAutoencoder({in_dim}, {code_dim})"
        rec = probe(sub, "report", "TiedAutoencoder", [in_dim, code_dim], 495 + i,
                    target="TiedAutoencoder", label=label, hint=TIED_HINT)
        weights = [p["value"] for p in rec["parameters"]
                   if tuple(p["shape"]) == (code_dim, in_dim)]
        if not weights:  # no W at all is no random W either
            fail(f"{label} has no parameter of shape ({code_dim}, {in_dim}), the weight W: "
                 f"its parameters are {[tuple(p['shape']) for p in rec['parameters']]}.",
                 call=label, expected=f"W of shape ({code_dim}, {in_dim})", hint=TIED_HINT)
        w = weights[0].double()
        if in_dim == 64:
            seen.append(w)
        if len(seen) == 2 and torch.equal(seen[0], seen[1]):
            fail(f"{label}: built under two different torch seeds, the new model's W is the "
                 "same both times: it is not drawn at random (torch.empty leaves whatever "
                 "memory held).", call=label, expected="a random W, another one per seed",
                 got="the same W", hint="initialise W as nn.Linear does (nn.init."
                 "kaiming_uniform_(W, a=math.sqrt(5))) or with torch.randn(code_dim, in_dim) "
                 "/ in_dim ** 0.5.")
        finite = bool(torch.isfinite(w).all())
        largest = float(w.abs().max()) if finite else math.inf
        # nn.Linear's initialisation stays within 1/sqrt(in_dim), torch.randn within ~5: an
        # uninitialised torch.empty holds NaN, 1e18 or denormals, a constant fill no spread.
        if not finite:
            what = "it holds NaN or inf"
        elif largest > 10:
            what = f"its largest value is {largest:.3g}"
        elif float(w.std()) < 1e-4:
            what = "its values are all (nearly) the same"
        else:
            continue
        fail(f"{label}: the new model's W (shape {(code_dim, in_dim)}) is not a random "
             f"initialisation: {what}. torch.empty leaves whatever memory held; a constant W "
             "gives every code unit the same gradient.", call=label,
             expected="random values of moderate size",
             hint="initialise W as nn.Linear does (nn.init.kaiming_uniform_(W, "
                  "a=math.sqrt(5))) or with torch.randn(code_dim, in_dim) / in_dim ** 0.5.")
