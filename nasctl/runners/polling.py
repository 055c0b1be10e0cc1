"""How the loop talks to a scheduler over time.

Three keys of `runner.cfg` that every runner takes (they are nasctl's own, never
passed to TorchX or to a runner's factory):

- `poll_interval`: seconds between status queries. Default: the runner's own
  (`Runner.poll_interval`: 0.25 s for local processes, 5 s for Slurm and
  Kubernetes, whose controllers and accounting are shared by a whole cluster).
- `lost_after`: seconds a job's state may stay unknown, in a row, while the
  scheduler answers, before the job counts as lost (cancelled; its attempt ends
  as an infrastructure failure, which is retried). Default 600.
- `unreachable_timeout`: seconds the scheduler may stay unreachable (it answers
  no query) before the experiment stops: STOPPED, resumable, with a reason
  naming the scheduler; until then running trials stay RUNNING and candidates
  wait. Default 1800.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nasctl.errors import SpecError

LOST_AFTER_SECONDS = 600.0
UNREACHABLE_TIMEOUT_SECONDS = 1800.0
CONTROL_KEYS = frozenset({"poll_interval", "lost_after", "unreachable_timeout"})
_LIMITS = {  # key: (lowest, highest, example)
    "poll_interval": (0.01, 600.0, "poll_interval: 5"),
    "lost_after": (0.1, 7 * 86400.0, "lost_after: 600"),
    "unreachable_timeout": (0.1, 30 * 86400.0, "unreachable_timeout: 1800"),
}


@dataclass(frozen=True)
class ControlSettings:
    """The loop's timing toward one scheduler (see the module docstring)."""

    poll_interval: float
    lost_after: float = LOST_AFTER_SECONDS
    unreachable_timeout: float = UNREACHABLE_TIMEOUT_SECONDS


def _seconds(key: str, value: object) -> float:
    low, high, example = _LIMITS[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= float(value) <= high:  # type: ignore[arg-type]
        raise SpecError(f"runner.cfg.{key} must be a number of seconds from {low:g} to {high:g}, got {value!r}",
                        f"e.g. {example}")
    return float(value)  # type: ignore[arg-type]


def split_control(cfg: Mapping[str, Any] | None, default_poll: float) -> tuple[ControlSettings, dict[str, Any]]:
    """The control settings in a spec's `runner.cfg`, and the rest of it (for the runner).

    Raises:
        SpecError: a setting that is not a number of seconds in its range.
    """
    rest = dict(cfg or {})
    mine = {k: _seconds(k, rest.pop(k)) for k in sorted(CONTROL_KEYS) if k in rest}
    return ControlSettings(poll_interval=mine.get("poll_interval", default_poll),
                           lost_after=mine.get("lost_after", LOST_AFTER_SECONDS),
                           unreachable_timeout=mine.get("unreachable_timeout", UNREACHABLE_TIMEOUT_SECONDS)), rest


__all__ = ["CONTROL_KEYS", "ControlSettings", "LOST_AFTER_SECONDS", "UNREACHABLE_TIMEOUT_SECONDS", "split_control"]
