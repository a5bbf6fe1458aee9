"""Verifiers of the `parameters` checks (visible and hidden), shipped with the visible checks.

The student's modules can only be built in the worker: probes (`probes/parameters.py`)
build them with torch seeded, run them on inputs chosen by the checks and send back plain
records. The verdicts are computed here, from the outside wherever possible: an MLP's output is
recomputed from the weights it registered, RunningNorm is run against nn.BatchNorm1d step after
step, and the small models that count_parameters, param_groups and replace_head work on are
rebuilt here from the same definitions to know what the answers must be. (Those recomputations
start from what the student's model registered, so they run wherever the checks run: they are
verifiers, not `parameters_reference.py`, whose answers are fixed by the case and recorded.)

Evidence attached to failures (plain facts for diagnoses and reports):
  parameter_count, expected_parameter_count, linear_layers  what an MLP registered
  module_lists, bare_tensors                                attributes parameters() cannot
                                                            see (lists of layers, tensors)
  unregistered_leaves, parameters_without_grad              the graph audit (counts)
  modules_created_in_forward                                layers built during forward
  eval_outputs_differ                                       two eval-mode calls disagree
  kept_share, expected_kept_share, lstsq_residual           dropout seen from the outside
  step, mode, quantity                                      where RunningNorm left BatchNorm1d
  returned, expected                                        a count_parameters answer
  problem                                                   what param_groups / replace_head
                                                            got wrong (see `problem(...)`)
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch

import parameters_reference as reference
from parameters_cases import norm_steps, seeded_normal
from grader import CheckFailure, StudentError, expect_array, fail, short
from probes.parameters import build_case
from grader.checking.student import StudentRaised


REGISTER_HINT = ("assigning an nn.Module or nn.Parameter to an attribute registers it; a plain "
                 "Python list, a bare tensor or a layer created in forward() is invisible to "
                 "parameters(), state_dict() and .to(). Use nn.Sequential or nn.ModuleList.")
MLP_HINT = ("for each width in hidden: Linear -> ReLU -> Dropout; then one final Linear with "
            "nothing after it.")
DROPOUT_HINT = ("nn.Dropout(p) (or F.dropout(x, p, self.training)) zeroes each element with "
                "probability p in training mode, scales the rest by 1/(1-p), and does nothing "
                "in eval mode.")
COUNT_HINT = ("model.parameters() yields every parameter once, even one shared by two "
              "submodules; p.numel() is its number of scalars; buffers are not parameters.")
NORM_HINT = ("training mode: y = (x - mean) / sqrt(var + eps) * weight + bias with the batch "
             "mean and the biased batch variance (divide by N); then running = (1 - momentum) "
             "* running + momentum * statistic, tracking the unbiased variance (divide by N-1). "
             "Eval mode: normalise with the running statistics and leave them alone.")
BUFFER_HINT = ("self.register_buffer('running_mean', torch.zeros(num_features)) makes a tensor "
               "part of state_dict() and .to() without making it a parameter.")
TIED_HINT = ("one nn.Parameter W of shape (code_dim, in_dim): code = relu(x @ W.T + b_enc), "
             "out = code @ W + b_dec. Using the same Parameter twice ties the halves; a copy of "
             "it would be a second weight.")
GROUPS_HINT = ("collect the head's parameters (model.get_submodule(head).parameters()) by "
               "identity, give every other trainable parameter base_lr, and skip parameters "
               "with requires_grad=False.")
HEAD_HINT = ("an optimizer holds the tensors it was given when it was built: replace the head "
             "first (a new nn.Linear with the old head's in_features), then build the SGD "
             "optimizer from the trainable parameters.")


# Student outputs are float32; references are float64 from the same float32 weights. Measured
# on the solution, the style files and the correct_ mutants: at most 4.8e-7 absolute error on
# outputs of size ~1, i.e. 1/15 of this tolerance; a wrong formula is off by 1e-2 or more.
F32_RTOL, F32_ATOL = 2e-6, 2e-6


def probe(sub, name: str, *args, target: str, label: str, hint: str | None = None, **kwargs):
    """Run probe `name` on the student's module; an exception in student code fails the
    check with its message (NotImplementedError and timeouts pass through unchanged)."""
    if not sub.has(target):
        raise StudentError(f"{sub.filename} defines no {target}: check its spelling and that it "
                           "is defined at the top level of the file.", call=label,
                           reason="not_defined")
    try:
        return sub.probe(f"parameters:{name}", *args, label=label, **kwargs)
    except StudentRaised as exc:
        if exc.type == "NotImplementedError":
            raise
        fail(str(exc), call=label, got=exc.type, hint=hint)


@contextlib.contextmanager
def attach(evidence: dict):
    """Add `evidence` to a CheckFailure raised inside (by expect_array and friends)."""
    try:
        yield
    except CheckFailure as exc:
        exc.evidence.update(evidence)
        raise


def expect_output(record: dict, expected: torch.Tensor, *, call: str, rtol: float = F32_RTOL,
                  atol: float = F32_ATOL, hint: str | None = None,
                  dtype: torch.dtype | None = None) -> None:
    """A forward's output record is a tensor close to `expected` (float64)."""
    if record["type"] != "Tensor":
        fail(f"{call} returned a {record['type']}; expected a tensor.", call=call,
             expected="a tensor", got=record["type"], hint=hint)
    got = record["value"]
    if dtype is not None and got.dtype != dtype:
        fail(f"{call} returned a {str(got.dtype).removeprefix('torch.')} tensor; expected "
             f"{str(dtype).removeprefix('torch.')}.", call=call, hint=hint)
    expect_array(got, expected.to(got.dtype) if got.is_floating_point() else expected,
                 call=call, rtol=rtol, atol=atol, hint=hint, check_dtype=False)


