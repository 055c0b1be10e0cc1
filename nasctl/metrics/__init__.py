"""Metric sources: TensorBoard logs, and helpers to measure size and latency."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from nasctl.types import Observation

#: A trial may write this JSON object into NASCTL_LOG_DIR: how it ran (device,
#: precision, versions, ...). The loop stores it with the trial (see the trial contract).
TRIAL_INFO_FILE = "trial_info.json"


def _enc(x: float) -> float | str:
    return x if math.isfinite(x) else repr(x)  # 'nan', 'inf', '-inf': JSON has no NaN


def _dec(x: float | str) -> float:
    return float(x)


class MetricSummary:
    """Running per-metric summary of a trial's curves: the last value (highest
    step; a step logged twice keeps its later value), the best finite values,
    and whether anything non-finite was logged. Updated incrementally; its
    `state` is strict JSON so it can be stored with the trial."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self._m: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (state or {}).items()}

    @property
    def state(self) -> dict[str, Any]:
        return {k: dict(v) for k, v in self._m.items()}

    def update(self, observations: Iterable[Observation]) -> None:
        for o in observations:
            s = self._m.setdefault(o.metric, {"step": o.step, "last": _enc(o.value), "n": 0})
            if o.step >= s["step"]:
                s["step"], s["last"] = o.step, _enc(o.value)
            s["n"] += 1
            if math.isfinite(o.value):
                s["max"] = o.value if "max" not in s else max(s["max"], o.value)
                s["min"] = o.value if "min" not in s else min(s["min"], o.value)

    @property
    def metrics(self) -> list[str]:
        return list(self._m)

    def last_step(self, metric: str) -> int | None:
        s = self._m.get(metric)
        return None if s is None else int(s["step"])

    def value(self, metric: str, how: str = "last", maximize: bool = True) -> float | None:
        """The metric's value for the optimizer; None if it was never logged, NaN if the chosen value is not finite."""
        s = self._m.get(metric)
        if s is None:
            return None
        if how == "best":
            key = "max" if maximize else "min"
            return float(s[key]) if key in s else math.nan
        return _dec(s["last"])
