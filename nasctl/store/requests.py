"""Operator requests: stop an experiment, cancel a trial, from another process.

A request is an event in the experiment's audit trail. `nasctl stop`, the
dashboard and the service record one (`request_stop`, `request_cancel`); the
orchestrator, which lives in another process, honours them by reading
`requests_after` at each loop step:

- kind `stop_requested`, `trial_index` NULL, data `{"reason": str, "cancel": bool}`:
  stop the experiment at the next loop step and mark it STOPPED. As on Ctrl-C or
  SIGTERM, running trials are left running, recorded, for a later `nasctl resume`
  to re-attach; only with `cancel` (`nasctl stop --cancel`) are their jobs
  cancelled and they, and the candidates not yet started, marked ABANDONED.
- kind `cancel_requested`, `trial_index` = the trial, data `{"reason": str}`:
  cancel that trial's job and mark it ABANDONED.
"""

from __future__ import annotations

from dataclasses import dataclass

from nasctl.leases import utcnow
from nasctl.store.engine import retrying
from nasctl.store.models import EventRow
from nasctl.store.store import Store

STOP_REQUESTED = "stop_requested"
CANCEL_REQUESTED = "cancel_requested"


@retrying
def request_stop(store: Store, experiment_id: int, reason: str, cancel: bool = False) -> int:
    """Record a request to stop the experiment (kind `stop_requested`). Returns the event id.

    The orchestrator stops at its next loop step; running trials keep running
    (a later `nasctl resume` re-attaches them) unless `cancel`, which cancels
    them. Idempotent in effect: it stops once however many requests it finds.
    """
    what = "stop (cancel running trials)" if cancel else "stop"
    return _request(store, experiment_id, STOP_REQUESTED, f"{what} requested: {reason}", None, reason, cancel)


@retrying
def request_cancel(store: Store, experiment_id: int, trial_index: int, reason: str) -> int:
    """Record a request to cancel one trial (kind `cancel_requested`). Returns the event id.

    Raises:
        NotFoundError: the experiment has no such trial.
    """
    store.get_trial(experiment_id, trial_index)
    return _request(
        store, experiment_id, CANCEL_REQUESTED, f"cancel of trial {trial_index} requested: {reason}", trial_index, reason
    )


def _request(store: Store, experiment_id: int, kind: str, message: str, trial_index: int | None, reason: str,
             cancel: bool = False) -> int:
    with store.session() as s:
        row = EventRow(
            experiment_id=experiment_id,
            trial_index=trial_index,
            time=utcnow(),
            kind=kind,
            message=message,
            data={"reason": reason, "cancel": cancel},
        )
        s.add(row)
        s.flush()
        return int(row.id)


@dataclass(frozen=True)
class OperatorRequest:
    """A stop or cancel request read back from the events table."""

    event_id: int
    kind: str
    trial_index: int | None
    reason: str
    cancel: bool = False


def requests_after(store: Store, experiment_id: int, after_id: int = 0) -> list[OperatorRequest]:
    """Stop and cancel requests recorded after event `after_id`, oldest first (for the orchestrator)."""
    events = store.events(experiment_id, after_id, limit=10_000, kinds=(STOP_REQUESTED, CANCEL_REQUESTED))
    return [
        OperatorRequest(e.id, e.kind, e.trial_index, str((e.data or {}).get("reason", "")),
                        bool((e.data or {}).get("cancel", False)))
        for e in events
    ]

