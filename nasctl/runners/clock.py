"""The time the orchestrator's loop runs against: real time, or a runner's simulated time.

Every real run uses `Clock`, which is `time.time`, `time.monotonic` and
`threading.Event.wait` and nothing else. A runner that simulates its jobs'
durations (nasctl/runners/simulated.py) hands the loop a clock of its own
(`Runner.clock`), whose time moves only when the loop has nothing left to do at
the present instant: see `Clock.wait`. Everything the loop times is on its
clock: a trial's attempts (submitted, queued, running, ended), so its seconds,
its GPU-hours and `budget.max_gpu_hours`, early stopping's and
`budget.trial_timeout`'s running time, the pacing of polls.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone


class Clock:
    """Real time."""

    def time(self) -> float:
        """Epoch seconds (`time.time`)."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds for intervals (`time.monotonic`)."""
        return time.monotonic()

    def now(self) -> datetime:
        """`time()` as the store keeps times (naive UTC): when a trial's attempt was
        submitted, ran, ended, so that its seconds and device-hours are on this clock."""
        return datetime.fromtimestamp(self.time(), timezone.utc).replace(tzinfo=None)

    def wait(self, wake: threading.Event, timeout: float, busy: bool) -> None:
        """The loop's pause between ticks: until `wake` is set or `timeout` seconds
        have passed. `busy` says that a proposal is being computed (its answer sets
        `wake`); real time passes either way, so it changes nothing here."""
        wake.wait(timeout)

    def cost(self, seconds: float) -> float:
        """How long a computation of `seconds` real seconds (a proposal) takes on this
        clock: as long, in real time."""
        return seconds


REAL_CLOCK = Clock()

__all__ = ["Clock", "REAL_CLOCK"]
