"""Defer importing torch._dynamo until something compiles.

torch's optimizers import torch._dynamo the first time one steps or zero_grads: ~1.8 s of CPU
and ~100 MB (sympy, fx passes) in every process that trains anything, the grader's and each
zygote's, and in every cold `torchgrade check` twice. They use two of its names, and in eager
execution both do nothing:

- `disable(fn, recursive, wrapping=False)`, from `torch._disable_dynamo`'s wrapper (which caches
  the answer as `fn.__dynamo_disable`): only compiled code must not trace into `fn`;
- `graph_break()`, from `torch.optim.optimizer._use_grad_for_differentiable`: a no-op outside
  compilation.

and torch.func (`vjp`, `grad`, `jacrev`), a reference's tool, one more:

- `compiled_autograd._disable()`, around each of its `torch.autograd.grad`: the autograd
  engine's compiler set to none for the block (done here by the same C call).

`defer()` puts a stand-in module at `torch._dynamo` that answers exactly those two calls as eager
execution does and loads the real module the moment anything else of it is asked for
(`torch.compile`, `torch._dynamo.disable` used as a decorator, a submodule's import, any other
name): the stand-in then leaves `sys.modules`, forwards everything to the real module, and clears
every cache it let torch set, so that from then on torch disables those functions as it always
does. Nothing can be compiling before the real module is loaded, so the stand-in changes when
the import happens, never a result (`tests/test_deferred_dynamo.py`: the same parameters after
every optimizer's steps, bit for bit; `torch.compile` after the stand-in). A torch that calls
anything else loads the real module: slower, as without the stand-in, never different.

Where it is used: the grader's own check runs (`grader.running.runner`, `.batch`, the pytest
plugin), in a local check and in a pool's grading processes alike, so that references train and
take torch.func gradients without it (a cold `torchgrade check` of training code: ~1.8 s less
CPU; a pool's fork server ~1.1 s less to import before the first grading process); and a zygote
told that its workers build no optimizer (`zygote.warm`). A zygote for exercises that train
imports the real module once ahead instead, shared by its workers: student code there may need
more of it inside a call's deadline (`torch.use_deterministic_algorithms` imports
torch._inductor, which imports it). Student code in a worker that undoes the stand-in only
makes its own worker slower.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

NAME = "torch._dynamo"
CACHE = "__dynamo_disable"  # the attribute torch._disable_dynamo caches its answer in


class DeferredDynamo(types.ModuleType):
    """The stand-in at `torch._dynamo` until the real module is needed (see the module's doc)."""

    def __init__(self) -> None:
        super().__init__(NAME, "torch._dynamo, not imported yet (grader.worker.deferred_dynamo)")
        self._real: types.ModuleType | None = None
        self._cached: list[Callable[..., Any]] = []  # functions whose CACHE holds our answer
        self._compiled_autograd = DeferredCompiledAutograd(self)

    def disable(self, fn: Callable[..., Any] | None = None, recursive: bool = True, *,
                wrapping: bool = True, **kwargs: Any) -> Any:
        """`torch._disable_dynamo`'s call (a function, `wrapping=False`): `fn` itself, which
        runs exactly as the disabled function would outside compilation. Any other use is the
        real one's."""
        if self._real is None and callable(fn) and not wrapping and not kwargs:
            self._cached.append(fn)
            return fn
        return self.real().disable(fn, recursive, wrapping=wrapping, **kwargs)

    def graph_break(self, *args: Any, **kwargs: Any) -> None:
        """Outside compilation, nothing (as the real one does there)."""
        if self._real is not None or args or kwargs:
            self.real().graph_break(*args, **kwargs)

    @property
    def compiled_autograd(self) -> DeferredCompiledAutograd:
        """`torch._dynamo.compiled_autograd`: torch.func's vjp, grad and jacrev enter its
        `_disable()` around every `torch.autograd.grad`."""
        if self._real is not None:
            return self._real.compiled_autograd
        return self._compiled_autograd

    def real(self) -> types.ModuleType:
        """The real torch._dynamo, imported on first need."""
        if self._real is None:
            if sys.modules.get(NAME) is self:
                del sys.modules[NAME]
            torch = sys.modules["torch"]
            if torch.__dict__.get("_dynamo") is self:
                del torch._dynamo
            self._real = importlib.import_module(NAME)
            for fn in self._cached:  # torch computes the real disabled functions again
                getattr(fn, "__dict__", {}).pop(CACHE, None)
            self._cached.clear()
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


class DeferredCompiledAutograd(types.ModuleType):
    """The stand-in's `compiled_autograd`: `_disable()` as the real one does it (the autograd
    engine's compiler set to none for the block, then restored), without its Python module
    state, which the real module starts afresh (compiled autograd off) when it loads; anything
    else is the real module's, loaded on first use."""

    def __init__(self, dynamo: DeferredDynamo) -> None:
        super().__init__(NAME + ".compiled_autograd", "not imported yet")
        self._dynamo = dynamo

    @contextlib.contextmanager
    def _disable(self) -> Iterator[None]:
        if self._dynamo._real is not None:
            with self._dynamo._real.compiled_autograd._disable():
                yield
            return
        engine = sys.modules["torch"]._C._dynamo.compiled_autograd
        prior_compiler, prior_dynamic = engine.set_autograd_compiler(None, False)
        try:
            yield
        finally:
            engine.set_autograd_compiler(prior_compiler, prior_dynamic)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamo.real().compiled_autograd, name)


def defer() -> None:
    """Put the stand-in at `torch._dynamo` (imports torch); nothing when torch._dynamo, real or
    stand-in, is already there."""
    if NAME in sys.modules:
        return
    import torch

    stand_in = DeferredDynamo()
    sys.modules[NAME] = stand_in
    torch._dynamo = stand_in


def deferred() -> bool:
    """Whether torch._dynamo is still the stand-in (the real one was never needed)."""
    module = sys.modules.get(NAME)
    return isinstance(module, DeferredDynamo) and module._real is None
