"""Visible checks for `parameters` (CURRICULUM.md section 3).

The student's modules can only be built in the worker: probes (`probes/parameters.py`)
build them with torch seeded, run them on inputs chosen here (`parameters_cases.py`) and send
back plain records; the verdicts are computed in the grader (`parameters_verify.py`).
"""

from __future__ import annotations

import torch

from parameters_cases import MLP_VISIBLE, seeded_normal, tied_values
from parameters_verify import (BUFFER_HINT, MLP_HINT, REGISTER_HINT, TIED_HINT,
                                             check_groups, check_replace_head, check_running_norm,
                                             expect_mlp_layers, expect_output, mlp_label,
                                             mlp_reference, mlp_shapes, parameter_count, probe,
                                             run_count_cases, tied_reference)
from grader import check, expect_array, fail


@check(points=2, targets="MLP", visibility="visible")
def test_mlp_registers_every_layer(sub):
    """MLP registers every layer: parameter count, Linear layers in modules() order, state_dict"""
    for args in MLP_VISIBLE:
        call = mlp_label(args)
        report = probe(sub, "report", "MLP", list(args), 301, target="MLP", label=call,
                       hint=REGISTER_HINT)
        want = sum((a + 1) * b for a, b in mlp_shapes(args))
        got = parameter_count(report)
        evidence = {"parameter_count": got, "expected_parameter_count": want,
                    "module_lists": report.get("module_lists", []),
                    "bare_tensors": report.get("bare_tensors", [])}
        if got == 0:
            fail(f"{call} registers no parameters: model.parameters() is empty, so an optimizer "
                 "would train nothing and state_dict() would save nothing.", call=call,
                 expected=f"{want} parameters", got="0", hint=REGISTER_HINT, evidence=evidence)
        expect_mlp_layers(report, args, call=call)
        if got != want:
            fail(f"{call} has {got} scalar parameters; expected {want} (weights and biases of "
                 f"the Linear layers {mlp_shapes(args)}).", call=call, expected=str(want),
                 got=str(got), hint=MLP_HINT, evidence=evidence)
        saved = {s["name"] for s in report["state_dict"]}
        lost = [p["name"] for p in report["parameters"] if p["name"] not in saved]
        if lost:
            fail(f"{call}: state_dict() lacks the parameters {lost}.", call=call,
                 hint=REGISTER_HINT)


@check(points=3, targets="MLP", visibility="visible")
def test_mlp_forward_matches_its_layers(sub):
    """MLP's output equals Linear -> ReLU -> ... -> Linear recomputed from its registered weights"""
    for i, args in enumerate([(4, [8, 6], 3, 0.0), (5, [7], 4, 0.0), (3, [6, 5, 4], 2, 0.0)]):
        label = mlp_label(args)
        x = seeded_normal(310 + i, 16, args[0], scale=2.0)
        steps = [{"mode": "train", "x": x, "seed": 1}, {"mode": "eval", "x": x, "seed": 2}]
        rec = probe(sub, "run", "MLP", list(args), 311 + i, steps, target="MLP",
                    label=f"{label}(x)", hint=MLP_HINT)
        linears = expect_mlp_layers(rec["report"], args, call=label)
        expected = mlp_reference(linears, x)
        for step, mode in zip(rec["steps"], ("train", "eval")):
            expect_output(step["output"], expected,
                          call=f"{label}.{mode}()(x)  # x of shape {tuple(x.shape)}",
                          hint=MLP_HINT)


# --------------------------------------------------------------------------- count_parameters


@check(points=2, targets="count_parameters", visibility="visible")
def test_count_parameters_nested_and_frozen(sub):
    """count_parameters counts the scalars of nested models, and only trainable ones on request"""
    descriptions = {
        "stacked": "Linear(5,7) and Linear(7,4), Linear(4,3) nested in Sequentials, then "
                   "Linear(3,2,bias=False), and a Parameter of 3 numbers on the model itself",
        "frozen": "Linear(6,8) frozen, then Linear(8,8), Linear(8,2) with a frozen bias",
    }
    run_count_cases(sub, [("stacked", None), ("stacked", True), ("frozen", None),
                          ("frozen", False), ("frozen", True)], descriptions)


# --------------------------------------------------------------------------- RunningNorm


@check(points=2, targets="RunningNorm", visibility="visible", forbid=["batch_norm"])
def test_running_norm_registers_parameters_and_buffers(sub):
    """RunningNorm has parameters weight and bias, and buffers running_mean and running_var"""
    for c, momentum, eps in ((4, 0.1, 1e-5), (3, 0.2, 1e-3)):
        label = f"RunningNorm({c}, momentum={momentum}, eps={eps})"
        rec = probe(sub, "report", "RunningNorm", [c], 321, init={"momentum": momentum, "eps": eps},
                    target="RunningNorm", label=label, hint=BUFFER_HINT)
        params = {p["name"]: p for p in rec["parameters"]}
        buffers = {b["name"]: b for b in rec["buffers"]}
        saved = {s["name"] for s in rec["state_dict"]}
        for name in ("running_mean", "running_var"):
            if name in params:
                fail(f"{label}: {name} is a parameter (it is in parameters()), so an optimizer "
                     "would change it with gradients; it must be a buffer.", call=label,
                     expected="a buffer", got="a parameter", hint=BUFFER_HINT)
            if name not in buffers or name not in saved:
                fail(f"{label}: {name} is not a registered buffer (named_buffers() and "
                     f"state_dict() do not list it), so it is neither saved nor moved by .to().",
                     call=label, expected="a buffer", got="not registered", hint=BUFFER_HINT)
        if sorted(params) != ["bias", "weight"]:
            fail(f"{label} has the parameters {sorted(params)}; expected exactly ['bias', "
                 "'weight'].", call=label, hint="self.weight = nn.Parameter(torch.ones("
                 "num_features)); self.bias = nn.Parameter(torch.zeros(num_features)).")
        for name, fill in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0),
                           ("running_var", 1.0)):
            entry = params.get(name) or buffers[name]
            expect_array(entry["value"], torch.full((c,), fill), call=f"{label}.{name} at first",
                         rtol=0, hint=f"{name} starts as {'ones' if fill else 'zeros'} of shape "
                         "(num_features,), float32, like in nn.BatchNorm1d.")
        if not all(params[n]["requires_grad"] for n in ("weight", "bias")):
            fail(f"{label}: weight and bias must require grad.", call=label)


