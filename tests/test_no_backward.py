"""`grader.worker.no_backward`: with the switch off, every way torch has to run a backward pass
raises the message that says why; a forward pass still builds its graph; afterwards (also after
a raise) backward passes work again."""

from __future__ import annotations

import pytest
import torch

from grader.worker.no_backward import REFUSED, backward_switch

pytestmark = pytest.mark.fast


def _x() -> torch.Tensor:
    return torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)


ROUTES = {
    "Tensor.backward": lambda: (_x() * 2).sum().backward(),
    "torch.autograd.grad": lambda: (lambda x: torch.autograd.grad((x ** 2).sum(), x))(_x()),
    "torch.autograd.functional.jacobian": lambda: torch.autograd.functional.jacobian(
        lambda t: t.sin(), _x().detach()),
    "torch.func.grad": lambda: torch.func.grad(lambda t: (t ** 2).sum())(_x().detach()),
    "torch.func.vjp": lambda: torch.func.vjp(torch.sin, _x().detach())[1](torch.ones(3)),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_backward_route_is_refused_while_off_and_works_after(route):
    with backward_switch(False):
        with pytest.raises(RuntimeError, match="switched off for this check"):
            ROUTES[route]()
        graph = (_x() * 2).sum()  # a forward pass still records its graph
        assert graph.grad_fn is not None
    ROUTES[route]()  # the engine is back


def test_on_changes_nothing_and_the_message_names_the_contract():
    x = _x()
    with backward_switch(True):
        (x ** 2).sum().backward()
    assert torch.equal(x.grad, 2 * x.detach())
    assert "by hand" in REFUSED
