"""What the loop tells the world while it runs: progress snapshots, the run's summary
and the short messages a live display shows.

The loop never prints. It hands a `Progress` snapshot to a `ProgressSink` after
every tick; the CLI's live display, the Python API's relay and the service each
implement one. Everything here is plain data.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from nasctl.types import ExperimentStatus

if TYPE_CHECKING:
    from nasctl.optimizer.base import Candidate

MESSAGES_KEPT = 6
"""How many recent messages a snapshot carries."""


@dataclass
class Progress:
    """A snapshot for progress displays (the loop never prints)."""

    experiment: str
    max_trials: int
    parallelism: int
    counts: dict[str, int]
    hypervolume: float
    front: list[tuple[int, dict[str, float]]]
    generating: bool
    generating_seconds: float
    elapsed: float
    last_generation_seconds: float | None
    messages: list[str] = field(default_factory=list)
    done: bool = False
    waiting_for_devices: int = 0  # candidates waiting for free GPUs
    scheduler: str = ""
    unreachable_since: float | None = None  # epoch: the scheduler has not answered since then
    queued: int = 0  # RUNNING trials whose jobs wait in the scheduler's queue
    gpu_hours: float = 0.0  # device-hours spent so far (budget.max_gpu_hours)
    max_gpu_hours: float | None = None


class ProgressSink(Protocol):
    """Receives every `Progress` snapshot of a run (called on the loop's thread; keep it quick)."""

    def __call__(self, progress: Progress, /) -> None: ...


@dataclass(frozen=True)
class RunSummary:
    """How one drive of an experiment ended."""

    experiment: str
    status: ExperimentStatus
    reason: str | None
    counts: dict[str, int]
    hypervolume: float
    front: list[int]
    elapsed: float
    generation_seconds: list[float]
    reattached: int = 0
    left_running: int = 0
    seconds_saved: float = 0.0  # estimated trial time saved by early stopping (whole experiment)
    generation_cpu_seconds: list[float] = field(default_factory=list)


class Messages:
    """The last few things that happened, newest last, for the live display."""

    def __init__(self) -> None:
        self._items: deque[str] = deque(maxlen=MESSAGES_KEPT)

    def note(self, message: str) -> None:
        self._items.append(message)

    def recent(self) -> list[str]:
        return list(self._items)


def fmt_values(values: Mapping[str, float], objectives: Mapping[str, object]) -> str:
    """`val_acc=0.9512, num_params=16125`: the objectives' values, in the spec's order."""
    return ", ".join(f"{k}={fmt_number(values[k])}" for k in objectives if k in values)


def fmt_number(v: float) -> str:
    """A whole number as digits (a parameter count is 16125, not 1.612e+04), others to 4 significant digits."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.4g}"


def describe_proposal(candidates: Sequence[Candidate], seconds: float) -> str:
    """The progress line of one proposal, naming each trial's own method:
    `proposed trial 0 with CenterOfSearchSpace and trial 1 with Sobol in 0.2s`;
    trials in a row from one method share it (`proposed trials 2, 3 with Sobol`)."""
    groups: list[tuple[str, list[int]]] = []
    for c in candidates:
        if groups and groups[-1][0] == c.method:
            groups[-1][1].append(c.index)
        else:
            groups.append((c.method, [c.index]))
    parts = [f"trial{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))} with {method}" for method, ix in groups]
    return f"proposed {' and '.join(parts)} in {seconds:.1f}s"
