"""`grader.worker.forbidden_ops`: every way to an operator the contract forbids (a module, its
subclass, the functional form, the aten operator itself) raises naming it; other operators run;
nothing is refused once the block is over, or with no fragment at all."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.worker.forbidden_ops import forbidden_ops

pytestmark = pytest.mark.fast


class Subclass(nn.BatchNorm1d):
    pass


ROUTES = {
    "nn.BatchNorm1d": lambda x: nn.BatchNorm1d(3)(x),
    "a subclass": lambda x: Subclass(3)(x),
    "F.batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "torch.batch_norm": lambda x: torch.batch_norm(x, None, None, None, None, True, 0.1, 1e-5,
                                                   False),
    "torch.ops.aten": lambda x: torch.ops.aten.native_batch_norm(x, None, None, None, None,
                                                                 True, 0.1, 1e-5),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_way_to_a_forbidden_operator_is_refused_only_inside(route):
    x = torch.randn(5, 3)
    with forbidden_ops(["batch_norm"]):
        with pytest.raises(RuntimeError, match=r"batch_norm.* is not allowed in this check"):
            ROUTES[route](x)
        by_hand = (x - x.mean(0)) / (x.var(0, unbiased=False) + 1e-5).sqrt()  # still allowed
    assert torch.allclose(by_hand, F.batch_norm(x, None, None, training=True), atol=1e-5)
    with forbidden_ops([]):
        ROUTES[route](x)