@check(points=3, targets="RunningNorm", visibility="visible", forbid=["batch_norm"])
def test_running_norm_training_mode_matches_batchnorm(sub):
    """RunningNorm in training mode matches nn.BatchNorm1d step after step, buffers included"""
    check_running_norm(sub, 4, 0.1, 1e-5, [("train", 8), ("train", 5), ("train", 16),
                                           ("train", 3)], seed=330)


# --------------------------------------------------------------------------- TiedAutoencoder


@check(points=2, targets="TiedAutoencoder", visibility="visible")
def test_tied_autoencoder_has_one_shared_weight(sub):
    """TiedAutoencoder has one weight (code_dim, in_dim): in*code + code + in parameters"""
    for in_dim, code_dim in ((6, 3), (5, 8)):
        label = f"TiedAutoencoder({in_dim}, {code_dim})"
        rec = probe(sub, "report", "TiedAutoencoder", [in_dim, code_dim], 341,
                    target="TiedAutoencoder", label=label, hint=TIED_HINT)
        want = in_dim * code_dim + code_dim + in_dim
        got = parameter_count(rec)
        shapes = [tuple(p["shape"]) for p in rec["parameters"]]
        if got != want:
            fail(f"{label} has {got} scalar parameters {shapes}; expected {want} = "
                 f"{in_dim}*{code_dim} + {code_dim} + {in_dim}.", call=label, expected=str(want),
                 got=str(got), hint=TIED_HINT,
                 evidence={"parameter_count": got, "expected_parameter_count": want,
                           "module_lists": rec.get("module_lists", []),
                           "bare_tensors": rec.get("bare_tensors", [])})
        if (code_dim, in_dim) not in shapes:
            fail(f"{label} has the parameters {shapes}; expected one weight of shape "
                 f"{(code_dim, in_dim)} among them.", call=label, hint=TIED_HINT)


@check(points=2, targets="TiedAutoencoder", visibility="visible")
def test_tied_autoencoder_forward(sub):
    """TiedAutoencoder computes relu(x @ W.T + b_enc) @ W + b_dec"""
    for i, (in_dim, code_dim) in enumerate(((6, 3), (5, 8))):
        label = f"TiedAutoencoder({in_dim}, {code_dim})"
        weight, enc_bias, dec_bias = tied_values(350 + i, in_dim, code_dim)
        x = seeded_normal(355 + i, 12, in_dim)
        rec = probe(sub, "run", "TiedAutoencoder", [in_dim, code_dim], 351,
                    [{"mode": "train", "x": x, "seed": 1}],
                    assign_by_size=[weight, enc_bias, dec_bias], target="TiedAutoencoder",
                    label=f"{label}(x)", hint=TIED_HINT)
        if rec["missing"]:
            shapes = [tuple(p["shape"]) for p in rec["report"]["parameters"]]
            fail(f"{label}: to set W, b_enc and b_dec the grader needs {rec['missing'][0]}; the "
                 f"model has parameters {shapes}.", call=label, hint=TIED_HINT)
        expect_output(rec["steps"][0]["output"], tied_reference(weight, enc_bias, dec_bias, x),
                      call=f"{label}(x)  # W, b_enc, b_dec set by the grader, x {tuple(x.shape)}",
                      hint=TIED_HINT)


# --------------------------------------------------------------------------- param_groups


# timeout=20: the first optimizer a process builds imports torch._dynamo, seconds on a loaded
# machine unless the worker parent imported it already.
@check(points=2, targets="param_groups", visibility="visible", timeout=20)
def test_param_groups_head_and_base(sub):
    """param_groups gives the head head_lr and every other trainable parameter base_lr"""
    check_groups(sub, "head_net", "head", 0.01, 0.1,
                 "model: stem Linear(5,8) (frozen), body Sequential(Linear(8,8), ReLU, "
                 "Linear(8,6), ReLU), head Linear(6,4)")


# --------------------------------------------------------------------------- replace_head


@check(points=3, targets="replace_head", visibility="visible", timeout=20)
def test_replace_head_new_head_is_trained(sub):
    """replace_head puts a new Linear at model.head and returns an SGD that trains it"""
    check_replace_head(sub, "open_head_net", "head", 3, 0.05, 360, 5,
                       "model: stem Linear(5,8), body Sequential(Linear(8,8), ReLU, "
                       "Linear(8,6), ReLU), head Linear(6,4)")
