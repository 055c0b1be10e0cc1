"""Objectives that spread over orders of magnitude are modelled on the log scale
(nasctl/optimizer/logscale.py); all others get Ax's transforms unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr

from nasctl.optimizer import logscale
from nasctl.optimizer.ax_optimizer import AxOptimizer, RestoredTrial
from nasctl.spec import ExperimentSpec, parse_spec
from tests.helpers.optimizer import MIXED, make_spec, run

DECADES = [10.0 ** -(4 * k / 19) for k in range(20)]  # 1 .. 1e-4, evenly on the log scale


@pytest.mark.parametrize(
    ("values", "bounds", "chosen"),
    [
        ({"loss": DECADES}, {}, ["loss"]),
        ({"loss": DECADES}, {"loss": [0.5]}, ["loss"]),
        ({"loss": DECADES}, {"loss": [0.0]}, []),  # a threshold without a logarithm
        ({"acc": [0.5 + 0.02 * k for k in range(20)]}, {}, []),  # within a decade
        ({"loss": [1e-16, *DECADES]}, {}, []),  # reaches zero to rounding
        ({"loss": [0.0, *DECADES]}, {}, []),
        ({"loss": [-1e-3, *DECADES]}, {}, []),
        ({"loss": DECADES[:3]}, {}, []),  # too few to have quartiles
        ({"loss": [*DECADES, math.nan]}, {}, ["loss"]),  # missing values are skipped
        # the middle half decides, not the extremes: one outlier does not count
        ({"size": [1e-3, *[1.0 + 0.1 * k for k in range(18)], 100.0]}, {}, []),
        ({"loss": DECADES, "size": [1.0 + k for k in range(20)]}, {}, ["loss"]),
    ],
)
def test_which_metrics_go_on_the_log_scale(values: dict[str, list[float]], bounds: dict[str, list[float]],
                                           chosen: list[str]) -> None:
    assert logscale.wide_metrics(values, bounds) == chosen


def loss_spec(max_trials: int = 12) -> ExperimentSpec:
    return parse_spec(json.dumps(loss_spec_data(max_trials)))


def loss_spec_data(max_trials: int) -> dict[str, Any]:
    return {
        "name": "log",
        "search_space": {"x0": {"type": "float", "low": 0.0, "high": 1.0},
                         "x1": {"type": "float", "low": 0.0, "high": 1.0}},
        "objectives": {"loss": {"goal": "minimize", "threshold": 1.0},
                       "size": {"goal": "minimize", "threshold": 10.0}},
        "budget": {"max_trials": max_trials},
        "trial": {"script": "/bin/true"},
        "optimizer": {"method": "botorch", "seed": 3, "initial_trials": 8},
    }


def loss_outcome(p: dict[str, Any]) -> dict[str, float]:
    """A loss over four decades (smooth in its logarithm) and a size within one."""
    x0, x1 = float(p["x0"]), float(p["x1"])
    return {"loss": 10.0 ** (-4.0 * x0) * (1.5 + math.sin(5.0 * x1)), "size": 1.0 + 3.0 * (1.0 - x0) + x1}


def _fitted(monkeypatch: pytest.MonkeyPatch, log_scale: bool, trials: list[RestoredTrial]) -> Any:
    """An optimizer restored from `trials` whose model has been fitted once, with
    or without `WideLogY` among its transforms."""
    if not log_scale:
        monkeypatch.setattr(logscale, "with_wide_log", list)
    opt = AxOptimizer(loss_spec())
    opt.restore(trials)
    (c,) = opt.generate(1)
    assert c.method == "MBM"
    monkeypatch.undo()
    return opt.client._generation_strategy.adapter  # noqa: SLF001 - the model Ax fitted


def test_a_loss_over_decades_is_modelled_on_the_log_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    from ax.core.observation import ObservationFeatures

    first = AxOptimizer(loss_spec())
    drawn = []
    for _ in range(8):  # the quasi-random start
        (c,) = first.generate(1)
        first.complete(c.index, loss_outcome(c.parameters))
        drawn.append(RestoredTrial(c.index, c.parameters, "COMPLETED", c.method, loss_outcome(c.parameters)))
    logged = _fitted(monkeypatch, True, drawn)
    raw = _fitted(monkeypatch, False, drawn)
    assert logged.transforms["WideLogY"].metric_signatures == ["loss"]  # size spans less than a decade
    assert "WideLogY" not in raw.transforms

    # held out: the better half of the space, where the front is
    rng = np.random.default_rng(0)
    points = [{"x0": float(a), "x1": float(b)} for a, b in rng.uniform([0.5, 0.0], [1.0, 1.0], size=(200, 2))]
    truth = [loss_outcome(p)["loss"] for p in points]
    feats = [ObservationFeatures(parameters=p) for p in points]
    on_log = logged.predict(feats)[0]["loss"]
    on_raw = raw.predict(feats)[0]["loss"]
    assert min(on_log) > 0  # a log-normal model cannot predict a negative loss
    rho_log = spearmanr(on_log, truth).statistic
    rho_raw = spearmanr(on_raw, truth).statistic
    assert rho_log > 0.8 and rho_log > rho_raw + 0.1, (rho_log, rho_raw)


@pytest.mark.parametrize("method", ["botorch", "categorical"])
def test_objectives_within_a_decade_propose_as_before(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    # tests.helpers.optimizer.outcome: err in [0, 1) (reaches zero), size 1-7: neither is logged,
    # so the extra transform must leave every proposal exactly as Ax's own would be
    spec = make_spec(MIXED, method=method, max_trials=7, initial=3)
    with_it = [c.parameters for c in run(AxOptimizer(spec), 6)]
    monkeypatch.setattr(logscale, "with_wide_log", list)
    without = [c.parameters for c in run(AxOptimizer(spec), 6)]
    assert with_it == without


def test_model_diagnostics_fit_the_optimizers_scale() -> None:
    """`nasctl web`/`nasctl report` cross-validate the model: a loss over decades is
    fitted on the log scale there too, and the result says so."""
    from datetime import datetime, timezone

    from nasctl.optimizer.diagnostics import loo_cross_validation
    from nasctl.types import TrialRecord, TrialStatus

    rng = np.random.default_rng(1)
    now = datetime.now(timezone.utc)
    trials = []
    for i, (a, b) in enumerate(rng.uniform(size=(12, 2))):
        p = {"x0": float(a), "x1": float(b)}
        trials.append(TrialRecord(id=i, experiment_id=1, index=i, parameters=p, status=TrialStatus.COMPLETED,
                                  generation_method="Sobol", created_at=now, values=loss_outcome(p)))
    result = loo_cross_validation(loss_spec(), trials)
    assert result["log_scale"] == ["loss"]
    assert result["model"] == "SingleTaskGP (the botorch method's model); on the log scale: loss"
    predicted = [r["predicted"] for r in result["metrics"]["loss"]]
    assert len(predicted) == 12 and min(predicted) > 0  # the metric's own scale, never below zero
    narrow = [TrialRecord(id=t.id, experiment_id=1, index=t.index, parameters=t.parameters, status=t.status,
                          generation_method="Sobol", created_at=now,
                          values={"loss": 0.5 + 0.1 * float(t.parameters["x0"]), "size": t.values["size"]})
              for t in trials]
    result = loo_cross_validation(loss_spec(), narrow)
    assert result["log_scale"] == [] and "log scale" not in result["model"]


def test_the_optimizer_names_the_objectives_its_model_has_on_the_log_scale() -> None:
    rng = np.random.default_rng(2)
    points = [{"x0": float(a), "x1": float(b)} for a, b in rng.uniform(size=(8, 2))]
    start = AxOptimizer(loss_spec())
    (c,) = start.generate(1)
    assert c.method != "MBM" and start.log_scale is None  # no model yet
    opt = AxOptimizer(loss_spec())
    opt.restore([RestoredTrial(i, p, "COMPLETED", "Sobol", loss_outcome(p)) for i, p in enumerate(points)])
    (c,) = opt.generate(1)
    assert c.method == "MBM" and opt.log_scale == ("loss",)

    narrow = AxOptimizer(loss_spec())
    narrow.restore([RestoredTrial(i, p, "COMPLETED", "Sobol", {"loss": 0.5 + 0.1 * p["x0"], "size": 2.0 + p["x1"]})
                    for i, p in enumerate(points)])
    (c,) = narrow.generate(1)
    assert c.method == "MBM" and narrow.log_scale == ()


SPREAD = '''
import math

def spread(p):
    x0, x1 = float(p["x0"]), float(p["x1"])
    return {"loss": 10.0 ** (-4.0 * x0) * (1.5 + math.sin(5.0 * x1)), "size": 1.0 + 3.0 * (1.0 - x0) + x1}
'''


def test_a_run_tells_the_user_which_objectives_went_on_the_log_scale(tmp_path: Path) -> None:
    """The real loop and CLI: the live output, the experiment's events and
    `nasctl status` name the objective the model put on the log scale."""
    from nasctl.store import Store, queries
    from tests.conftest import run_cli

    (tmp_path / "spreadfn.py").write_text(SPREAD)
    spec = loss_spec_data(max_trials=8)
    spec.update(name="spread", trial={"function": "spreadfn:spread"}, runner={"scheduler": "inprocess"})
    spec["optimizer"]["initial_trials"] = 6
    (tmp_path / "spread.json").write_text(json.dumps(spec))
    db = f"sqlite:///{tmp_path / 'n.db'}"
    r = run_cli("run", str(tmp_path / "spread.json"), "--db", db, "--workdir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "optimizer: modelling loss on the log scale (observed " in r.stderr

    store = Store(db)
    exp = store.get_experiment("spread")
    (event,) = store.events(exp.id, kinds=[queries.LOG_SCALE])  # said once, not at every proposal
    assert event.data == {"metrics": ["loss"]}
    r = run_cli("status", "spread", "--db", db, "--json")
    assert json.loads(r.stdout)["log_scale"] == ["loss"]
    r = run_cli("status", "spread", "--db", db)
    assert "on the log scale: loss" in " ".join(r.stdout.split())


# --- the hypervolume improvement on the raw scale ------------------------------------------


def test_raw_units_are_the_raw_value_from_the_geometric_mean() -> None:
    import torch

    z = torch.linspace(-3.0, 3.0, 61, dtype=torch.float64)
    for mean, sd in [(math.log(1e-3), 1.7), (math.log(40.0), 0.4), (0.0, 1e-3)]:
        y = torch.exp(mean + sd * z)  # what StandardizeY after LogY hands the model as z
        expected = (y - math.exp(mean)) / (math.exp(mean) * sd)
        got = logscale.raw_units(z, torch.tensor(sd, dtype=torch.float64))
        assert torch.allclose(got, expected, rtol=1e-9, atol=1e-12)
        assert bool((got.diff() > 0).all())  # increasing: the Pareto front does not change
    slope = (logscale.raw_units(torch.tensor(1e-6), torch.tensor(2.0)) - 0.0) / 1e-6
    assert abs(float(slope) - 1.0) < 1e-5  # the scale of z near the geometric mean


def _acquisition(monkeypatch: pytest.MonkeyPatch, trials: list[RestoredTrial], spec: ExperimentSpec) -> Any:
    """The Ax `Acquisition` and BoTorch acquisition function of one model-based proposal."""
    from ax.generators.torch.botorch_modular.acquisition import Acquisition

    built: list[Any] = []
    opt = AxOptimizer(spec)
    construct = Acquisition._construct_botorch_acquisition  # noqa: SLF001

    def capture(self: Any, *args: Any, **kwargs: Any) -> Any:
        acqf = construct(self, *args, **kwargs)
        built.append((self, acqf))
        return acqf

    monkeypatch.setattr(Acquisition, "_construct_botorch_acquisition", capture)
    opt.restore(trials)
    (c,) = opt.generate(1)
    assert c.method == "MBM"
    adapter = opt.client._generation_strategy.adapter  # noqa: SLF001
    (acquisition, acqf), = built[-1:]
    return adapter, acquisition, acqf


def _trials(outcome: Any, n: int = 8, seed: int = 2) -> list[RestoredTrial]:
    rng = np.random.default_rng(seed)
    points = [{"x0": float(a), "x1": float(b)} for a, b in rng.uniform(size=(n, 2))]
    return [RestoredTrial(i, p, "COMPLETED", "Sobol", outcome(p)) for i, p in enumerate(points)]


def test_the_improvement_of_a_log_scale_objective_is_measured_on_its_raw_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model has `loss` on the log scale; the hypervolume improvement is computed on
    the raw scale: the reference point is the user's threshold (1.0) in raw units, and
    posterior samples of the model are mapped back before they are scored."""
    import torch
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    adapter, acquisition, acqf = _acquisition(monkeypatch, _trials(loss_outcome), loss_spec())
    assert adapter.transforms["WideLogY"].metric_signatures == ["loss"]
    assert isinstance(acqf, qLogNoisyExpectedHypervolumeImprovement)
    assert isinstance(acqf.objective, logscale.RawScaleObjective)
    mean, std = adapter.transforms["StandardizeY"].Ymean, adapter.transforms["StandardizeY"].Ystd
    outcomes = list(acquisition.surrogate._outcomes)  # noqa: SLF001 - the model's output order
    li, si = outcomes.index("loss"), outcomes.index("size")
    # minimised objectives are negated (BoTorch maximises); loss in units of its geometric mean x sd
    geo = math.exp(mean["loss"])
    want = {li: -(1.0 - geo) / (geo * std["loss"]), si: -(10.0 - mean["size"]) / std["size"]}
    assert acqf.ref_point.tolist() == pytest.approx([want[0], want[1]], rel=1e-9)
    # Ax's own thresholds (on the model's scale) are left as they were for Ax's later use
    assert acquisition._objective_thresholds[li] != pytest.approx(acqf.ref_point[li])  # noqa: SLF001

    z = torch.tensor([[[0.3, -1.2]], [[-2.0, 0.7]]], dtype=torch.float64)  # samples of the model's outputs
    scored = acqf.objective(z)
    for k in range(2):
        loss = math.exp(mean["loss"] + std["loss"] * float(z[k, 0, li]))
        assert float(scored[k, 0, li]) == pytest.approx(-(loss - geo) / (geo * std["loss"]), rel=1e-9)
        assert float(scored[k, 0, si]) == pytest.approx(-float(z[k, 0, si]), rel=1e-12)


