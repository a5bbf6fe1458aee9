"""Backward passes switched off in the worker, for checks of gradients computed by hand
(`@check(autograd=False)`, `CheckInfo.autograd`).

Every way torch has to run a backward pass (`Tensor.backward`, `torch.autograd.grad`,
`torch.autograd.functional`, `torch.func.grad`/`vjp`) ends in one call of the autograd engine,
`Variable._execution_engine.run_backward`, looked up at each call; forward-mode differentiation
(`torch.autograd.forward_ad`, `torch.func.jvp`/`jacfwd`) starts with `torch._C._enter_dual_level`.
`install()`, run in a fresh worker before any student code, puts stand-ins in both places for the
worker's whole life: each passes through to torch while the switch is on and raises a message
that says why while it is off. So a reference student code took at import is a stand-in too,
and the engine's class in `torch._C` is one that refuses to make an engine (a new engine of
one's own was the next way round).
`torch.ops.aten._backward`, which runs the engine from C++, is refused by a torch-function
mode while the switch is off. `backward_switch(False)` turns the switch off for one call or
probe, and says afterwards
whether the code put something else in either place (`Switched.tampered`): that call's answer
is then refused, and the stand-ins are put back.

Building graphs (a forward pass with `requires_grad`) still works: a check may look at the
graph student code builds. What stays open, as for every record made in the worker (see
`grader.worker.seal`): code that digs the real engine out of the stand-in's closure, leaves
the mode's stack, runs TorchScript that differentiates (its interpreter calls the engine from
C++), calls the graph's nodes one by one, or forks a process before the call (whose engine the
switch does not reach), is deliberate circumvention of a contract the report states, not an
honest attempt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

REFUSED = ("backward passes are switched off for this check: compute the gradients by hand, "
           "as the contract says (no backward(), torch.autograd.grad, torch.func or forward-mode "
           "differentiation)")
TAMPERED = ("the submission put its own object in place of torch's autograd engine during a "
            "check that switches backward passes off (the contract: gradients by hand)")

_ON = [True]  # the switch (a list: its identity is what the worker's seal fingerprints)
_STAND_INS: list[tuple[Any, str, Any]] = []  # (owner, attribute, stand-in), set by install()
_ORIGINALS: list[tuple[Any, str, Any]] = []  # what they stand in for (for `uninstall`)


def _refuse_when_off() -> None:
    if not _ON[0]:
        raise RuntimeError(REFUSED)


def install() -> None:
    """Put the stand-ins in place (once per worker, before student code runs)."""
    if _STAND_INS:
        return
    import importlib

    import torch

    # (by its module's name: `torch.autograd.variable` is also a function of torch.autograd)
    variable = importlib.import_module("torch.autograd.variable")
    engine = variable.Variable._execution_engine

    class Engine:
        """torch's autograd engine while the switch is on; a refusal while it is off."""

        __slots__ = ()

        def __getattr__(self, name: str) -> Any:
            _refuse_when_off()
            found = getattr(engine, name)
            if not callable(found):
                return found

            # A method taken while the switch is on (`run = ENGINE.run_backward` at import)
            # must still refuse when it is called with the switch off.
            def method(*args: Any, **kwargs: Any) -> Any:
                _refuse_when_off()
                return found(*args, **kwargs)

            return method

    enter: Callable[[], int] = torch._C._enter_dual_level

    def enter_dual_level() -> int:
        _refuse_when_off()
        return enter()

    class NoNewEngine:
        """In place of the engine's class (which torch._dynamo names in annotations): an
        engine of one's own would need no stand-in's leave."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a second autograd engine cannot be made in the grader's "
                               "worker")

    # (torch's own forward_ad enters its levels through predispatch, which took the function
    # from torch._C when it was imported)
    predispatch = importlib.import_module("torch._functorch.predispatch")
    _STAND_INS[:] = [(variable.Variable, "_execution_engine", Engine()),
                     (torch._C, "_enter_dual_level", enter_dual_level),
                     (predispatch, "_enter_dual_level_impl", enter_dual_level),
                     (torch._C, "_ImperativeEngine", NoNewEngine),
                     (variable, "ImperativeEngine", NoNewEngine)]
    _ORIGINALS[:] = [(owner, name, getattr(owner, name)) for owner, name, _ in _STAND_INS]
    _put_back()


def uninstall() -> None:
    """Put torch's own objects back (for the grader's own tests, which share a process)."""
    for owner, name, original in _ORIGINALS:
        setattr(owner, name, original)
    _STAND_INS.clear()
    _ORIGINALS.clear()


def _put_back() -> bool:
    """Put every stand-in in place; whether one of them had been replaced."""
    replaced = False
    for owner, name, stand_in in _STAND_INS:
        if getattr(owner, name, None) is not stand_in:
            setattr(owner, name, stand_in)
            replaced = True
    return replaced


class Switched:
    """What a block run with the switch off did: `tampered` once it is over."""

    tampered = False


@contextlib.contextmanager
def backward_switch(on: bool) -> Iterator[Switched]:
    """Run the block with backward passes on (as usual) or off (refused)."""
    switched = Switched()
    if on:
        yield switched
        return
    if not _STAND_INS:
        raise RuntimeError("no_backward.install() was not run in this process")
    _put_back()  # what the submission put there before (at import) does not run now
    _ON[0] = False
    try:
        with _refuse_backward_ops():
            yield switched
    finally:
        _ON[0] = True
        switched.tampered = _put_back()


def _refuse_backward_ops() -> Any:
    """A torch-function mode refusing the operator that runs the engine from C++
    (`torch.ops.aten._backward`), which the engine's stand-in never sees."""
    from torch.overrides import TorchFunctionMode

    class Refuse(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if str(func).split(".")[:2] == ["aten", "_backward"]:
                raise RuntimeError(REFUSED)
            return func(*args, **(kwargs or {}))

    return Refuse()
