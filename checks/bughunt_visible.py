"""The visible checks of the bug hunts (grader side; no `test_` prefix, not collected).

A bug hunt's points are all in its hidden checks, one per fault. What a student can check before
handing in is only what the script's docstring promises of `run(seed=0)`, whatever faults the
copy holds: it runs to the end in its time budget, returns the dict the docstring names (the
model, a history with one number per epoch in each list, ...), the numbers of its history are
finite, and the model computes outputs of the documented shapes. These checks carry 0 points
(the bug hunt is worth what its faults are worth, `faults.toml`) and reveal no fault: the
untouched exercise file passes them, and so does a copy holding any one catalogued fault,
except a fault that makes the script raise or its losses stop being numbers (a test runs every
catalogued fault through them). Each one reads the same record of one call of `run`, made by
`grader/probes/bughunt_run.py` (shipped with the release: it holds no answers).

Evidence keys: `run_keys` (what run returned), `history_lengths`, `non_finite` (history entries
that are not finite numbers, as "key[i]"), `output_shapes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grader import StudentError, fail
from grader.checking.memo import shared

# The checks carry 0 points (`@check(points=0)`): a bug hunt is worth its faults (2 points each).
RUN_TIMEOUT = 60  # seconds for run(seed=0); the fixed scripts take 1-3 s on one loaded core
CALL = "run(seed=0)"


@dataclass(frozen=True)
class Contract:
    """What a script's docstring says `run(seed=0)` returns."""

    keys: tuple[str, ...]              # of the returned dict
    history: tuple[str, ...]           # lists of the history, one number per epoch
    epochs: int                        # the script's EPOCHS, unless the script says otherwise
    input_shape: tuple[int, ...]       # a batch the model takes
    output_shapes: tuple[tuple[int, ...], ...]  # what the model returns for it
    # The script's data function ("never needs a fix"): the run records what it returned, for
    # the hidden end-to-end checks (grader.checking.bughunt_e2e), which recognise samples in it.
    data: str | None = None

    def returned(self) -> str:
        shown = ", ".join(f'"{k}": ...' for k in self.keys)
        return "{" + shown + "}"


def run_record(sub, contract: Contract) -> dict:
    """The probe's record of one call of `run(seed=0)`, made once per submission and shared by
    the checks (`grader.checking.memo.shared`); what `run` raised (or a timeout) is raised again
    for each of them."""
    return shared(sub, "bughunt_run:run_report", lambda: _run_report(sub, contract))


def _run_report(sub, contract: Contract) -> dict:
    if not sub.has("run"):
        raise StudentError(f"{sub.filename} defines no run: the script's docstring lists the "
                           "names the grader calls; keep them.", call=CALL, reason="not_defined")
    x = torch.randn(contract.input_shape, generator=torch.Generator().manual_seed(7))
    # watch=True: the same run also records what the hidden end-to-end checks judge
    # (`grader.checking.bughunt_e2e`), so the script runs once per submission.
    return sub.probe("bughunt_run:run_report", seed=0, x=x, watch=True, data=contract.data,
                     label=CALL, timeout=RUN_TIMEOUT)


def verify_runs(sub, contract: Contract, evidence: dict) -> None:
    """run(seed=0) returns (whatever it returns) within RUN_TIMEOUT seconds."""
    record = run_record(sub, contract)
    evidence["run_keys"] = record["keys"][:20]


