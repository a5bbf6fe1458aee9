"""A correct submission in another style: modules added by name with dropout before the ReLU,
numpy counts, var_mean and lerp_ in RunningNorm, an explicit matmul autoencoder, one group per
parameter."""
import math

import numpy as np
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        self.names = []
        width = in_dim
        for i, h in enumerate(hidden):
            self.add_module(f"fc{i}", nn.Linear(width, h))
            # Dropout scales by a non-negative factor, so it commutes with ReLU.
            self.add_module(f"drop{i}", nn.Dropout(p=dropout))
            self.add_module(f"act{i}", nn.ReLU())
            self.names += [f"fc{i}", f"drop{i}", f"act{i}"]
            width = h
        self.add_module("out", nn.Linear(width, out_dim))
        self.names.append("out")

    def forward(self, x):
        for name in self.names:
            x = getattr(self, name)(x)
        return x


def count_parameters(model, trainable_only=False):
    return sum(np.prod(p.shape, dtype=np.int64) for p in model.parameters()
               if p.requires_grad or not trainable_only)


class RunningNorm(nn.Module):
    def __init__(self, num_features, momentum=0.1, eps=1e-5):
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.register_parameter("weight", nn.Parameter(torch.ones(num_features)))
        self.register_parameter("bias", nn.Parameter(torch.zeros(num_features)))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if self.training:
            var, mean = torch.var_mean(x, dim=0, unbiased=False)
            with torch.no_grad():
                self.running_mean.lerp_(mean, self.momentum)
                self.running_var.lerp_(x.var(dim=0), self.momentum)   # unbiased
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


class TiedAutoencoder(nn.Module):
    def __init__(self, in_dim, code_dim):
        super().__init__()
        self.W = nn.Parameter(torch.randn(code_dim, in_dim) / math.sqrt(in_dim))
        self.b_enc = nn.Parameter(torch.zeros(code_dim))
        self.b_dec = nn.Parameter(torch.zeros(in_dim))

    def forward(self, x):
        code = torch.clamp(torch.matmul(x, self.W.T) + self.b_enc, min=0)
        return torch.matmul(code, self.W) + self.b_dec


def param_groups(model, head, base_lr, head_lr):
    head_ids = set(map(id, getattr(model, head).parameters()))
    return [{"params": [p], "lr": head_lr if id(p) in head_ids else base_lr}
            for p in model.parameters() if p.requires_grad]


def replace_head(model, head, num_classes, lr):
    old = model._modules[head]
    model.add_module(head, nn.Linear(old.in_features, num_classes))
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.SGD(params=trainable, lr=lr, momentum=0.0)
