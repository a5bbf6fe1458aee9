"""A correct submission in another style: nn.ModuleList with functional activations, buffers
updated by rebinding, a tied autoencoder built on nn.Linear, groups found by name."""
import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout=0.0):
        super().__init__()
        widths = [in_dim] + list(hidden) + [out_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.p = dropout

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.dropout(F.relu(layer(x)), self.p, self.training)
        return self.layers[-1](x)


def count_parameters(model, trainable_only=False):
    unique = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        unique[id(p)] = p
    return sum(p.numel() for p in unique.values() if p.requires_grad or not trainable_only)


class RunningNorm(nn.Module):
    def __init__(self, num_features, momentum=0.1, eps=1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        if not self.training:
            x_hat = (x - self.running_mean) / (self.running_var + self.eps).sqrt()
            return self.weight * x_hat + self.bias
        n = x.shape[0]
        mean = x.sum(dim=0) / n
        centred = x - mean
        sq = (centred ** 2).sum(dim=0)
        m = self.momentum
        # Rebinding a registered buffer name keeps it a buffer; detach keeps it out of the graph.
        self.running_mean = ((1 - m) * self.running_mean + m * mean).detach()
        self.running_var = ((1 - m) * self.running_var + m * sq / (n - 1)).detach()
        self.num_batches_tracked += 1
        return self.weight * centred / torch.sqrt(sq / n + self.eps) + self.bias


class TiedAutoencoder(nn.Module):
    def __init__(self, in_dim, code_dim):
        super().__init__()
        self.encoder = nn.Linear(in_dim, code_dim)
        self.dec_bias = nn.Parameter(torch.zeros(in_dim))

    def forward(self, x):
        code = torch.relu(self.encoder(x))
        return code @ self.encoder.weight + self.dec_bias


def param_groups(model, head, base_lr, head_lr):
    prefix = head + "."
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in trainable if not n.startswith(prefix)], "lr": base_lr},
        {"params": [p for n, p in trainable if n.startswith(prefix)], "lr": head_lr},
    ]


def replace_head(model, head, num_classes, lr):
    in_features = getattr(model, head).in_features
    setattr(model, head, nn.Linear(in_features, num_classes))
    return torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=lr)