def verify_contract(sub, contract: Contract, evidence: dict) -> None:
    """The returned value is a dict with the contract's keys, its model an nn.Module and its
    history a dict of lists holding one number (or one-element tensor) per epoch."""
    record = run_record(sub, contract)
    evidence["run_keys"] = record["keys"][:20]
    hint = "The script's docstring says what run() returns; keep that contract while you fix it."
    if record["type"] != "dict":
        fail(f"{CALL} returned a {record['type']}; the docstring says it returns a dict "
             f"{contract.returned()}.", call=CALL, expected=contract.returned(),
             got=record["type"], hint=hint)
    missing = [k for k in contract.keys if k not in record["keys"]]
    if missing:
        fail(f"{CALL} returned a dict without {', '.join(repr(k) for k in missing)}; the "
             f"docstring says it returns {contract.returned()}.", call=CALL,
             expected=", ".join(contract.keys), got=", ".join(record["keys"]) or "no keys",
             hint=hint)
    if record["values"].get("model") != "nn.Module":
        fail(f"{CALL}[\"model\"] is a {record['values'].get('model')}, not an nn.Module.",
             call=CALL, expected="an nn.Module", got=record["values"].get("model"), hint=hint)
    history = record["history"]
    if history["type"] != "dict":
        fail(f"{CALL}[\"history\"] is a {history['type']}; the docstring says it is a dict of "
             f"lists: {', '.join(contract.history)}.", call=CALL, expected="a dict",
             got=history["type"], hint=hint)
    epochs = record["epochs"] or contract.epochs
    evidence["history_lengths"] = [f"{k}: {len(v) if v is not None else 'not a list'}"
                                   for k, v in list(history["lists"].items())[:20]]
    for key in contract.history:
        if key not in history["lists"]:
            fail(f"{CALL}[\"history\"] has no {key!r}; the docstring names "
                 f"{', '.join(contract.history)}.", call=CALL,
                 expected=", ".join(contract.history),
                 got=", ".join(history["lists"]) or "no keys", hint=hint)
        values = history["lists"][key]
        if values is None:
            fail(f"{CALL}[\"history\"][{key!r}] is not a list.", call=CALL,
                 expected="a list, one number per epoch", got="not a list", hint=hint)
        if len(values) != epochs:
            fail(f"{CALL}[\"history\"][{key!r}] holds {len(values)} values for {epochs} "
                 "epochs; the docstring says one per epoch.", call=CALL,
                 expected=f"{epochs} values", got=f"{len(values)} values", hint=hint)
        other = next((i for i, v in enumerate(values) if v["kind"] == "other"), None)
        if other is not None:
            fail(f"{CALL}[\"history\"][{key!r}][{other}] is a {values[other]['type']}, not a "
                 "number.", call=CALL, expected="a number", got=values[other]["type"],
                 hint=hint)


def verify_finite(sub, contract: Contract, evidence: dict) -> None:
    """Every number of the history's lists is finite (not nan or inf)."""
    record = run_record(sub, contract)
    lists = record.get("history", {}).get("lists", {})
    if not lists:
        fail(f"{CALL} returned no history of numbers to look at.", call=CALL,
             expected=f"a history with {', '.join(contract.history)}",
             got=", ".join(record["keys"]) or record["type"])
    bad = [(key, i, v["value"]) for key, values in lists.items() for i, v in
           enumerate(values or []) if v["kind"] != "other" and not v["finite"]]
    evidence["non_finite"] = [f"{key}[{i}]" for key, i, _ in bad][:50]
    if bad:
        key, i, value = bad[0]
        fail(f"{CALL}[\"history\"][{key!r}][{i}] is {value} ({len(bad)} of the history's "
             "numbers are not finite): the training went numerically wrong somewhere.",
             call=CALL, expected="finite numbers", got=f"{key}[{i}] = {value}",
             hint="Print the loss of the first few batches: where does it first stop being "
                  "a number?")


def verify_outputs(sub, contract: Contract, evidence: dict) -> None:
    """The returned model, in eval mode, maps a batch of the documented input shape to
    outputs of the documented shapes."""
    record = run_record(sub, contract)
    call = f"{CALL}[\"model\"](x)  # x of shape {tuple(contract.input_shape)}"
    outputs = record.get("outputs")
    if outputs is None:
        fail(f"{CALL} returned no model to call.", call=call, expected="a model",
             got=", ".join(record["keys"]) or record["type"])
    if "error" in outputs:
        fail(f"{call} failed: {outputs['error']}", call=call, expected="outputs",
             got=outputs["error"][:200])
    expected = [list(s) for s in contract.output_shapes]
    evidence["output_shapes"] = outputs["shapes"][:10]
    if outputs["shapes"] != expected:
        shown = lambda shapes: ", ".join(  # noqa: E731
            str(tuple(s)) if isinstance(s, list) else s for s in shapes)
        fail(f"{call} returned outputs of shape {shown(outputs['shapes'])}; the docstring "
             f"says {shown(expected)}.", call=call, expected=shown(expected),
             got=shown(outputs["shapes"]),
             hint="The script's docstring gives the shapes the model's forward returns.")

