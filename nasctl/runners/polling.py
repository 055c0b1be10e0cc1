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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nasctl.errors import SpecError
from nasctl.runners.options import Option

LOST_AFTER_SECONDS = 600.0
UNREACHABLE_TIMEOUT_SECONDS = 1800.0


def _seconds(key: str, low: float, high: float, example: str) -> Callable[[Any], float]:
    """A check for a number of seconds from `low` to `high`."""

    def check(value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not low <= float(value) <= high:
            raise SpecError(f"runner.cfg.{key} must be a number of seconds from {low:g} to {high:g}, got {value!r}",
                            f"e.g. {example}")
        return float(value)

    return check


CONTROL_OPTIONS = (
    Option("poll_interval", "seconds", "seconds between status queries (default: the runner's own)",
           None, _seconds("poll_interval", 0.01, 600.0, "poll_interval: 5")),
    Option("lost_after", "seconds", "seconds a job's state may stay unknown, in a row, before it counts as lost",
           LOST_AFTER_SECONDS, _seconds("lost_after", 0.1, 7 * 86400.0, "lost_after: 600")),
    Option("unreachable_timeout", "seconds", "seconds the scheduler may stay unreachable before the experiment stops",
           UNREACHABLE_TIMEOUT_SECONDS,
           _seconds("unreachable_timeout", 0.1, 30 * 86400.0, "unreachable_timeout: 1800")),
)
"""The control settings every runner takes (see the module docstring)."""
CONTROL_KEYS = frozenset(o.name for o in CONTROL_OPTIONS)


@dataclass(frozen=True)
class ControlSettings:
    """The loop's timing toward one scheduler (see the module docstring)."""

    poll_interval: float
    lost_after: float = LOST_AFTER_SECONDS
    unreachable_timeout: float = UNREACHABLE_TIMEOUT_SECONDS


def split_control(cfg: Mapping[str, Any] | None, default_poll: float) -> tuple[ControlSettings, dict[str, Any]]:
    """The control settings in a spec's `runner.cfg`, and the rest of it (for the runner).

    Raises:
        SpecError: a setting that is not a number of seconds in its range.
    """
    rest = dict(cfg or {})
    given = {o.name: rest.pop(o.name) for o in CONTROL_OPTIONS if o.name in rest}
    value = {o.name: o.value(given.get(o.name)) for o in CONTROL_OPTIONS}
    poll = value["poll_interval"] or default_poll
    return ControlSettings(poll, value["lost_after"], value["unreachable_timeout"]), rest


__all__ = ["CONTROL_KEYS", "CONTROL_OPTIONS", "ControlSettings", "LOST_AFTER_SECONDS", "UNREACHABLE_TIMEOUT_SECONDS",
           "split_control"]
