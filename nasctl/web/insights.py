"""Analyses behind the dashboard's analysis views: history with best-so-far, selection
filters, parameter importance, contour, and the comparison of experiments.

Everything here is derived from the per-experiment `ExperimentAnalysis` (values,
statuses, front; see `nasctl.web.analysis`) plus every trial's parameters and
end time, which `InsightsCache` keeps in memory and refreshes incrementally with
the same change cursor: after new results, only the trials named by the new
events are read again. Derived results are cached by cursor; the importance
model (a random forest per objective, `nasctl.web.importance`) is the only
costly one, so a stale one is served while a fresh one is fitted in the
background (see `InsightsCache.importance`).
"""

from __future__ import annotations

import csv
import io
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from nasctl.errors import BadInputError
from nasctl.pareto import compute_front, hypervolume_history
from nasctl.spec import ChoiceParameter, ExperimentSpec, FixedParameter, Objective
from nasctl.store import Store, queries
from nasctl.types import TrialStatus
from nasctl.web.analysis import HISTORY_POINTS, AnalysisCache, ExperimentAnalysis, parallel_sample
from nasctl.web.importance import ImportanceModel, fit_importance

#: The history holds every improvement and at most this many other completed trials.
HISTORY_MAX_POINTS = 10_000
#: The importance model is fitted on at most this many completed trials (front first).
IMPORTANCE_TRIALS = 2000

COMPLETED = TrialStatus.COMPLETED.value
FILTER_RE = re.compile(r"^\s*(?P<field>[A-Za-z_][\w.\-/]*)\s*(?P<op><=|>=|!=|==|=|<|>)\s*(?P<bound>.+?)\s*$")


@dataclass
class TrialColumns:
    """Parameters and end times of every trial of one experiment, as of `cursor`."""

    experiment_id: int
    cursor: int
    params: dict[int, dict[str, Any]]
    ended: dict[int, datetime | None]
    arrays: dict[tuple[int, str, str, bool], np.ndarray] = field(default_factory=dict, repr=False)


@dataclass
class _Entry:
    columns: TrialColumns
    derived: dict[Any, tuple[int, Any]] = field(default_factory=dict)  # key -> (analysis cursor, result)
    model: ImportanceModel | None = None
    refitting: bool = False


def parse_filters(a: ExperimentAnalysis, where: Sequence[str]) -> list[queries.FieldFilter]:
    """`val_acc >= 0.9`, `width < 64`, `act = relu`: filters on metrics and parameters.

    Operators: <, >, <=, >=, = (or ==), !=. A parameter of a text-valued choice
    takes only = and != with a bare word; everything else takes a number.

    Raises:
        BadInputError: a malformed filter, an unknown name, or an operator that
            does not fit the field.
    """
    out = []
    for text in where:
        if not text.strip():  # `where=` filters nothing
            continue
        m = FILTER_RE.match(text)
        if not m:
            raise BadInputError(f"cannot read the filter {text!r}",
                                "write NAME OP VALUE with OP one of <, >, <=, >=, =, != (e.g. val_acc >= 0.9)")
        name, op, raw = m.group("field"), m.group("op"), m.group("bound").strip().strip("'\"")
        op = "=" if op == "==" else op
        if name in a.metrics:
            kind = "value"
            textual = False
        elif name in a.spec.search_space:
            kind = "parameter"
            p = a.spec.search_space[name]
            textual = (isinstance(p, ChoiceParameter) and p.value_type == "str") or (
                isinstance(p, FixedParameter) and isinstance(p.value, str))
        else:
            raise BadInputError(f"filter {text!r} names neither a metric nor a parameter",
                                f"metrics: {', '.join(a.metrics)}; parameters: {', '.join(a.spec.search_space)}")
        bound: float | str
        if textual:
            if op not in ("=", "!="):
                raise BadInputError(f"filter {text!r} compares the text parameter {name!r} with {op}",
                                    f"use {name} = VALUE or {name} != VALUE")
            bound = raw
        else:
            try:
                bound = float(raw)
            except ValueError:
                raise BadInputError(f"filter {text!r}: {raw!r} is not a number", f"e.g. {name} {op} 0.5") from None
            if not math.isfinite(bound):
                raise BadInputError(f"filter {text!r}: the bound must be a finite number")
        out.append(queries.FieldFilter(name, kind, op, bound))  # type: ignore[arg-type]
    return out


