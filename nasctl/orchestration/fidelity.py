"""Checkpoints, multi-fidelity trials as jobs, and which results make the front.

The checkpoint contract (docs/trials.md), for every trial:

- `NASCTL_CHECKPOINT_DIR` names a folder the trial saves its checkpoint to,
  during training and atomically (`last.ckpt` there is what nasctl looks for;
  the built-in trainer saves it after every epoch);
- `NASCTL_RESUME_FROM`, when set, names the checkpoint to resume from: the
  trial's own, for a retry after an infrastructure failure
  (nasctl/orchestration/attempts.py), or, for a multi-fidelity promotion, the
  one the promoted trial left. Without it (a script that saved nothing, a lost
  file) the trial trains from scratch, which is always correct, only slower.

With `optimizer.fidelity` (docs/multifidelity.md) the fidelity parameter (say
`--epochs 9`) is passed like any other parameter: it is the fidelity the trial
must reach, counted from the start of training.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from nasctl.spec import ExperimentSpec
from nasctl.types import ParamValue, TrialRecord, TrialStatus

CHECKPOINT_DIR_ENV = "NASCTL_CHECKPOINT_DIR"
RESUME_ENV = "NASCTL_RESUME_FROM"
CHECKPOINT_FILE = "last.ckpt"
"""The file the built-in trainer writes in NASCTL_CHECKPOINT_DIR (what promotions look for)."""


def checkpoint_dir(trial_dir: str) -> str:
    """Where a trial saves its checkpoint."""
    return os.path.join(trial_dir, "checkpoints")


def checkpoint_of(trial_dir: str) -> str | None:
    """The checkpoint a finished trial left in its folder, None if there is none."""
    path = os.path.join(checkpoint_dir(trial_dir), CHECKPOINT_FILE)
    return path if os.path.isfile(path) else None


def checkpoint_env(trial_dir: str, resume_from: str | None) -> dict[str, str]:
    """The checkpoint environment of a trial: where it saves, and what it resumes from."""
    env = {CHECKPOINT_DIR_ENV: checkpoint_dir(trial_dir)}
    if resume_from:
        env[RESUME_ENV] = resume_from
    return env


def trial_fidelity(spec: ExperimentSpec, parameters: Mapping[str, ParamValue]) -> float | None:
    """The fidelity a trial with these parameters trains to (None without `optimizer.fidelity`)."""
    fid = spec.optimizer.fidelity
    if fid is None or fid.parameter not in parameters:
        return None
    return float(parameters[fid.parameter])


def front_trials(spec: ExperimentSpec, trials: Iterable[TrialRecord]) -> list[tuple[int, dict[str, float]]]:
    """(index, values) of the completed trials the Pareto front and hypervolume use:
    all of them without `optimizer.fidelity`; with it, those trained to the top
    fidelity unless `optimizer.fidelity.front: all`."""
    done = [t for t in trials if t.status == TrialStatus.COMPLETED]
    return front_results(spec, [(t.index, dict(t.values)) for t in done], {t.index: t.fidelity for t in done})


def front_results(spec: ExperimentSpec, completed: Iterable[tuple[int, dict[str, float]]],
                  fidelity_of: Mapping[int, float | None]) -> list[tuple[int, dict[str, float]]]:
    """Of completed (index, values), those the Pareto front uses: all of them without
    `optimizer.fidelity`; with it, those trained to the top fidelity unless
    `optimizer.fidelity.front: all`."""
    fid = spec.optimizer.fidelity
    if fid is None:
        return list(completed)
    return [(i, v) for i, v in completed if fid.in_front(fidelity_of.get(i))]


class FidelityBudget:
    """What the recorded trials spend of `budget.max_fidelity` (total epochs, say).

    A trial spends its fidelity; a promotion spends only what it adds to the trial
    it continues (it resumes that trial's checkpoint). Once a candidate does not fit,
    the budget is exhausted for good: a later candidate would get an index after the
    abandoned one, and the store's indices must stay the optimizer's (no gaps).
    """

    def __init__(self, spec: ExperimentSpec) -> None:
        self.limit = spec.budget.max_fidelity
        self.of: dict[int, float] = {}  # every recorded trial's fidelity
        self.spent = 0.0
        self.exhausted = False
        self.why_exhausted: str | None = None

    def cost(self, fidelity: float | None, promoted_from: int | None) -> float:
        """What a trial spends: its fidelity, less that of the trial it continues."""
        if fidelity is None:
            return 0.0
        return fidelity - (self.of.get(promoted_from, 0.0) if promoted_from is not None else 0.0)

    def charge(self, index: int, fidelity: float | None, promoted_from: int | None) -> None:
        """Count a recorded trial."""
        self.spent += self.cost(fidelity, promoted_from)
        if fidelity is not None:
            self.of[index] = fidelity

    def admit(self, fidelity: float | None, promoted_from: int | None) -> bool:
        """Whether a candidate fits. The first one that does not exhausts the budget,
        and `why_exhausted` says why."""
        if self.exhausted:
            return False
        if self.limit is None:
            return True
        cost = self.cost(fidelity, promoted_from)
        if self.spent + cost > self.limit + 1e-9:
            self.exhausted = True
            self.why_exhausted = (f"budget.max_fidelity {self.limit:g}: {self.spent:g} spent, the next trial "
                                  f"would need {cost:g} more; no new trials")
            return False
        return True
