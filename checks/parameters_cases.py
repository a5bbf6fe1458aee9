"""Seeded inputs of the `parameters` checks (shipped with the visible checks; no hidden check's
inputs here)."""

from __future__ import annotations

import math

import torch


def seeded_normal(seed: int, *shape: int, scale: float = 1.0, shift=0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale + shift


MLP_VISIBLE = [(4, [8, 6], 3, 0.0), (3, [16], 1, 0.5), (2, [4, 4, 4], 2, 0.1)]


def norm_steps(seed: int, num_features: int, plan: list[tuple[str, int]]) -> list[dict]:
    """Inputs with a different mean and scale per feature, so normalising matters. They
    require grad, as the output of an earlier layer would."""
    g = torch.Generator().manual_seed(seed)
    shift = torch.randn(num_features, generator=g)
    scale = torch.rand(num_features, generator=g) * 2 + 0.5
    return [{"mode": mode, "x": torch.randn(n, num_features, generator=g) * scale + shift,
             "seed": seed + k, "requires_grad": True} for k, (mode, n) in enumerate(plan)]


def tied_values(seed: int, in_dim: int, code_dim: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(code_dim, in_dim, generator=g) / math.sqrt(in_dim)
    return weight, torch.randn(code_dim, generator=g) * 0.3, torch.randn(in_dim, generator=g) * 0.3
