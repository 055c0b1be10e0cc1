"""How an ended job becomes a `JobStatus` with its `FailureClass`: the rules every
runner shares, so that each is decided in one place.

A job's own exit record (`exit.json`, written by nasctl.runners.launcher in the
attempt's state folder) knows things no scheduler does: whether the trial exited 0,
whether nasctl asked for the cancellation, which signal ended the trial. A
scheduler knows things the record cannot: that the node failed, that the time
limit was reached, that a pod was evicted. `record_status` reads a record,
`settle` combines the two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.runners.base import JobState, JobStatus
from nasctl.types import FailureClass

CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGSYS", "SIGTRAP"})
"""Signals a process raises on itself when its own code faults (a segfault, an
abort from a failed assertion in native code): the trial's own failure."""


def signal_class(name: str) -> FailureClass:
    """The class of a trial that ended by signal `name`, which nasctl did not send.

    A fault the process raised itself (`CRASH_SIGNALS`) is USER; any other signal
    came from outside the trial (a person, the machine shutting down, the kernel's
    OOM killer, a scheduler) and is INFRASTRUCTURE.
    """
    return FailureClass.USER if name in CRASH_SIGNALS else FailureClass.INFRASTRUCTURE


def failed_on_its_own(record: Mapping[str, Any]) -> bool:
    """A rank that ended by its own failure: a non-zero exit code, or a signal it raised on itself."""
    if record.get("signal"):
        return str(record["signal"]) in CRASH_SIGNALS
    rc = record.get("returncode")
    return isinstance(rc, int) and rc != 0


def first_failure(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The rank that failed first on its own (the others' failures follow from it), or None."""
    failed = [r for r in records if failed_on_its_own(r) and isinstance(r.get("ended"), (int, float))]
    return min(failed, key=lambda r: (r["ended"], r["rank"])) if failed else None


def describe_failure(record: Mapping[str, Any]) -> str:
    """`rank 1 (node2) exited with code 1`: a rank record's failure in words."""
    how = f"was killed by {record['signal']}" if record.get("signal") else f"exited with code {record.get('returncode')}"
    return f"rank {record['rank']} ({record.get('node') or '?'}) {how}"


def record_status(record: Mapping[str, Any], node: str | None = None) -> JobStatus:
    """The launcher's exit record as a terminal `JobStatus`.

    - `error` (the launcher could not learn the trial's exit status): FAILED, INFRASTRUCTURE.
    - `cancelled` (nasctl's cancel reached it; see launcher.CANCEL_MARKER): CANCELLED.
    - `returncode` 0: SUCCEEDED.
    - `failed_rank` (a rank of a multi-process trial failed on its own first; see
      launcher.exit_record): FAILED, USER, naming the rank and its node.
    - `signal` among the warnings the launcher received (`warned`: runner.cfg.signal's,
      which nasctl asked the scheduler for): FAILED, TIMEOUT.
    - `signal` (the trial, or the launcher, was killed by it): FAILED, `signal_class`.
    - any other exit code: FAILED, USER.
    """
    rc = record.get("returncode")
    code = rc if isinstance(rc, int) else None
    if record.get("error"):
        return JobStatus(JobState.FAILED, str(record["error"]), code, FailureClass.INFRASTRUCTURE, node)
    if record.get("cancelled"):
        return JobStatus(JobState.CANCELLED, f"cancelled ({record.get('signal')})", code, FailureClass.CANCELLED, node)
    if code == 0:
        return JobStatus(JobState.SUCCEEDED, None, 0, None, node)
    rank = record.get("failed_rank")
    if isinstance(rank, Mapping):  # a multi-process trial: its first rank to fail is the cause
        return JobStatus(JobState.FAILED, describe_failure(rank), code, FailureClass.USER, node)
    sig = record.get("signal")
    if sig and str(sig) in (record.get("warned") or []):
        # the warning runner.cfg.signal asks the scheduler to send before the time limit
        return JobStatus(JobState.FAILED, f"killed by {sig}, the warning the scheduler sends before the time limit "
                         "(runner.cfg.signal): the trial restored its default action; handle it to save a checkpoint",
                         code, FailureClass.TIMEOUT, node)
    if sig:
        cls = signal_class(str(sig))
        why = "crashed" if cls == FailureClass.USER else "not sent by nasctl"
        return JobStatus(JobState.FAILED, f"killed by {sig} ({why})", code, cls, node)
    return JobStatus(JobState.FAILED, f"exit code {rc}", code, FailureClass.USER, node)


def settle(status: JobStatus, record: Mapping[str, Any] | None) -> JobStatus:
    """A scheduler's status for a job, corrected by the job's own exit record.

    - A job that has not ended, or has no record, keeps the scheduler's status.
    - A record of exit code 0 (and no cancellation) makes it SUCCEEDED whatever the
      scheduler's final state: a time limit, a node failure or a cancellation that
      came just after the trial had finished does not undo its result.
    - A plain failure (FAILED, class USER: the scheduler saw a non-zero exit) takes
      the record's class where it differs: the record knows whether a signal nasctl
      did not send ended the trial (INFRASTRUCTURE) or nasctl cancelled it, and
      which rank of a multi-process trial failed first.
    - Any other end (node failure, time limit, cancellation) keeps the scheduler's class.
    """
    if record is None or not status.state.is_terminal or status.state == JobState.SUCCEEDED:
        return status
    own = record_status(record, status.node)
    if own.state == JobState.SUCCEEDED:
        what = status.message or status.state.value
        return dataclasses.replace(own, message=f"the trial exited 0 (the scheduler's final state: {what})")
    if status.state == JobState.FAILED and status.failure_class == FailureClass.USER and (
            own.failure_class != FailureClass.USER or record.get("failed_rank")):
        message = f"{status.message}; {own.message}" if status.message else own.message
        return dataclasses.replace(own, message=message)
    return status


__all__ = ["CRASH_SIGNALS", "describe_failure", "failed_on_its_own", "first_failure", "record_status", "settle",
           "signal_class"]