def mlp_label(args) -> str:
    in_dim, hidden, out_dim, dropout = args
    return f"MLP({in_dim}, {hidden}, {out_dim}, dropout={dropout})"


def mlp_shapes(args) -> list[tuple[int, int]]:
    """(in_features, out_features) of the Linear layers of MLP(*args), in forward order."""
    in_dim, hidden, out_dim, _ = args
    widths = [in_dim, *hidden, out_dim]
    return list(zip(widths[:-1], widths[1:]))


def expect_mlp_layers(report: dict, args, *, call: str) -> list[dict]:
    """The registered nn.Linear layers are those of MLP(*args) in forward order; returns them."""
    want = mlp_shapes(args)
    got = [(m["in_features"], m["out_features"]) for m in report["modules"] if "in_features" in m]
    evidence = {"linear_layers": [list(g) for g in got]}
    if not got:
        fail(f"{call} registers no nn.Linear layer: model.modules() lists "
             f"{[m['type'] for m in report['modules']]}.", call=call,
             expected=f"Linear layers {want}", got="none", hint=REGISTER_HINT, evidence=evidence)
    if got != want:
        fail(f"{call}: the nn.Linear layers in model.modules() have (in_features, "
             f"out_features) {got}; expected {want}, in forward order.", call=call,
             expected=str(want), got=str(got),
             hint=REGISTER_HINT if len(got) < len(want) else MLP_HINT, evidence=evidence)
    return report["linears"]


def mlp_reference(linears: list[dict], x: torch.Tensor) -> torch.Tensor:
    """The MLP's output recomputed here, in float64, from the layers it registered."""
    h = x.double()
    for i, layer in enumerate(linears):
        h = h @ layer["weight"].double().T
        if layer["bias"] is not None:
            h = h + layer["bias"].double()
        if i < len(linears) - 1:
            h = torch.relu(h)
    return h


def parameter_count(report: dict) -> int:
    return sum(math.prod(p["shape"]) for p in report["parameters"])


def as_count(got, *, call: str) -> int:
    """A Python (or numpy) integer, or fail saying what came back."""
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer)):
        kind = "a tensor" if isinstance(got, torch.Tensor) else f"a {type(got).__name__}"
        fail(f"{call} returned {short(got)} ({kind}); expected a Python int.", call=call,
             expected="an int", got=short(got),
             hint="p.numel() is a Python int; sum() of them is one too (int(...) converts).")
    return int(got)


def expected_count(case: str, trainable_only: bool | None) -> int:
    # In parameters_reference.py: it is the answer, and a student release must not ship it.
    return reference.expected_count(case, trainable_only)


