"""A user model for `trial.model: "my_models.tiny_cnn:build"`.

nasctl's trainer calls build(params) with the search parameters it does not
use itself (`width`, `depth`) plus `input_shape` (one example, e.g. [1, 8, 8])
and `num_classes`, and trains the returned module on the spec's dataset.
"""

from __future__ import annotations

from typing import Any

import torch.nn as nn


def build(params: dict[str, Any]) -> nn.Module:
    width = int(params.get("width", 16))
    depth = int(params.get("depth", 1))
    channels, *spatial = params["input_shape"]
    conv, pool = (nn.Conv2d, nn.MaxPool2d) if len(spatial) == 2 else (nn.Conv1d, nn.MaxPool1d)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [conv(channels, width, 3, padding=1), nn.ReLU()]
        channels = width
    layers += [pool(2), nn.Flatten()]
    flat = channels
    for s in spatial:
        flat *= s // 2
    layers.append(nn.Linear(flat, params["num_classes"]))
    return nn.Sequential(*layers)
