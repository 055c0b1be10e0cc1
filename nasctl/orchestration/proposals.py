"""Proposals: asking the optimizer for candidates and recording them write-ahead.

Candidate generation runs on the generator's worker thread, so the loop keeps
polling and dispatching while the model fits. With more than one worker, and
proposals that are long next to trials, the loop keeps candidates generated
ahead of the free slots, so a slot that frees is refilled in the same tick
instead of waiting for a model fit; an ahead candidate was chosen with every
running trial as a pending point, and the next one is asked for right after,
with the finished trial's result. How many it keeps ahead (`lookahead`) covers
the slots expected to free while the next proposal is computed, up to
`parallelism`, asked for in one batch. While a proposal is short next to a
trial (a second against minutes) it keeps none: a freed slot waits that second
for a proposal that has seen its result. An optimizer that
answers with no candidate (its model waits for a result) is asked again only
once another trial has ended.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from nasctl import failpoints
from nasctl.orchestration.context import RunContext
from nasctl.orchestration.fidelity import trial_fidelity
from nasctl.orchestration.jobs import job_name, trial_dir
from nasctl.orchestration.progress import describe_proposal
from nasctl.store import queries
from nasctl.types import TrialRecord, TrialStatus


IDLE_SHARE = 0.05
"""The look-ahead keeps no candidate ahead while one proposal takes at most this share
of the median trial: a freed slot then waits for a proposal that has seen its
result, which costs that slot at most this share of its time."""


def lookahead(parallelism: int, completed: int, fixed: int | None, last_proposal_seconds: float | None,
              durations: Sequence[float]) -> int:
    """How many candidates to keep generated beyond the free slots.

    None before the first result (an extra candidate could only be quasi-random)
    and with one worker (every proposal should see the result of the trial before
    it: sequential optimisation); otherwise `fixed` where given. Else none while
    the last proposal took at most IDLE_SHARE of the median trial (trials of
    minutes to hours, proposals of a second or two): a freed slot waits that long
    for a proposal that has seen its result, instead of taking a candidate chosen
    with that trial still pending. With longer proposals, enough to cover the
    slots expected to free during the next one, ceil(last proposal's seconds x
    parallelism / median trial seconds), between 1 and `parallelism`.

    On the simulated clock (proposals cost no time) that is none: keeping none
    ahead against one, on the six benchmark problems at parallelism 4 (12 seeds)
    and 16 (20 seeds), is in docs/benchmarks.md ("Sample efficiency at
    parallelism").
    """
    if not completed:
        return 0
    if fixed is not None:
        return fixed
    if parallelism == 1:
        return 0
    if last_proposal_seconds is None or not durations:
        return 1
    trial = statistics.median(durations)
    if last_proposal_seconds <= IDLE_SHARE * trial:
        return 0
    need = math.ceil(last_proposal_seconds * parallelism / max(trial, 1e-3))
    return max(1, min(parallelism, need))


class Proposals:
    """Asks the generator for candidates and records each as a CANDIDATE trial.

    Args:
        ctx: the run's context (its generator is the optimizer on its own thread; the
            adaptive rule takes a proposal's cost on its clock: real seconds, or none
            on a simulated clock, nasctl/runners/simulated.py).
        fixed_lookahead: see `lookahead`; None for the adaptive rule.
    """

    def __init__(self, ctx: RunContext, fixed_lookahead: int | None = None) -> None:
        self.store, self.exp, self.spec, self.gen = ctx.store, ctx.exp, ctx.spec, ctx.generator
        self.ledger, self._messages, self.clock = ctx.ledger, ctx.messages, ctx.clock
        self.fixed_lookahead = fixed_lookahead
        self.seconds: list[float] = []  # wall seconds of every proposal received
        self.cpu_seconds: list[float] = []
        self.log_scale: tuple[str, ...] = ()  # objectives the optimizer's model has on the log scale
        # trials ended when a proposal last came back empty (the model waits for
        # results): no new request until another trial ends
        self._waiting_at: int | None = None

    def start(self) -> None:
        self.log_scale = tuple(queries.log_scale_metrics(self.store, self.exp.id))

    @property
    def pending(self) -> bool:
        """A proposal is being computed."""
        return self.gen.pending_request is not None

    def collect(self) -> list[TrialRecord]:
        """Record the candidates of a finished proposal (none if none is ready)."""
        proposal = self.gen.poll()
        if proposal is None:
            return []
        self.seconds.append(proposal.seconds)
        self.cpu_seconds.append(proposal.cpu_seconds)
        self._waiting_at = None if proposal.candidates else self._ended()
        if proposal.log_scale is not None and proposal.log_scale != self.log_scale:
            self._log_scale_changed(proposal.log_scale)
        recorded = []
        for cand in proposal.candidates:
            fidelity = trial_fidelity(self.spec, cand.parameters)
            if not self.ledger.may_create or not self._admit(fidelity, cand.promoted_from):
                self.gen.abandon(cand.index)
                continue
            rec = self.store.add_trial(
                self.exp.id, cand.index, cand.parameters, cand.method, job_name(self.exp.name, cand.index),
                trial_dir(self.exp.work_dir, cand.index), fidelity=fidelity, promoted_from=cand.promoted_from,
            )
            failpoints.hit("after_record_candidate")
            if cand.promoted_from is not None:
                failpoints.hit("after_record_promotion")
            self.ledger.record(cand.index, fidelity, cand.promoted_from)
            recorded.append(rec)
        if proposal.candidates:
            self._messages.note(describe_proposal(proposal.candidates, proposal.seconds))
        return recorded

    def request_more(self, running: int, queued: int) -> None:
        """Ask for what the free slots (and the look-ahead) need, unless a proposal is under way
        or no new trial may start (`budget.max_trials`, `budget.max_gpu_hours` spent: what
        it proposed would be abandoned; on a simulated clock, asking again at once would
        hold the clock still while the running trials wait to finish)."""
        if self.pending or self.ledger.fidelity.exhausted or not self.ledger.may_create:
            return
        if self._waiting_at is not None and self._waiting_at == self._ended():
            return  # the optimizer had nothing to propose; it will once another result is in
        ahead = lookahead(self.spec.budget.parallelism, len(self.ledger.completed), self.fixed_lookahead,
                          self.clock.cost(self.seconds[-1]) if self.seconds else None, list(self.ledger.durations))
        n = min(self.spec.budget.parallelism + ahead - running - queued, self.ledger.left)
        if n > 0:
            self.gen.request(n)

    def _ended(self) -> int:
        """How many trials have ended (any terminal state)."""
        return sum(n for status, n in self.ledger.counts.items() if TrialStatus(status).is_terminal)

    def _admit(self, fidelity: float | None, promoted_from: int | None) -> bool:
        budget = self.ledger.fidelity
        was = budget.exhausted
        if budget.admit(fidelity, promoted_from):
            return True
        if not was and budget.why_exhausted:
            self.store.add_event(self.exp.id, "budget", budget.why_exhausted)
            self._messages.note(budget.why_exhausted)
        return False

    def _log_scale_changed(self, metrics: tuple[str, ...]) -> None:
        """Tell the user (event, live display) when the model's scale for an objective changes:
        its predictions, and so the proposals, then rank that objective by ratios."""
        on = [m for m in metrics if m not in self.log_scale]
        off = [m for m in self.log_scale if m not in metrics]
        by_metric = {m: [v[m] for _, v in self.ledger.completed if m in v] for m in metrics}
        parts = [f"{m} on the log scale (observed {min(by_metric[m]):.3g} to {max(by_metric[m]):.3g})"
                 if by_metric[m] else f"{m} on the log scale" for m in on]
        parts += [f"{m} back on its own scale" for m in off]
        msg = "optimizer: modelling " + "; ".join(parts)
        self.store.add_event(self.exp.id, queries.LOG_SCALE, msg, data={"metrics": list(metrics)})
        self._messages.note(msg)
        self.log_scale = metrics
