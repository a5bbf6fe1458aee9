"""`grader.worker.no_backward`: with the switch off, every way torch has to differentiate
(backward and forward mode) raises the message that says why, also through a reference taken
before (as student code takes one at import) and through an engine of one's own; a forward pass
still builds its graph; code that puts torch's engine back is found out; afterwards (also after
a raise) everything works again. In-process: `install` and `uninstall` around each test."""

from __future__ import annotations

import importlib

import pytest
import torch

from grader.worker import no_backward
from grader.worker.no_backward import backward_switch

pytestmark = pytest.mark.fast
variable = importlib.import_module("torch.autograd.variable")


@pytest.fixture(autouse=True)
def stand_ins():
    no_backward.install()
    yield
    no_backward.uninstall()


def _x() -> torch.Tensor:
    return torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)


def _saved_engine():
    """As a submission's `ENGINE = Variable._execution_engine` at import, used later."""
    engine = variable.Variable._execution_engine
    x = _x()
    y = (x * 2).sum()
    return engine.run_backward((y,), (torch.ones_like(y),), False, False, (x,), False, False)


SAVED_METHOD: list = []


def _call_saved_method():
    x = _x()
    y = (x * 2).sum()
    return SAVED_METHOD[0]((y,), (torch.ones_like(y),), False, False, (x,), False, False)


def _aten_backward():
    x = _x()
    torch.ops.aten._backward((x * 2).sum(), [x])


ROUTES = {
    "Tensor.backward": lambda: (_x() * 2).sum().backward(),
    "torch.autograd.grad": lambda: (lambda x: torch.autograd.grad((x ** 2).sum(), x))(_x()),
    "torch.autograd.functional.jacobian": lambda: torch.autograd.functional.jacobian(
        lambda t: t.sin(), _x().detach()),
    "torch.func.grad": lambda: torch.func.grad(lambda t: (t ** 2).sum())(_x().detach()),
    "torch.func.vjp": lambda: torch.func.vjp(torch.sin, _x().detach())[1](torch.ones(3)),
    "torch.func.jacfwd": lambda: torch.func.jacfwd(torch.sin)(_x().detach()),
    "forward_ad": lambda: torch.autograd.forward_ad.dual_level().__enter__(),
    "an engine saved before": _saved_engine,
    "a method of it saved before": _call_saved_method,
    "torch.ops.aten._backward": _aten_backward,
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_is_refused_while_off_and_works_after(route):
    SAVED_METHOD[:] = [variable.Variable._execution_engine.run_backward]  # with the switch on
    with backward_switch(False) as switched:
        with pytest.raises(RuntimeError, match="switched off for this check"):
            ROUTES[route]()
        graph = (_x() * 2).sum()  # a forward pass still records its graph
        assert graph.grad_fn is not None
    assert not switched.tampered
    if route == "forward_ad":
        with torch.autograd.forward_ad.dual_level():
            pass
    else:
        ROUTES[route]()  # everything is back


def test_an_engine_of_ones_own_cannot_be_made():
    with pytest.raises(RuntimeError, match="cannot be made"):
        torch._C._ImperativeEngine()
    with pytest.raises(RuntimeError, match="cannot be made"):
        variable.ImperativeEngine()


def test_putting_an_engine_back_is_found_out_and_undone():
    stand_in = variable.Variable._execution_engine
    with backward_switch(False) as switched:
        variable.Variable._execution_engine = object()  # as if it were torch's own again
    assert switched.tampered and variable.Variable._execution_engine is stand_in


def test_on_changes_nothing_and_the_message_names_the_contract():
    x = _x()
    with backward_switch(True) as switched:
        (x ** 2).sum().backward()
    assert torch.equal(x.grad, 2 * x.detach()) and not switched.tampered
    assert "by hand" in no_backward.REFUSED
