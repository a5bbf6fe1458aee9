"""Backward passes switched off in the worker, for checks of gradients computed by hand
(`@check(autograd=False)`, `CheckInfo.autograd`).

Every way torch has to run a backward pass, `Tensor.backward`, `torch.autograd.grad`,
`torch.autograd.functional` and `torch.func`'s transforms, ends in one call of the autograd
engine (`Variable._execution_engine.run_backward`, looked up at each call). While the switch is
off that engine is one that refuses, with a message that says why; it is put back after the
call whatever happened. Building graphs (a forward pass with `requires_grad`) still works: a
check may look at the graph student code builds. Code that kept the engine object itself
before the call could still run one: that is deliberate circumvention, which a contract of
"by hand" cannot stop and does not need to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

REFUSED = ("backward passes are switched off for this check: compute the gradients by hand, "
           "as the contract says (no backward(), torch.autograd.grad or torch.func)")


class _RefusingEngine:
    """Stands in for torch's autograd engine: any use of it raises."""

    def __getattr__(self, name: str):
        raise RuntimeError(REFUSED)


@contextlib.contextmanager
def backward_switch(on: bool) -> Iterator[None]:
    """Run the block with backward passes on (as usual) or off."""
    if on:
        yield
        return
    from torch.autograd.variable import Variable

    engine = Variable._execution_engine
    Variable._execution_engine = _RefusingEngine()  # type: ignore[assignment]
    try:
        yield
    finally:
        Variable._execution_engine = engine