def run_count_cases(sub, cases: list, descriptions: dict[str, str]) -> None:
    label = "count_parameters(model)"
    values = probe(sub, "count_cases", [list(c) for c in cases], target="count_parameters",
                   label=label, hint=COUNT_HINT)
    for (case, trainable_only), got in zip(cases, values):
        flag = "" if trainable_only is None else f", trainable_only={trainable_only}"
        call = f"count_parameters(model{flag})  # model: {descriptions[case]}"
        got = as_count(got, call=call)
        want = expected_count(case, trainable_only)
        if got != want:
            fail(f"{call} returned {got}; expected {want}.", call=call, expected=str(want),
                 got=str(got), hint=COUNT_HINT, evidence={"returned": got, "expected": want})


def batchnorm_reference(num_features: int, momentum: float, eps: float, weight: torch.Tensor,
                        bias: torch.Tensor, steps: list[dict]) -> list[tuple]:
    """nn.BatchNorm1d (float64) run through the same steps: (output, running_mean,
    running_var) after each."""
    bn = torch.nn.BatchNorm1d(num_features, eps=eps, momentum=momentum).double()
    with torch.no_grad():
        bn.weight.copy_(weight)
        bn.bias.copy_(bias)
    out = []
    for step in steps:
        bn.train(step["mode"] == "train")
        with torch.no_grad():
            y = bn(step["x"].double())
        assert bn.running_mean is not None and bn.running_var is not None  # track_running_stats
        out.append((y, bn.running_mean.clone(), bn.running_var.clone()))
    return out


def check_running_norm(sub, num_features: int, momentum: float, eps: float, plan, seed: int,
                       *, defaults: bool = False):
    """RunningNorm against nn.BatchNorm1d, step after step: outputs and running buffers.
    `defaults=True` builds `RunningNorm(num_features)` and expects the contract's defaults,
    which must then be the `momentum` and `eps` given."""
    label = (f"RunningNorm({num_features})  # the default momentum={momentum}, eps={eps}"
             if defaults else f"RunningNorm({num_features}, momentum={momentum}, eps={eps})")
    g = torch.Generator().manual_seed(seed)
    weight = torch.rand(num_features, generator=g) + 0.5
    bias = torch.randn(num_features, generator=g)
    steps = norm_steps(seed + 1, num_features, plan)
    # momentum and eps by keyword: nn.BatchNorm1d takes them in the other order, and a
    # student who copied that order is still right.
    rec = probe(sub, "run", "RunningNorm", [num_features], seed, steps,
                init={} if defaults else {"momentum": momentum, "eps": eps},
                assign={"weight": weight, "bias": bias}, watch=["running_mean", "running_var"],
                target="RunningNorm", label=label, hint=NORM_HINT)
    if rec["missing"]:
        fail(f"{label}: the grader needs {rec['missing'][0]} (the contract names the "
             "parameters weight and bias, shape (num_features,)).", call=label, hint=NORM_HINT)
    reference = batchnorm_reference(num_features, momentum, eps, weight, bias, steps)
    history = []
    for k, (step, got, (y, mean, var)) in enumerate(zip(steps, rec["steps"], reference), 1):
        history.append(f"{step['mode']} on {step['x'].shape[0]} rows")
        where = f"{label}, step {k} of [{'; '.join(history)}]"
        evidence = {"step": k, "mode": step["mode"], "quantity": "output"}
        # float32 against float64. Worst error of correct code: 1e-6 relative with a two-pass
        # variance, 1e-5 (7e-6 absolute) with the one-pass E[x^2] - E[x]^2 (a correct_ mutant).
        with attach(evidence):
            expect_output(got["output"], y, call=f"{where}: the output", hint=NORM_HINT,
                          rtol=5e-5, atol=5e-5)
        for name, want in (("running_mean", mean), ("running_var", var)):
            seen = got["watched"][name]
            evidence["quantity"] = name
            if seen is None:
                fail(f"{where}: the model has no tensor attribute {name}.", call=label,
                     hint=BUFFER_HINT, evidence=evidence)
            if seen["requires_grad"]:
                fail(f"{where}: {name} requires grad, so it drags the autograd graph of every "
                     "batch along. Update running statistics under torch.no_grad() (or from "
                     "detached statistics).", call=label, hint=NORM_HINT, evidence=evidence)
            # Worst error of correct code: 2.4e-7 absolute, 2e-7 relative.
            with attach(evidence):
                expect_array(seen["value"], want.float(), call=f"{where}: {name} afterwards",
                             rtol=1e-5, atol=1e-6, check_dtype=False, hint=NORM_HINT)


