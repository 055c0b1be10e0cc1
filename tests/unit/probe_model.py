"""A user model for tests: records the autocast state its forward pass ran under."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

SEEN: list[tuple[bool, bool, str]] = []  # (grad enabled, autocast enabled, matmul output dtype)


class Probe(nn.Module):
    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.flat = nn.Flatten()
        self.fc = nn.Linear(in_features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fc(self.flat(x))
        SEEN.append((torch.is_grad_enabled(), torch.is_autocast_enabled(x.device.type), str(out.dtype)))
        return out


def build(params: dict[str, Any]) -> nn.Module:
    n = 1
    for s in params["input_shape"]:
        n *= int(s)
    return Probe(n, int(params["num_classes"]))