def test_without_a_log_scale_objective_the_acquisition_is_axs(monkeypatch: pytest.MonkeyPatch) -> None:
    def narrow(p: dict[str, Any]) -> dict[str, float]:
        return {"loss": 0.5 + 0.1 * float(p["x0"]), "size": 2.0 + float(p["x1"])}

    adapter, acquisition, acqf = _acquisition(monkeypatch, _trials(narrow), loss_spec())
    assert "loss" not in adapter.transforms["WideLogY"].metric_signatures
    assert not isinstance(acqf.objective, logscale.RawScaleObjective)
    assert acqf.ref_point.tolist() == acquisition._objective_thresholds.tolist()  # noqa: SLF001


def test_while_nothing_is_feasible_the_thresholds_are_left_to_ax(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before any trial meets the thresholds Ax asks for the probability of meeting
    them, which compares the model's values with thresholds on the model's scale."""
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    data = loss_spec_data(12)
    data["objectives"]["loss"]["threshold"] = 1e-9  # no trial meets it
    adapter, acquisition, acqf = _acquisition(monkeypatch, _trials(loss_outcome), parse_spec(json.dumps(data)))
    assert adapter.transforms["WideLogY"].metric_signatures == ["loss"]
    import torch
    from ax.generators.torch.botorch_modular.acquisition import _objective_threshold_to_outcome_constraints
    from ax.generators.torch.utils import get_outcome_constraint_transforms

    assert not isinstance(acqf, qLogNoisyExpectedHypervolumeImprovement)
    # the feasibility it scores is Ax's: thresholds on the model's (log) scale
    ax_own = get_outcome_constraint_transforms(_objective_threshold_to_outcome_constraints(
        objective_weights=acquisition._objective_weights,  # noqa: SLF001
        objective_thresholds=acquisition._objective_thresholds,  # noqa: SLF001
    ))
    z = torch.linspace(-4.0, 4.0, 33, dtype=torch.float64)
    samples = torch.stack([z, z.flip(0)], dim=-1).view(33, 1, 2)
    assert len(acqf._constraints) == len(ax_own)  # noqa: SLF001
    for mine, theirs in zip(acqf._constraints, ax_own):  # noqa: SLF001
        assert torch.equal(mine(samples), theirs(samples))


def test_objectives_are_found_in_axs_weight_matrix() -> None:
    import torch

    # minimise output 2, maximise output 0, output 1 a constraint only
    weights = torch.tensor([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    assert logscale._objective_columns(weights) == [(2, -1.0), (0, 1.0)]  # noqa: SLF001
    # an objective that mixes outputs, or weights in another layout: left to Ax
    assert logscale._objective_columns(torch.tensor([[1.0, 0.5, 0.0]])) is None  # noqa: SLF001
    assert logscale._objective_columns(torch.tensor([1.0, -1.0])) is None  # noqa: SLF001