def tied_reference(weight, enc_bias, dec_bias, x) -> torch.Tensor:
    w = weight.double()
    code = torch.relu(x.double() @ w.T + enc_bias.double())
    return code @ w + dec_bias.double()


def check_groups(sub, case: str, head: str, base_lr: float, head_lr: float, description: str):
    """param_groups on a test model: every trainable parameter in exactly one group with the
    right lr (a parameter shared by the head and the rest may take either), frozen ones in none,
    groups torch.optim accepts, requires_grad left alone."""
    label = f"param_groups(model, {head!r}, base_lr={base_lr}, head_lr={head_lr})"
    call = f"{label}  # {description}"

    def problem(kind: str, message: str, **fields) -> None:
        fail(f"{call}{message}", call=call, hint=GROUPS_HINT, evidence={"problem": kind},
             **fields)

    rec = probe(sub, "groups_case", case, head, base_lr, head_lr, target="param_groups",
                label=label, hint=GROUPS_HINT)
    model = build_case(case)
    names: dict[int, str] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), n)
    in_head = {id(p) for p in model.get_submodule(head).parameters()}
    outside = {id(p) for n, p in model.named_parameters(remove_duplicate=False)
               if not n.startswith(head + ".")}
    allowed = {names[id(p)]: {lr for lr, ok in ((head_lr, id(p) in in_head),
                                                (base_lr, id(p) in outside)) if ok}
               for p in model.parameters() if p.requires_grad}
    frozen = {names[id(p)] for p in model.parameters() if not p.requires_grad}
    if rec["type"] not in ("list", "tuple"):
        problem("not_a_list", f" returned a {rec['type']}; expected a list of dicts.")
    seen: dict[str, list[float]] = {}
    for k, g in enumerate(rec["groups"]):
        where = f": group {k}"
        if g["type"] != "dict":
            problem("bad_group", f"{where} is a {g['type']}; expected a dict with 'params' and "
                    "'lr'.")
        if g["kind"] == "missing":
            problem("bad_group", f"{where} has no 'params' key (keys {g['keys']}).")
        if g["kind"] == "set":
            problem("set_of_params", f"{where}['params'] is a set; torch.optim needs an ordered "
                    "collection (a list), because a set's order changes from run to run.")
        if g["foreign"]:
            problem("foreign_tensor", f"{where}['params'] holds {g['foreign'][0]}.")
        if not isinstance(g["lr"], float):
            problem("no_lr", f"{where} has lr {g['lr']!r}; every group needs its own 'lr' (a "
                    "number).")
        for name in g["names"]:
            seen.setdefault(name, []).append(g["lr"])
    for name in sorted(seen):
        if name in frozen:
            problem("frozen_in_group", f": {name} has requires_grad=False but is in a group; "
                    "frozen parameters belong in none.", expected="not in any group",
                    got=f"in a group with lr {seen[name][0]}")
        if len(seen[name]) > 1:
            problem("in_two_groups", f": {name} is in {len(seen[name])} groups; each parameter "
                    "must be in exactly one (torch.optim rejects the groups otherwise).")
    for name, lrs in allowed.items():
        if name not in seen:
            problem("in_no_group", f": the trainable parameter {name} is in no group, so it "
                    "would never be trained.", expected="in one group", got="in none")
        if seen[name][0] not in lrs:
            part = "part of the head" if head_lr in lrs else "not part of the head"
            problem("wrong_lr", f": {name} ({part}) is in a group with lr {seen[name][0]}; "
                    f"expected {' or '.join(str(lr) for lr in sorted(lrs))}.",
                    expected=str(sorted(lrs)), got=str(seen[name][0]))
    if rec["sgd_error"]:
        problem("optimizer_rejects", f": torch.optim.SGD(groups) raised {rec['sgd_error']}")
    before = {n: p.requires_grad for n, p in model.named_parameters()}
    if rec["requires_grad"] != before:
        changed = sorted(n for n in before if rec["requires_grad"].get(n) != before[n])
        problem("requires_grad_changed", f" changed requires_grad of {changed}; it must only "
                "read the model.")


