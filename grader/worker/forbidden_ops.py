"""Operators a contract forbids, refused in the worker while a check's calls run
(`@check(forbid=[...])`, `CheckInfo.forbid`): "compute the normalisation yourself, without
nn.BatchNorm* or F.batch_norm" holds for every check of that class, not only the one that
looks.

Every torch operator reaches the dispatcher as an aten operator (`nn.BatchNorm1d`, a subclass
of it, `F.batch_norm`, `torch.batch_norm` and `torch.ops.aten.batch_norm` all run
`aten.native_batch_norm` or a variant), so a dispatch mode that sees an operator whose name
holds one of the forbidden fragments raises there, naming it. As for every record made in the
worker (`grader.worker.seal`), code written to leave the mode's stack is deliberate
circumvention, not an honest attempt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence


@contextlib.contextmanager
def forbidden_ops(fragments: Sequence[str]) -> Iterator[None]:
    """Run the block refusing every aten operator whose name holds one of `fragments` (none:
    nothing changes)."""
    if not fragments:
        yield
        return
    from torch.utils._python_dispatch import TorchDispatchMode

    class Refuse(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            if any(fragment in name for fragment in fragments):
                raise RuntimeError(f"{name} is not allowed in this check: the contract asks "
                                   "you to compute this yourself")
            return func(*args, **(kwargs or {}))

    with Refuse():
        yield
