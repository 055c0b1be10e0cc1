"""Whether the scheduler answers: an unreachable control plane is a wait, not a failure.

A status query or a submission that fails because the scheduler cannot be
reached (`SchedulerUnreachable`: for Slurm, neither `sacct` nor `squeue`
answers, or `sbatch` cannot contact the controller; for Kubernetes, the API
server does not answer) leaves every trial as it is: running trials stay
RUNNING, candidates stay queued and their submission is tried again with a
growing pause (`SUBMIT_BACKOFF_SECONDS`). The outage is recorded as an event
of kind `SCHEDULER_EVENT` when it starts (with its start time) and when it
ends (with its length), so that `nasctl status`, the dashboard and `/metrics`
can say "unreachable since T" from the store. After
`runner.cfg.unreachable_timeout` the experiment stops (STOPPED, resumable),
never FAILED.

Queries and submissions are followed apart: with the controller down but
accounting up, status queries answer while `sbatch` fails; the scheduler is
unreachable while either does.
"""

from __future__ import annotations

from datetime import datetime, timezone

from nasctl.errors import SchedulerUnreachable
from nasctl.orchestration.progress import Messages
from nasctl.runners.polling import ControlSettings
from nasctl.store import Store
from nasctl.types import ExperimentRecord

SCHEDULER_EVENT = "scheduler"
"""Event kind of an outage's start (`data.unreachable_since`) and end (`data.outage_seconds`)."""
SUBMIT_BACKOFF_SECONDS = (5.0, 60.0)
"""A failed submission is tried again after the first pause, doubled each time up to the second."""
STATUS, SUBMIT = "status", "submit"


BRIEF_CHARS = 200


def brief(text: str | None) -> str:
    """A scheduler's output as one line for a status reason: its first non-empty line,
    cut at BRIEF_CHARS (the whole of it goes to the event log)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    first = lines[0] if lines else ""
    more = len(lines) > 1 or len(first) > BRIEF_CHARS
    return (first[:BRIEF_CHARS] + (" ..." if more else "")) or "no error text"


def iso(epoch: float) -> str:
    """Epoch seconds as the store's naive-UTC ISO text."""
    return datetime.fromtimestamp(epoch, timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


class Reachability:
    """Follows whether one experiment's scheduler answers.

    Args:
        store: where the outage's start and end are recorded.
        experiment: the experiment.
        scheduler: the runner's scheduler name (named in messages).
        settings: the loop's timing (`unreachable_timeout`).
        messages: the live display's messages.
    """

    def __init__(self, store: Store, experiment: ExperimentRecord, scheduler: str, settings: ControlSettings,
                 messages: Messages) -> None:
        self.store, self.exp, self.scheduler, self.settings = store, experiment, scheduler, settings
        self._messages = messages
        self._failing: dict[str, float] = {}  # what fails (status, submit) -> since (epoch)
        self.error: str | None = None  # the last error seen while unreachable
        self._backoff = 0.0
        self._next_submit = 0.0

    @property
    def since(self) -> float | None:
        """Since when (epoch) the scheduler has been unreachable; None while it answers."""
        return min(self._failing.values()) if self._failing else None

    def failed(self, what: str, error: SchedulerUnreachable, now: float) -> None:
        """A query (`STATUS`) or a submission (`SUBMIT`) could not reach the scheduler."""
        started = not self._failing
        self._failing.setdefault(what, now)
        self.error = error.message
        if what == SUBMIT:
            low, high = SUBMIT_BACKOFF_SECONDS
            self._backoff = min(high, max(low, 2 * self._backoff))
            self._next_submit = now + self._backoff
        if started:
            text = (f"the {self.scheduler} scheduler is unreachable ({brief(error.message)}): running trials stay "
                    f"running and candidates wait; the experiment stops if it lasts "
                    f"{self.settings.unreachable_timeout:g}s (runner.cfg.unreachable_timeout)")
            self.store.add_event(self.exp.id, SCHEDULER_EVENT, text,
                                 data={"scheduler": self.scheduler, "unreachable_since": iso(now),
                                       "error": error.message})
            self._messages.note(f"{self.scheduler} unreachable: trials keep running, candidates wait")

    def answered(self, what: str, now: float, needed: bool = True) -> None:
        """A query or a submission reached the scheduler (`needed` False: nothing waits
        on it any more, say no job is left to ask about)."""
        if what not in self._failing:
            return
        since = self.since
        del self._failing[what]
        if what == SUBMIT:
            self._backoff, self._next_submit = 0.0, 0.0
        if not self._failing and since is not None:
            text = (f"the {self.scheduler} scheduler answers again after {now - since:.0f}s" if needed else
                    f"nothing waits on the {self.scheduler} scheduler any more (unreachable for {now - since:.0f}s)")
            self.store.add_event(self.exp.id, SCHEDULER_EVENT, text,
                                 data={"scheduler": self.scheduler, "outage_seconds": round(now - since, 1)})
            self._messages.note(text)
            self.error = None

    def may_submit(self, now: float) -> bool:
        """Is it time to try submitting (no failed submission, or its pause is over)?"""
        return now >= self._next_submit

    @property
    def waiting(self) -> bool:
        """Is the scheduler unreachable now? (Decisions that need it, like cancelling, wait.)"""
        return bool(self._failing)

    def record_last_error(self) -> None:
        """Keep the last error of an outage, whole, in the event log (the stop reason has its first line)."""
        if self.error:
            self.store.add_event(self.exp.id, SCHEDULER_EVENT, f"the {self.scheduler} scheduler's last error",
                                 data={"scheduler": self.scheduler, "error": self.error})

    def expired(self, now: float) -> str | None:
        """The reason to stop the experiment once the outage has lasted `unreachable_timeout`, else None."""
        since = self.since
        if since is None or now - since < self.settings.unreachable_timeout:
            return None
        return (f"the {self.scheduler} scheduler has been unreachable since {iso(since)} UTC, longer than "
                f"runner.cfg.unreachable_timeout ({self.settings.unreachable_timeout:g}s; last error: "
                f"{brief(self.error)}; the whole of it is in the event log); "
                f"running trials were left running: `nasctl resume {self.exp.name}` re-attaches them")


__all__ = ["Reachability", "SCHEDULER_EVENT", "STATUS", "SUBMIT", "SUBMIT_BACKOFF_SECONDS", "brief", "iso"]