def check_replace_head(sub, case: str, head: str, num_classes: int, lr: float, seed: int,
                       in_dim: int, description: str) -> None:
    """replace_head on a test model: the new head, an SGD over exactly the trainable parameters
    after the replacement, and one step with it that moves the new head."""
    label = f"replace_head(model, {head!r}, {num_classes}, lr={lr})"
    call = f"{label}  # {description}"

    def problem(kind: str, message: str, **fields) -> None:
        fail(f"{call}{message}", call=call, hint=HEAD_HINT, evidence={"problem": kind}, **fields)

    model = build_case(case)
    old = getattr(model, head)
    x = seeded_normal(seed, 8, in_dim)
    rec = probe(sub, "head_case", case, head, num_classes, lr, x, seed, target="replace_head",
                label=label, hint=HEAD_HINT)
    new = rec["head"]
    if new["type"] != "Linear" or (new["in_features"], new["out_features"]) != (
            old.in_features, num_classes):
        got = (f"a {new['type']}" if new["type"] != "Linear" else
               f"Linear(in_features={new['in_features']}, out_features={new['out_features']})")
        problem("head_not_replaced", f": afterwards model.{head} is {got}; expected "
                f"Linear(in_features={old.in_features}, out_features={num_classes}).", got=got,
                expected=f"Linear({old.in_features}, {num_classes})")
    flags = {p["name"]: p["requires_grad"] for p in rec["parameters"]}
    want_flags = {n: p.requires_grad for n, p in model.named_parameters()}
    for name in (f"{head}.weight", f"{head}.bias"):
        if name not in flags:
            problem("head_not_replaced", f": the new head has no parameter {name}.")
    changed = sorted(n for n, f in want_flags.items() if flags.get(n, f) != f)
    if changed:
        problem("requires_grad_changed", f" changed requires_grad of {changed}; replace_head "
                "must leave the rest of the model as it is.")
    trainable = {n for n, f in flags.items() if f}
    if not rec["is_sgd"]:
        problem("not_sgd", f" returned a {rec['optimizer_type']}; expected a torch.optim.SGD.",
                expected="torch.optim.SGD", got=rec["optimizer_type"])
    held: list[str] = []
    for g in rec["groups"]:
        if g["foreign"]:
            problem("old_head_in_optimizer", f": the optimizer holds {g['foreign'][0]}: it was "
                    "built before the head was replaced, or from another model.")
        if g["lr"] != lr:
            problem("wrong_lr", f": the optimizer's learning rate is {g['lr']!r}; expected {lr}.",
                    expected=str(lr), got=repr(g["lr"]))
        held += g["names"]
    missing = sorted(trainable - set(held))
    if missing:
        problem("trainable_missing", f": the optimizer does not hold the trainable parameters "
                f"{missing}, so they would never change.", expected=str(sorted(trainable)),
                got=str(sorted(held)))
    frozen = sorted(set(held) - trainable)
    if frozen:
        problem("frozen_in_optimizer", f": the optimizer holds {frozen}, which have "
                "requires_grad=False; it should hold the trainable parameters only.")
    if rec["step_error"]:
        problem("step_failed", f": one training step with the returned optimizer raised "
                f"{rec['step_error']}")
    for name in sorted(trainable):
        grad = rec["grad"][name]
        moved = not torch.equal(rec["before"][name], rec["after"][name])
        if grad is not None and grad.abs().max() > 0 and not moved:
            problem("not_moved", f": after loss.backward() and optimizer.step(), {name} did not "
                    "change.")
    for name in sorted(set(flags) - trainable):
        if not torch.equal(rec["before"][name], rec["after"][name]):
            problem("frozen_moved", f": optimizer.step() changed the frozen parameter {name}.")
