"""How `nn.Module` registers what the optimizer sees.

Assigning an `nn.Parameter` or an `nn.Module` to an attribute of a module (`self.fc = nn.Linear(3,
2)`) *registers* it: `nn.Module.__setattr__` files it under the module, so that it shows up in
`parameters()`, `state_dict()`, `modules()`, and follows `.to()`, `.double()`, `.train()` and
`.eval()`. Anything else is a plain Python attribute: a list of layers, a tensor with
`requires_grad=True`, a layer created inside `forward`. Those still compute, and autograd even
gives them gradients, but `model.parameters()` does not list them, so an optimizer built from it
never updates them, `state_dict()` does not save them, and `.to(device)` leaves them behind.
Tensors that must be saved and moved but not trained (running statistics) are *buffers*
(`self.register_buffer`). An optimizer holds the very tensors it was given when it was built.

Fill in every class and function below. Each docstring is the contract the grader checks; run
`torchgrade check parameters.py` to see how you are doing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - you may want it
from torch import nn


class MLP(nn.Module):
    """A multi-layer perceptron whose every layer is registered.

    MLP(in_dim, hidden, out_dim, dropout=0.0): for each width in `hidden`,
    Linear -> ReLU -> Dropout(dropout); then a final Linear to `out_dim` (no ReLU, no dropout
    after it). Every layer is registered: its parameters appear in parameters(), state_dict()
    and follow .to(); the nn.Linear layers appear in modules() in forward order.
    forward(x of shape (N, in_dim)) -> (N, out_dim). Dropout is active in training mode only.

    >>> model = MLP(4, [8, 6], 3, dropout=0.1)
    >>> [(m.in_features, m.out_features) for m in model.modules() if isinstance(m, nn.Linear)]
    [(4, 8), (8, 6), (6, 3)]
    >>> sum(p.numel() for p in model.parameters())     # (4*8 + 8) + (8*6 + 6) + (6*3 + 3)
    115
    >>> model(torch.randn(5, 4)).shape
    torch.Size([5, 3])
    """

    def __init__(self, in_dim: int, hidden: list[int], out_dim: int, dropout: float = 0.0):
        super().__init__()
        # TODO: build the layers and register them (nn.Sequential or nn.ModuleList, not a list)
        raise NotImplementedError("MLP")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO
        raise NotImplementedError("MLP.forward")


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of scalar parameters of `model`, as a Python int.

    A parameter shared by two submodules counts once; buffers are not parameters.
    trainable_only=True counts only the parameters with requires_grad=True.

    >>> count_parameters(nn.Linear(3, 2))                # 3*2 weights + 2 biases
    8
    >>> net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    >>> _ = net[0].weight.requires_grad_(False)
    >>> count_parameters(net), count_parameters(net, trainable_only=True)
    (11, 5)
    """
    # TODO
    raise NotImplementedError("count_parameters")


class RunningNorm(nn.Module):
    """Batch normalisation of (N, num_features) inputs, built by hand.

    RunningNorm(num_features, momentum=0.1, eps=1e-5) behaves exactly like
    nn.BatchNorm1d(num_features, eps, momentum), step after step, in both modes:
    - parameters `weight` (ones) and `bias` (zeros), shape (num_features,);
    - buffers `running_mean` (zeros) and `running_var` (ones): in state_dict(), not in
      parameters();
    - training mode: normalise each feature with the batch mean and the *biased* batch
      variance, y = (x - mean) / sqrt(var + eps) * weight + bias, and update
      running = (1 - momentum) * running + momentum * batch_statistic, where the variance
      tracked is the *unbiased* one (divided by N - 1);
    - eval mode: normalise with the running statistics and leave them unchanged.
    Do not use nn.BatchNorm* or F.batch_norm (the grader refuses them in every check of it).

    >>> norm = RunningNorm(2, momentum=0.5)
    >>> y = norm(torch.tensor([[1.0, 0.0], [3.0, 4.0]]))    # batch mean (2, 2), biased var (1, 4)
    >>> norm.running_mean, norm.running_var                  # unbiased var (2, 8)
    (tensor([1., 1.]), tensor([1.5000, 4.5000]))
    >>> [name for name, _ in norm.named_parameters()]
    ['weight', 'bias']
    """

    def __init__(self, num_features: int, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        # TODO: parameters weight and bias, buffers running_mean and running_var
        raise NotImplementedError("RunningNorm")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: self.training says which mode the module is in
        raise NotImplementedError("RunningNorm.forward")


class TiedAutoencoder(nn.Module):
    """An autoencoder whose encoder and decoder share one weight.

    TiedAutoencoder(in_dim, code_dim): code = relu(x @ W.T + b_enc), out = code @ W + b_dec,
    with one weight parameter W of shape (code_dim, in_dim) used by both halves, and bias
    vectors b_enc (code_dim,) and b_dec (in_dim,): exactly in_dim*code_dim + code_dim + in_dim
    parameters, W starting from random values of moderate size (as nn.Linear's weight does).
    forward(x of shape (N, in_dim)) -> out (N, in_dim).

    >>> model = TiedAutoencoder(6, 2)
    >>> sum(p.numel() for p in model.parameters())     # 6*2 + 2 + 6
    20
    >>> model(torch.randn(4, 6)).shape
    torch.Size([4, 6])
    """

    def __init__(self, in_dim: int, code_dim: int):
        super().__init__()
        # TODO
        raise NotImplementedError("TiedAutoencoder")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO
        raise NotImplementedError("TiedAutoencoder.forward")


def param_groups(model: nn.Module, head: str, base_lr: float, head_lr: float) -> list[dict]:
    """Optimizer parameter groups: the submodule `head` learns at head_lr, the rest at base_lr.

    Returns a list of dicts {"params": [...], "lr": ...} that torch.optim accepts: the
    parameters of submodule `head` with lr=head_lr, every other parameter with lr=base_lr.
    Each trainable parameter is in exactly one group; parameters with requires_grad=False are
    in none.

    >>> net = nn.Sequential()
    >>> net.body, net.head = nn.Linear(4, 8), nn.Linear(8, 2)
    >>> groups = param_groups(net, "head", base_lr=0.01, head_lr=0.1)
    >>> [(len(g["params"]), g["lr"]) for g in groups]    # body.weight, body.bias | head.*
    [(2, 0.01), (2, 0.1)]
    >>> optimizer = torch.optim.SGD(groups, lr=0.01)
    """
    # TODO
    raise NotImplementedError("param_groups")


def replace_head(model: nn.Module, head: str, num_classes: int, lr: float) -> torch.optim.Optimizer:
    """Put a new classifier head on `model` and return an optimizer that trains it.

    Replaces the nn.Linear at attribute `head` by a new nn.Linear(in_features, num_classes)
    (in_features of the old one) and returns torch.optim.SGD(..., lr=lr) over all of the
    model's trainable parameters as they are *after* the replacement.

    >>> net = nn.Sequential()
    >>> net.body, net.fc = nn.Linear(4, 8), nn.Linear(8, 10)
    >>> optimizer = replace_head(net, "fc", 3, lr=0.1)
    >>> net.fc
    Linear(in_features=8, out_features=3, bias=True)
    >>> sum(p.numel() for g in optimizer.param_groups for p in g["params"])   # 40 + 27
    67
    """
    # TODO
    raise NotImplementedError("replace_head")