_NUMPY_OPS = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "=": np.equal,
              "!=": np.not_equal}


def _column(a: ExperimentAnalysis, cols: TrialColumns, f: queries.FieldFilter) -> np.ndarray:
    """The field over all trials in index order: floats (NaN where missing) or, for a
    text comparison, objects (None where missing); cached until the next change."""
    key = (a.cursor, f.kind, f.field, isinstance(f.bound, str))
    hit = cols.arrays.get(key)
    if hit is None:
        if any(k[0] != a.cursor for k in list(cols.arrays)):
            cols.arrays.clear()
        hit = cols.arrays[key] = _build_column(a, cols, f)
    return hit


def _build_column(a: ExperimentAnalysis, cols: TrialColumns, f: queries.FieldFilter) -> np.ndarray:
    if f.kind == "value":
        return np.array([np.nan if v is None else v for v in a.values[f.field]], dtype=float)
    raw = [cols.params.get(i, {}).get(f.field) for i in a.indices]
    if isinstance(f.bound, str):
        return np.array([None if v is None else str(v) for v in raw], dtype=object)
    return np.array([_as_float(v) for v in raw], dtype=float)


def _as_float(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        return float(v) if isinstance(v, bool) else np.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


def select_indices(a: ExperimentAnalysis, cols: TrialColumns, filters: Sequence[queries.FieldFilter]) -> list[int]:
    """Indices of the trials passing every filter (same rule as the trial table's SQL:
    a trial without the field is left out)."""
    keep = np.ones(len(a.indices), dtype=bool)
    for f in filters:
        col = _column(a, cols, f)
        if isinstance(f.bound, str):
            present = col != None  # noqa: E711 - elementwise over an object array
            eq = col == f.bound
            keep &= present & (eq if f.op == "=" else ~eq)
        else:
            present = ~np.isnan(col)
            with np.errstate(invalid="ignore"):
                keep &= present & _NUMPY_OPS[f.op](col, f.bound)
    return np.asarray(a.indices)[keep].tolist()  # type: ignore[no-any-return]


def selection_csv(a: ExperimentAnalysis, cols: TrialColumns, indices: Sequence[int]) -> str:
    """The trials as CSV: index, status, parameters, metric values (empty where missing)."""
    pos = {i: k for k, i in enumerate(a.indices)}
    params = [p for p, spec in a.spec.search_space.items()]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["index", "status", *params, *a.metrics])
    for i in indices:
        k = pos[i]
        p = cols.params.get(i, {})
        w.writerow([i, a.statuses[k], *(_cell(p.get(n)) for n in params),
                    *("" if a.values[m][k] is None else repr(a.values[m][k]) for m in a.metrics)])
    return buf.getvalue()


