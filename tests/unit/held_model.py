"""A user model for checkpoint tests: a linear classifier that can hold training at a
chosen batch, so a test signals or kills the trial at a known point.

With `NASCTL_TEST_HOLD=N:PATH`, the Nth training forward pass (counted from 1 in
this process) creates PATH and waits until the test deletes it (at most
HOLD_LIMIT seconds). Signals that arrive meanwhile run their handlers as usual.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.nn as nn

HOLD_ENV = "NASCTL_TEST_HOLD"
HOLD_LIMIT = 120.0


class Held(nn.Module):
    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.flat = nn.Flatten()
        self.fc = nn.Linear(in_features, num_classes)
        self.passes = 0
        hold = os.environ.get(HOLD_ENV, "")
        at, _, path = hold.partition(":")
        self.hold_at, self.marker = (int(at), path) if hold else (0, "")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled():
            self.passes += 1
            if self.passes == self.hold_at:
                self._hold()
        return self.fc(self.flat(x))  # type: ignore[no-any-return]

    def _hold(self) -> None:
        with open(self.marker, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
        deadline = time.monotonic() + HOLD_LIMIT
        while os.path.exists(self.marker):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.marker} was not removed within {HOLD_LIMIT:.0f} s")
            time.sleep(0.01)


def build(params: dict[str, Any]) -> nn.Module:
    n = 1
    for s in params["input_shape"]:
        n *= int(s)
    return Held(n, int(params["num_classes"]))
