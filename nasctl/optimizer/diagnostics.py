"""Model-fit diagnostics: leave-one-out cross-validation of the optimizer's model.

The surrogate is the one the optimizer uses after its quasi-random start: the
generator spec (GP class, transforms, options) of the method's model-based
step, rebuilt from the stored trials: every completed trial is attached to a
fresh `AxOptimizer` and completed with its stored values, then the model is
fitted and cross-validated leave-one-out. For each
metric the result holds, per trial, the observed value, the model's prediction
for that trial when it was left out, and a 95% interval (mean +- 1.96 sd).

This is what the "Multi-objective NAS with Ax" tutorial shows to judge whether
the model can be trusted: points near the diagonal with intervals that cover
it mean the model predicts unseen architectures well.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from nasctl.errors import BadInputError
from nasctl.optimizer.quiet import first_import, library_calls
from nasctl.spec import ExperimentSpec
from nasctl.types import TrialRecord, TrialStatus

#: At most this many completed trials (the most recent) are used: a GP fit is
#: cubic in the number of points, and the diagnostics should answer in seconds.
MAX_TRIALS = 200
#: Fewer completed trials than this cannot be cross-validated meaningfully.
MIN_TRIALS = 3


def loo_cross_validation(spec: ExperimentSpec, trials: Sequence[TrialRecord],
                         progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Leave-one-out cross-validation of the Ax model fitted on `trials`.

    Args:
        spec: the experiment's spec (search space, objectives, constraints).
        trials: the experiment's trials; only COMPLETED ones with a finite value
            for every objective and constraint metric are used, at most the
            `MAX_TRIALS` with the highest indices.
        progress: called with each stage as it starts ("loading Ax and BoTorch",
            "fitting the model on 24 trials", "cross-validating: 24 fits"), for
            a page that shows what the seconds are spent on.

    Returns:
        `{"trials_used": n, "metrics": {metric: [{"trial_index", "observed",
        "predicted", "lower", "upper"}, ...]}, "model": name, "log_scale":
        [metric, ...]}`, intervals 95%. `log_scale` lists the objectives the
        model fits on the log scale (see `logscale`), as the optimizer does;
        their predictions and intervals are on the metric's own scale.

    Raises:
        BadInputError: fewer than `MIN_TRIALS` usable completed trials.
    """
    from nasctl.optimizer.ax_optimizer import AxOptimizer

    metrics = list(spec.metric_names)
    usable = [
        t
        for t in trials
        if t.status == TrialStatus.COMPLETED
        and all(m in t.values and math.isfinite(float(t.values[m])) for m in metrics)
    ]
    usable = sorted(usable, key=lambda t: t.index)[-MAX_TRIALS:]
    if len(usable) < MIN_TRIALS:
        raise BadInputError(
            f"experiment {spec.name!r} has {len(usable)} completed trials with every metric; "
            f"cross-validation needs at least {MIN_TRIALS}",
            "wait for more trials to complete",
        )
    say = progress or (lambda stage: None)
    say("loading Ax and BoTorch (the first time in this process)")
    opt = AxOptimizer(spec)
    say(f"fitting the model on {len(usable)} trials")
    ax_to_ours = {v: k for k, v in opt.names.items()}
    ours_by_ax_index: dict[int, int] = {}
    for t in usable:
        ax_index = opt.attach(t.parameters)
        opt.complete(ax_index, t.values)
        ours_by_ax_index[ax_index] = t.index

    with first_import("ax.adapter.cross_validation"):
        from ax.adapter.cross_validation import cross_validate

        from nasctl.optimizer import logscale
    with library_calls():
        experiment = opt.experiment
        which, gspec = _model_spec(spec, opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            adapter = gspec.generator_enum(
                experiment=experiment, data=experiment.lookup_data(), **gspec.generator_kwargs
            )
            say(f"cross-validating: {len(usable)} fits, each leaving one trial out")
            results = cross_validate(adapter, folds=-1)
    logged = sorted(ax_to_ours[m] for m in logscale.logged_metrics(adapter))
    fitted = adapter.generator.surrogate.model
    out = _rows(results, metrics, ax_to_ours, ours_by_ax_index)
    model = f"{_model_name(fitted)} ({which})"
    if logged:
        model += f"; on the log scale: {', '.join(logged)}"
    return {"trials_used": len(usable), "model": model, "metrics": out, "log_scale": logged}


def _rows(results: Sequence[Any], metrics: Sequence[str], ax_to_ours: dict[str, str],
          ours_by_ax_index: dict[int, int]) -> dict[str, list[dict[str, Any]]]:
    """Per metric, the rows of `loo_cross_validation` from Ax's cross-validation results."""
    out: dict[str, list[dict[str, Any]]] = {m: [] for m in metrics}
    for res in results:
        held_out = res.observed.features.trial_index
        trial_index = None if held_out is None else ours_by_ax_index.get(int(held_out))
        if trial_index is None:
            continue
        observed = res.observed.data.means_dict
        predicted = res.predicted.means_dict
        cov = res.predicted.covariance_matrix
        for ax_name, mean in predicted.items():
            name = ax_to_ours.get(ax_name)
            if name is None or ax_name not in observed:
                continue
            var = cov.get(ax_name, {}).get(ax_name, float("nan"))
            sd = math.sqrt(var) if math.isfinite(var) and var >= 0 else float("nan")
            half = 1.96 * sd
            out[name].append(
                {
                    "trial_index": trial_index,
                    "observed": float(observed[ax_name]),
                    "predicted": float(mean),
                    "lower": float(mean - half) if math.isfinite(half) else None,
                    "upper": float(mean + half) if math.isfinite(half) else None,
                }
            )
    for rows in out.values():
        rows.sort(key=lambda r: r["trial_index"])
    return out


NOT_CROSS_VALIDATED = {"sobol": "it has no model", "saasbo": "its MCMC fit took 55 s for 20 trials on 2 cores"}
"""Methods whose own model the diagnostics do not fit, and why: the botorch
method's model stands in, and the caption says so."""


def _model_spec(spec: ExperimentSpec, opt: Any) -> tuple[str, Any]:
    """How to name the model, and the Ax generator spec of the method's
    model-based step (GP class, transforms, options), or of the botorch
    method's for the methods in `NOT_CROSS_VALIDATED`."""
    from nasctl.optimizer.strategies import build_strategy

    method = opt.choice.method
    if method in NOT_CROSS_VALIDATED:
        nodes = build_strategy(spec, "botorch", None).nodes_by_name
        return f"the botorch method's model; {method}: {NOT_CROSS_VALIDATED[method]}", nodes["MBM"].generator_specs[0]
    nodes = opt.strategy.nodes_by_name
    return f"the {method} method's model", nodes["MBM"].generator_specs[0]


def _model_name(model: Any) -> str:
    """The class of a fitted BoTorch model, or of the per-metric models of a ModelList."""
    inner = getattr(model, "models", None)
    classes = sorted({type(m).__name__ for m in inner}) if inner is not None else [type(model).__name__]
    return " / ".join(classes)
