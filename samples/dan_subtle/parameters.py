"""Parameters and modules: RunningNorm's mean treated as a constant."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Linear -> ReLU -> Dropout for each hidden width, then a final Linear."""

    def __init__(self, in_dim: int, hidden: list[int], out_dim: int, dropout: float = 0.0):
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, out_dim))
        # nn.Sequential registers every layer; a plain list would hide them from parameters().
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    # parameters() yields a shared parameter once; buffers are not parameters.
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


class RunningNorm(nn.Module):
    """BatchNorm1d by hand: batch statistics in training mode, running ones in eval mode."""

    def __init__(self, num_features: int, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.momentum = momentum
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        # Buffers: saved in state_dict() and moved by .to(), but never seen by an optimizer.
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            n = x.shape[0]
            mean = x.mean(dim=0).detach()
            var = x.var(dim=0, unbiased=False)  # normalise with the biased variance
            with torch.no_grad():  # the running statistics carry no autograd history
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                # ...but BatchNorm tracks the unbiased variance
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class TiedAutoencoder(nn.Module):
    """One weight W (code_dim, in_dim) encodes with W.T and decodes with W."""

    def __init__(self, in_dim: int, code_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(code_dim, in_dim))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # nn.Linear's initialisation
        bound = 1 / math.sqrt(in_dim)
        self.enc_bias = nn.Parameter(torch.empty(code_dim).uniform_(-bound, bound))
        self.dec_bias = nn.Parameter(torch.zeros(in_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        code = F.relu(F.linear(x, self.weight, self.enc_bias))
        return F.linear(code, self.weight.t(), self.dec_bias)


def param_groups(model: nn.Module, head: str, base_lr: float, head_lr: float) -> list[dict]:
    # By identity, not by name: a parameter shared with the head lands in one group only.
    head_ids = {id(p) for p in model.get_submodule(head).parameters()}
    head_params, base_params = [], []
    for p in model.parameters():
        if p.requires_grad:
            (head_params if id(p) in head_ids else base_params).append(p)
    return [{"params": base_params, "lr": base_lr}, {"params": head_params, "lr": head_lr}]


def replace_head(model: nn.Module, head: str, num_classes: int, lr: float) -> torch.optim.Optimizer:
    old = getattr(model, head)
    setattr(model, head, nn.Linear(old.in_features, num_classes))
    # Built after the replacement: an optimizer holds the tensors it was given, so one built
    # before would keep training the old head's parameters and never see the new ones.
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