def _cell(v: Any) -> str:
    if v is None:
        return ""
    text = repr(v) if isinstance(v, float) else str(v)
    # a leading =, +, - or @ makes spreadsheets evaluate the cell: keep it text
    return "'" + text if text[:1] in ("=", "+", "@") or (text[:1] == "-" and not _numeric(text)) else text


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def history(a: ExperimentAnalysis, cols: TrialColumns) -> dict[str, Any]:
    """Each objective's value per completed trial and its best-so-far line.

    `time` is seconds from the experiment's creation to the trial's end. A trial
    is feasible as in the Pareto plot (it meets every threshold and constraint:
    `FrontResult.feasible`); only feasible trials count for the best so far.
    Experiments with more than `HISTORY_MAX_POINTS` completed trials are sampled
    evenly, but every trial that improved an objective's best is kept, so the
    best-so-far line is exact.
    """
    start = a.experiment.created_at
    done = [k for k, st in enumerate(a.statuses) if st == COMPLETED]
    eligible = set(a.front.feasible)
    feasible = [a.indices[k] in eligible for k in done]
    objectives: list[dict[str, Any]] = []
    keep: set[int] = set()
    for name, o in a.spec.objectives.items():
        col = a.values.get(name, [])
        best: float | None = None
        steps: list[int] = []
        for k, ok in zip(done, feasible):
            v = col[k] if k < len(col) else None
            if v is None or not ok:
                continue
            if best is None or (v > best if o.maximize else v < best):
                best = v
                steps.append(k)
        keep.update(steps)
        objectives.append({"name": name, "goal": o.goal, "steps": steps})
    sampled = len(done) > HISTORY_MAX_POINTS
    if sampled:
        stride = -(-len(done) // HISTORY_MAX_POINTS)
        chosen = sorted(keep | set(done[::stride]) | {done[-1]})
    else:
        chosen = done
    fpos = {k: f for k, f in zip(done, feasible)}

    def seconds(k: int) -> float | None:
        end = cols.ended.get(a.indices[k])
        return None if end is None else round((end - start).total_seconds(), 3)

    out_objs = []
    for entry in objectives:
        col = a.values.get(entry["name"], [])
        steps = entry["steps"]
        best_idx, best_val, best_time = [], [], []
        for s in steps:
            best_idx.append(a.indices[s])
            best_val.append(col[s])
            best_time.append(seconds(s))
        if steps and done and steps[-1] != done[-1]:  # the line runs to the latest trial
            best_idx.append(a.indices[done[-1]])
            best_val.append(col[steps[-1]])
            best_time.append(seconds(done[-1]))
        out_objs.append({"name": entry["name"], "goal": entry["goal"], "value": [col[k] for k in chosen],
                         "best": {"trial_index": best_idx, "value": best_val, "time": best_time}})
    return {
        "cursor": a.cursor,
        "start": a.experiment.created_at.isoformat() + "Z",
        "completed": len(done),
        "sampled": sampled,
        "trial_index": [a.indices[k] for k in chosen],
        "time": [seconds(k) for k in chosen],
        "feasible": [fpos[k] for k in chosen],
        "objectives": out_objs,
    }


def objective_signature(spec: ExperimentSpec) -> list[tuple[str, str]]:
    return [(n, o.goal) for n, o in spec.objectives.items()]


def compare(analyses: Sequence[ExperimentAnalysis]) -> dict[str, Any]:
    """Hypervolume histories and fronts of experiments with the same objectives,
    all against one common reference point, so the curves can be compared.

    The common reference is each objective's threshold where every experiment
    sets the same one, else the least demanding of the experiments' own
    reference points (every point any of them counts still counts).

    Raises:
        BadInputError: fewer than two experiments, or objectives that differ.
    """
    if len(analyses) < 2:
        raise BadInputError("comparing needs at least two experiments", "pass names=a&names=b")
    first = analyses[0]
    sig = objective_signature(first.spec)
    for a in analyses[1:]:
        if objective_signature(a.spec) != sig:
            raise BadInputError(
                f"experiments {first.experiment.name!r} and {a.experiment.name!r} have different objectives "
                f"({_sig_text(sig)} vs {_sig_text(objective_signature(a.spec))})",
                "compare experiments whose objectives have the same names and goals")
    reference: dict[str, float] = {}
    for name, goal in sig:
        refs = [a.front.reference[name] for a in analyses]
        reference[name] = min(refs) if goal == "maximize" else max(refs)
    fixed = {n: Objective(goal=o.goal, threshold=reference[n], value=o.value) for n, o in first.spec.objectives.items()}
    out = []
    for a in analyses:
        done: list[tuple[int, dict[str, float]]] = [
            (i, {m: v for m in a.metrics if (v := a.values[m][k]) is not None})
            for k, (i, st) in enumerate(zip(a.indices, a.statuses)) if st == COMPLETED]
        front = compute_front(done, fixed, a.spec.parsed_constraints)
        hist = hypervolume_history(done, fixed, a.spec.parsed_constraints, max_points=HISTORY_POINTS,
                                   reference=reference)
        pos = {i: k for k, i in enumerate(a.indices)}
        out.append({
            "name": a.experiment.name,
            "status": a.experiment.status.value,
            "cursor": a.cursor,
            "completed": len(done),
            "hypervolume": _num(front.hypervolume),
            "history": {"trial_index": [i for i, _ in hist], "hypervolume": [_num(h) for _, h in hist]},
            "front": {"trial_index": front.indices,
                      "values": {n: [a.values[n][pos[i]] for i in front.indices] for n, _ in sig}},
        })
    return {
        "objectives": [{"name": n, "goal": g} for n, g in sig],
        "reference_point": reference,
        "experiments": out,
    }


def _sig_text(sig: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n} ({g})" for n, g in sig)


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


class InsightsCache:
    """Per-experiment trial columns and derived analyses, refreshed with the change cursor."""

    def __init__(self, store: Store, analyses: AnalysisCache, max_entries: int = 16) -> None:
        self.store = store
        self.analyses = analyses
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._building: dict[str, threading.Lock] = {}
        self._comparisons: dict[tuple[tuple[int, int], ...], dict[str, Any]] = {}

    def get(self, name: str) -> tuple[ExperimentAnalysis, _Entry]:
        """The analysis of `name` and its columns, brought up to date.

        Raises:
            NotFoundError: no experiment of that name.
        """
        a = self.analyses.get(name)
        with self._lock:
            build = self._building.setdefault(name, threading.Lock())
        with build:
            with self._lock:
                entry = self._entries.get(name)
            if entry is not None and entry.columns.experiment_id != a.experiment.id:
                entry = None  # the name now belongs to another experiment
            if entry is None:
                cursor = queries.change_cursor(self.store, a.experiment.id)
                rows = queries.trial_columns(self.store, a.experiment.id)
                entry = _Entry(TrialColumns(a.experiment.id, cursor, {i: p for i, p, _ in rows},
                                            {i: e for i, _, e in rows}))
            elif entry.columns.cursor < a.cursor:
                cols = entry.columns
                cursor, changed, _ = queries.changed_trial_indices(self.store, a.experiment.id, cols.cursor)
                for i, p, e in queries.trial_columns(self.store, a.experiment.id, changed) if changed else []:
                    cols.params[i] = p
                    cols.ended[i] = e
                cols.cursor = cursor
            with self._lock:
                self._entries.pop(name, None)
                self._entries[name] = entry
                while len(self._entries) > self.max_entries:
                    self._entries.pop(next(iter(self._entries)))
            return a, entry

    def derived(self, name: str, key: Any, compute: Any) -> Any:
        """`compute(analysis, columns)`, cached under `key` until the next change."""
        a, entry = self.get(name)
        hit = entry.derived.get(key)
        if hit is not None and hit[0] == a.cursor:
            return hit[1]
        result = compute(a, entry.columns)
        entry.derived[key] = (a.cursor, result)
        return result

    def compare(self, names: Sequence[str]) -> dict[str, Any]:
        """`compare` of the named experiments, cached until one of them changes."""
        analyses = [self.analyses.get(n) for n in dict.fromkeys(names)]
        key = tuple((a.experiment.id, a.cursor) for a in analyses)
        with self._lock:
            hit = self._comparisons.get(key)
        if hit is not None:
            return hit
        result = compare(analyses)
        with self._lock:
            self._comparisons[key] = result
            while len(self._comparisons) > self.max_entries:
                self._comparisons.pop(next(iter(self._comparisons)))
        return result

    def importance(self, name: str, wait: bool = False) -> ImportanceModel:
        """The importance model of `name`.

        The first request fits it (about a third of a second of CPU per
        objective on 2,000 trials). Later, when new results arrived, the last model is returned
        at once, marked with its older cursor, and a fresh one is fitted in a
        background thread; `wait=True` fits it before answering instead.
        """
        a, entry = self.get(name)
        model = entry.model
        if model is not None and model.cursor == a.cursor:
            return model
        if model is None or wait:
            entry.model = self._fit(a, entry)
            return entry.model
        with self._lock:
            start = not entry.refitting
            entry.refitting = True
        if start:
            threading.Thread(target=self._refit, args=(a, entry), daemon=True, name=f"importance-{name}").start()
        return model

    def _refit(self, a: ExperimentAnalysis, entry: _Entry) -> None:
        try:
            model = self._fit(a, entry)
            with self._lock:  # a fit that waited (wait=True) may have stored a newer model meanwhile
                if entry.model is None or entry.model.cursor < model.cursor:
                    entry.model = model
        finally:
            entry.refitting = False

    def _fit(self, a: ExperimentAnalysis, entry: _Entry) -> ImportanceModel:
        chosen = parallel_sample(a, IMPORTANCE_TRIALS)
        pos = {i: k for k, i in enumerate(a.indices)}
        params = [entry.columns.params.get(i, {}) for i in chosen]
        values = {n: [a.values[n][pos[i]] for i in chosen] for n in a.spec.objectives}
        return fit_importance(a.spec, params, values, a.cursor, total_completed=sum(
            1 for s in a.statuses if s == COMPLETED))
