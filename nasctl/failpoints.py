"""Crash injection for testing crash safety (off unless NASCTL_FAILPOINTS is set).

`NASCTL_FAILPOINTS="after_submit:3,during_generation:1"` makes the process
SIGKILL itself the 3rd time it passes the `after_submit` point, or the 1st
time it passes `during_generation`: no cleanup, no flush, exactly like `kill
-9` or a power cut at that instant. The points are named where the loop's
write-ahead guarantees matter:

- `after_record_candidate`: a proposal is stored, its job not yet submitted.
- `after_record_promotion`: a multi-fidelity promotion is stored, its job not
  yet submitted (passed only by promotions, after `after_record_candidate`).
- `after_submit`: the job runs, its handle is not yet stored.
- `after_record_running`: the handle is stored.
- `after_finish_trial`: a trial's result is stored, the optimizer not yet told.
- `during_retry`: an ended attempt is stored for a retry; its job is not yet
  cancelled, the trial not yet queued again.
- `during_generation`: the optimizer is fitting its model.
- `before_schema_commit`: every migration of `nasctl db upgrade` (or of the
  first-time schema creation) ran, the transaction is not yet committed.
"""

from __future__ import annotations

import os
import signal
import threading

_lock = threading.Lock()
_counts: dict[str, int] = {}
_targets: dict[str, int] | None = None


def _parse() -> dict[str, int]:
    out: dict[str, int] = {}
    for part in os.environ.get("NASCTL_FAILPOINTS", "").split(","):
        name, _, n = part.strip().partition(":")
        if name:
            out[name] = int(n or 1)
    return out


def hit(name: str) -> None:
    """Pass failpoint `name`; SIGKILL this process if it is armed for this pass."""
    global _targets
    if _targets is None:
        _targets = _parse()
    if name not in _targets:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        if _counts[name] == _targets[name]:
            os.kill(os.getpid(), signal.SIGKILL)
