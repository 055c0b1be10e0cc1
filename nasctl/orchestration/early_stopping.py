"""Multi-objective early stopping on learning curves.

A running trial is stopped only when it cannot reach the Pareto front even
under an optimistic projection of where it ends:

1. *Projection of the watched curve.* At the trial's current progress p (see
   `EarlyStoppingSpec.progress`), with each completed trial's value at p being
   its last point at or before p, the projected final value is the most
   favourable of: (a) the best final value of the completed trials that were
   no better than this trial at p (they started as badly; this one may end as
   well as the best of them), (b) this trial's current value plus the largest
   gain any completed trial made from p to its end (it may improve as much as
   the best learner did), (c) its own best value so far; then `margin` is added
   in the favourable direction.
2. *Other objectives.* An objective other than the watched one counts as known
   when it has been logged at exactly one step and the watched curve has since
   moved past that step (a cost metric such as num_params logged once, at step
   0); its value is used as is. An objective
   that is not logged yet, or has a curve of its own (its final value is not
   known), is unknown and taken as unboundedly good (+inf in the maximised
   orientation). Constrained metrics follow the same rule; an unknown one is
   assumed to be satisfied.
3. *Decision.* The optimistic point is stopped if (a) a known or projected
   objective is no better than its threshold, or a known constrained metric
   violates its constraint (it can never be feasible, so it can never be on the
   front; `compute_front` also wants strictly better than the threshold), or
   (b) some trial on the current front (completed, feasible) is at least as
   good in every objective and strictly better in one. An unknown objective
   makes (b) impossible, so such a trial is only stopped by (a).

No decision is made before `min_completed` completed trials have a curve of
the watched metric, before `min_progress` and `min_fraction` of the expected
final progress, or at/after the expected final progress. Trials whose
precision parameter is bf16/fp16 (reduced precision: their validation loss
lags early) get both minimums multiplied by `reduced_precision_grace` (the
fraction capped at 1).

Why not Ax's strategies: in ax 1.3.1 `PercentileEarlyStoppingStrategy` and
`ThresholdEarlyStoppingStrategy` watch one metric (for a multi-objective
experiment they pick the first objective) and `LogicalEarlyStoppingStrategy`
only combines such per-metric verdicts with and/or; none asks whether the
trial can still reach the Pareto front, so a small model with modest accuracy
(a Pareto point) would be stopped for being in the bottom percentile of
accuracy. They also read data through Ax's map metrics, which our in-memory
engine does not hold. The rule here uses our own curves and front.

The watched curve is `early_stopping.metric`, else the first objective that a
completed trial logged at two or more steps (a cost metric logged once is
never watched); until one has, nothing is stopped.

Everything here is pure: the decision is a function of the curves and values
handed in (which the loop reads from the store), so it is deterministic and
the same after a resume. No store or Ax imports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from nasctl.pareto import compute_front
from nasctl.spec import REDUCED_PRECISIONS, EarlyStoppingSpec, ExperimentSpec
from nasctl.types import EventRecord, Observation

#: Event kind recording a stop decision; its data is `StopDecision.event_data()`.
EARLY_STOPPED_EVENT = "early_stopped"

#: A curve: step -> (value, wall time). The first value stored for a step wins, as in the store.
Curve = dict[int, tuple[float, float | None]]


@dataclass(frozen=True)
class StopDecision:
    """Why and where a trial is stopped, and what it is estimated to have saved."""

    index: int
    metric: str
    step: int
    progress: float
    expected_final: float | None
    reason: str
    dominated_by: list[int]
    projected: dict[str, float]  # the optimistic values it was judged by (known ones only)
    unknown: list[str]  # objectives that were unknown (treated as +inf)
    seconds_saved: float

    def event_data(self) -> dict[str, object]:
        return {
            "metric": self.metric, "step": self.step, "progress": self.progress, "expected_final": self.expected_final,
            "dominated_by": self.dominated_by, "projected": self.projected, "unknown": self.unknown,
            "seconds_saved": round(self.seconds_saved, 3),
        }


@dataclass
class _Trial:
    parameters: Mapping[str, object]
    curves: dict[str, Curve] = field(default_factory=dict)
    values: dict[str, float] | None = None  # final values, once completed


def is_reduced_precision(parameters: Mapping[str, object], es: EarlyStoppingSpec) -> bool:
    v = parameters.get(es.precision_parameter)
    return isinstance(v, str) and v.lower() in REDUCED_PRECISIONS


class EarlyStopper:
    """Keeps the curves of running and completed trials and judges running ones.

    The loop feeds it what it stores (`observe` with new observations,
    `complete` with final values); on resume it is rebuilt from the store the
    same way, so decisions only depend on stored data.
    """

    def __init__(self, spec: ExperimentSpec) -> None:
        assert spec.early_stopping is not None
        self.spec = spec
        self.es = spec.early_stopping
        self.metric: str = spec.early_stopping.metric or next(iter(spec.objectives))
        self._trials: dict[int, _Trial] = {}
        self._args = {**spec.trial.args, **spec.fixed}

    @property
    def curve_metrics(self) -> list[str]:
        """Metrics whose curves of completed trials are needed: the watched one, or
        every objective while it is chosen automatically."""
        return [self.es.metric] if self.es.metric else list(self.spec.objectives)

    def watched_metric(self) -> str | None:
        """`early_stopping.metric`, else the first objective (spec order) that some
        completed trial logged at two or more steps (so a cost metric logged once
        is never watched); None while no completed trial has such a curve."""
        if self.es.metric:
            return self.es.metric
        done = [t for t in self._trials.values() if t.values is not None]
        for name in self.spec.objectives:
            if any(len(t.curves.get(name, {})) >= 2 for t in done):
                return name
        return None

    # --- feeding ---------------------------------------------------------
    def track(self, index: int, parameters: Mapping[str, object]) -> None:
        self._trials.setdefault(index, _Trial({**self._args, **parameters}))

    def observe(self, index: int, observations: Iterable[Observation]) -> None:
        """Add observations (a step already held keeps its first value, like the store)."""
        trial = self._trials[index]
        fresh: dict[tuple[str, int], Observation] = {}
        for o in observations:
            if math.isfinite(o.value) and o.step not in trial.curves.get(o.metric, {}):
                fresh[(o.metric, o.step)] = o  # within one batch the last value wins
        for (metric, step), o in fresh.items():
            trial.curves.setdefault(metric, {})[step] = (o.value, o.wall_time)

    def complete(self, index: int, values: Mapping[str, float]) -> None:
        self._trials[index].values = dict(values)

    def forget(self, index: int) -> None:
        """A trial that ended other than COMPLETED plays no further part."""
        self._trials.pop(index, None)

    # --- judging ---------------------------------------------------------
    def _progress_curve(self, curve: Curve) -> list[tuple[float, float]]:
        steps = sorted(curve)
        if self.es.progress == "steps":
            return [(float(s), curve[s][0]) for s in steps]
        return [(float(k + 1), curve[s][0]) for k, s in enumerate(steps)]

    def expected_final(self, index: int) -> float | None:
        """A trial's final progress: its `length_parameter` (points only), else the
        median final progress of completed trials."""
        trial = self._trials[index]
        if self.es.progress == "points" and self.es.length_parameter:
            v = trial.parameters.get(self.es.length_parameter)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                return float(v)
        finals = [self._progress_curve(t.curves[self.metric])[-1][0] for t in self._completed()]
        return float(median(finals)) if finals else None

    def _completed(self) -> list[_Trial]:
        return [t for t in self._trials.values()
                if t.values is not None and self.metric in t.values and t.curves.get(self.metric)]

    def judge(self, index: int, elapsed: float) -> StopDecision | None:
        """A `StopDecision` if trial `index` (running) should stop now, else None.

        `elapsed` (seconds the trial has run) is used for the time-saved estimate
        only when its curve has fewer than two time-stamped points.
        """
        trial = self._trials.get(index)
        metric = self.watched_metric()
        if metric is None:
            return None
        self.metric = metric  # what the helpers below judge on
        if trial is None or trial.values is not None or not trial.curves.get(self.metric):
            return None
        completed = self._completed()
        if len(completed) < self.es.min_completed:
            return None
        curve = self._progress_curve(trial.curves[self.metric])
        progress, current = curve[-1]
        final = self.expected_final(index)
        grace = self.es.reduced_precision_grace if is_reduced_precision(trial.parameters, self.es) else 1.0
        if progress < math.ceil(self.es.min_progress * grace):
            return None
        if final is not None and (progress < min(1.0, self.es.min_fraction * grace) * final or progress >= final):
            return None
        projected, basis = self._project(trial, completed, curve, progress, current)
        optimistic, unknown = self._optimistic_point(trial, projected)
        why = self._infeasible(optimistic)
        dominated_by: list[int] = []
        if why is None:
            dominated_by = self._dominators(optimistic)
            if not dominated_by:
                return None
            why = "dominated by trial" + ("s " if len(dominated_by) > 1 else " ") + ", ".join(map(str, dominated_by))
        step = max(trial.curves[self.metric])
        what = "epoch" if self.es.progress == "points" else "step"
        of = f" of {final:g}" if final is not None else ""
        reason = (
            f"early stopped at step {step} ({what} {progress:g}{of}): {self.metric} {current:.4g} projects to at "
            f"best {projected:.4g} ({basis}" + (f", + margin {self.es.margin:g}" if self.es.margin else "") + ")"
            + (f", {', '.join(unknown)} not known yet" if unknown else "")
            + f"; {why}"
        )
        known = {k: v for k, v in optimistic.items() if k not in unknown}
        return StopDecision(index, self.metric, step, progress, final, reason, dominated_by, known, unknown,
                            self._seconds_saved(trial, progress, final, elapsed))

    def _project(self, trial: _Trial, completed: Sequence[_Trial], curve: Sequence[tuple[float, float]],
                 progress: float, current: float) -> tuple[float, str]:
        """Optimistic final value of the watched metric, and what it rests on (see the module doc)."""
        sign = 1.0 if self.spec.objectives[self.metric].maximize else -1.0
        peers: list[int] = []  # completed trials no better at this point
        peer_best = gain = -math.inf
        gainer = -1
        for i, t in self._trials.items():
            if t not in completed:
                continue
            assert t.values is not None
            then = _value_at(self._progress_curve(t.curves[self.metric]), progress)
            if then is None:
                continue
            end = sign * t.values[self.metric]
            if sign * then <= sign * current:
                peers.append(i)
                peer_best = max(peer_best, end)
            if end - sign * then > gain:
                gain, gainer = end - sign * then, i
        own = max(sign * v for _, v in curve)
        best = max(peer_best, sign * current + gain, own)
        if best == own:
            basis = "its best so far"
        elif best == peer_best:
            basis = f"best final of trial{'s' if len(peers) > 1 else ''} {_short(sorted(peers))}, no better at this point"
        else:
            basis = f"plus the largest later gain, {gain:+.4g} by trial {gainer}"
        return sign * (best + self.es.margin), basis

    def _optimistic_point(self, trial: _Trial, projected: float) -> tuple[dict[str, float], list[str]]:
        point: dict[str, float] = {}
        unknown: list[str] = []
        for name, obj in self.spec.objectives.items():
            if name == self.metric:
                point[name] = projected
                continue
            if self._static(trial, name):
                point[name] = next(iter(trial.curves[name].values()))[0]
            else:
                unknown.append(name)
                point[name] = math.inf if obj.maximize else -math.inf
        for con in self.spec.parsed_constraints:
            if self._static(trial, con.metric):
                point[con.metric] = next(iter(trial.curves[con.metric].values()))[0]
        return point, unknown

    def _static(self, trial: _Trial, metric: str) -> bool:
        """A metric is known (final) when it was logged at exactly one step and the
        watched curve has moved past that step without it being logged again."""
        c = trial.curves.get(metric, {})
        return len(c) == 1 and next(iter(c)) < max(trial.curves[self.metric])

    def _infeasible(self, point: Mapping[str, float]) -> str | None:
        for name, obj in self.spec.objectives.items():
            th, v = obj.threshold, point[name]
            if th is not None and math.isfinite(v) and (v <= th if obj.maximize else v >= th):
                return f"{name} {'at best' if name == self.metric else 'is'} {v:.4g}, not beyond its threshold {th:g}"
        for con in self.spec.parsed_constraints:
            known = point.get(con.metric)
            if known is not None and not con.satisfied(known):
                return f"{con.metric} is {known:.4g}, violating the constraint {con}"
        return None

    def _dominators(self, point: Mapping[str, float]) -> list[int]:
        done = [(i, t.values) for i, t in self._trials.items() if t.values is not None]
        front = compute_front(done, self.spec.objectives, self.spec.parsed_constraints)
        out = []
        for i in front.indices:
            vals = self._trials[i].values
            assert vals is not None
            ge, gt = True, False
            for name, obj in self.spec.objectives.items():
                s = 1.0 if obj.maximize else -1.0
                a, b = s * vals[name], s * point[name]
                if a < b:
                    ge = False
                    break
                gt = gt or a > b
            if ge and gt:
                out.append(i)
        return sorted(out)

    def _seconds_saved(self, trial: _Trial, progress: float, final: float | None, elapsed: float) -> float:
        """Seconds per unit of progress (from the curve's wall times between its
        first and last point, so start-up time is not extrapolated; else the
        trial's elapsed time over its progress) x the progress it did not make."""
        if final is None or final <= progress:
            return 0.0
        pts = sorted(trial.curves[self.metric].items())
        timed = [(k, w) for k, (_, (_, w)) in enumerate(pts) if w is not None]
        if len(timed) >= 2:
            (k0, w0), (k1, w1) = timed[0], timed[-1]
            span = (pts[k1][0] - pts[k0][0]) if self.es.progress == "steps" else (k1 - k0)
            if span > 0 and w1 >= w0:
                return (w1 - w0) / span * (final - progress)
        return max(0.0, elapsed) / progress * (final - progress) if progress > 0 else 0.0


def stop_records(events: Iterable[EventRecord], stopped: Iterable[int]) -> dict[int, dict[str, object]]:
    """The last stop decision recorded for each trial in `stopped` (the EARLY_STOPPED
    ones). A trial judged again after a crash between the event and its status
    change has two events; the last one is the one that stopped it."""
    keep = set(stopped)
    out: dict[int, dict[str, object]] = {}
    for ev in events:
        if ev.kind == EARLY_STOPPED_EVENT and ev.trial_index in keep and isinstance(ev.data, dict):
            out[ev.trial_index] = ev.data
    return out


def seconds_saved(records: Mapping[int, Mapping[str, object]]) -> float:
    """Total estimated trial time saved over the records of `stop_records`."""
    total = 0.0
    for data in records.values():
        v = data.get("seconds_saved")
        if isinstance(v, (int, float)) and math.isfinite(v):
            total += float(v)
    return total


def _value_at(curve: Sequence[tuple[float, float]], progress: float) -> float | None:
    """The curve's value at its last point at or before `progress`."""
    out = None
    for p, v in curve:
        if p > progress:
            break
        out = v
    return out


def _short(indices: Sequence[int], n: int = 4) -> str:
    head = ", ".join(map(str, indices[:n]))
    return head + (f" (+{len(indices) - n})" if len(indices) > n else "")
