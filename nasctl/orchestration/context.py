"""What one run of the loop shares with its collaborators (proposals, launches,
job polls, trial ends, resume): built once by the `Orchestrator`, handed to each
instead of long constructor lists."""

from __future__ import annotations

from dataclasses import dataclass

from nasctl.orchestration.early_stopping import EarlyStopper
from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.ledger import TrialLedger
from nasctl.orchestration.progress import Messages
from nasctl.runners import Runner
from nasctl.runners.clock import Clock
from nasctl.spec import ExperimentSpec
from nasctl.store import Store
from nasctl.types import ExperimentRecord


@dataclass(frozen=True)
class RunContext:
    """One run of one experiment.

    Attributes:
        store: the database.
        exp: the experiment's record.
        spec: its spec.
        runner: submits, polls and cancels its jobs.
        generator: the optimizer, behind its proposal thread (told every end).
        ledger: counts, results and budget.
        messages: the live display's messages.
        stopper: early stopping (None without it).
        owner: this orchestrator's lease owner id.
        clock: real time, or a simulating runner's.
    """

    store: Store
    exp: ExperimentRecord
    spec: ExperimentSpec
    runner: Runner
    generator: CandidateGenerator
    ledger: TrialLedger
    messages: Messages
    stopper: EarlyStopper | None
    owner: str
    clock: Clock


__all__ = ["RunContext"]
