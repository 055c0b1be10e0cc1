"""Cost-aware proposals (nasctl/optimizer/costaware.py): the weighted acquisition
against its definition on random inputs, the cooling rule, the cost a trial's
attempts give, and proposals that prefer cheap configurations only when asked."""

from __future__ import annotations

import collections
import math

import pytest
import torch
from botorch.acquisition.analytic import LogExpectedImprovement
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.models import ModelListGP, SingleTaskGP
from botorch.optim import optimize_acqf_discrete

from nasctl.optimizer import costaware
from nasctl.optimizer.ax_optimizer import AxOptimizer, RestoredTrial
from nasctl.optimizer.multifidelity import MultiFidelityOptimizer
from nasctl.orchestration.usage import Usage
from nasctl.spec import parse_spec


def _models(seed: int) -> tuple[SingleTaskGP, ModelListGP]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(12, 3, generator=g, dtype=torch.double)
    y = torch.sin(6 * X[:, :1]) + X[:, 1:2]
    log_cost = 2.0 * X[:, 2:3] - 1.0
    objective, cost = SingleTaskGP(X, y), SingleTaskGP(X, log_cost)
    return objective, ModelListGP(objective, cost)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_weighted_acquisition_is_the_inner_one_less_the_scaled_log_cost(seed: int) -> None:
    objective, both = _models(seed)
    inner = LogExpectedImprovement(objective, best_f=0.8)
    weighted = costaware.CostWeighted(inner, both, column=1, scale=0.7)
    X = torch.rand(20, 1, 3, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.double)
    with torch.no_grad():
        expected = inner(X) - 0.7 * both.models[1].posterior(X).mean.squeeze(-1).sum(-1)
        assert torch.allclose(weighted(X), expected)
        # a weight of 0 leaves the acquisition as it was
        assert torch.allclose(costaware.CostWeighted(inner, both, 1, 0.0)(X), inner(X))
    # the gradient flows through both parts (continuous spaces optimise it by gradient)
    Xg = X[:1].clone().requires_grad_(True)
    weighted(Xg).sum().backward()
    assert Xg.grad is not None and torch.isfinite(Xg.grad).all() and Xg.grad.abs().sum() > 0


def test_pending_points_reach_the_inner_acquisition_and_a_batch_prefers_the_cheap_end() -> None:
    objective, both = _models(0)
    X = objective.train_inputs[0]
    inner = qLogNoisyExpectedImprovement(objective, X_baseline=X, incremental=False)
    weighted = costaware.CostWeighted(inner, both, column=1, scale=5.0)
    pending = torch.rand(2, 3, dtype=torch.double)
    weighted.set_X_pending(pending)
    assert torch.equal(inner.X_pending, pending) and torch.equal(weighted.X_pending, pending)
    weighted.set_X_pending(None)
    # the same configurations at the cheap end of the cost input (x2 = 0) and at the dear end (x2 = 1)
    base = torch.rand(8, 3, generator=torch.Generator().manual_seed(7), dtype=torch.double)
    cheap, dear = base.clone(), base.clone()
    cheap[:, 2], dear[:, 2] = 0.0, 1.0
    chosen, _ = optimize_acqf_discrete(weighted, q=3, choices=torch.cat([dear, cheap]), unique=True)
    assert chosen.shape[0] == 3 and (chosen[:, 2] == 0.0).all()


def test_cooling_goes_from_one_to_nothing_as_the_budget_is_spent() -> None:
    assert costaware.cooling(0.0) == 1.0
    assert costaware.cooling(0.25) == pytest.approx(0.75)
    assert costaware.cooling(0.2, 0.7) == pytest.approx(0.3)  # the larger share decides
    assert costaware.cooling(0.6, 0.1) == pytest.approx(0.4)
    assert costaware.cooling(1.3) == 0.0 and costaware.cooling(0.0, 2.0) == 0.0
    assert costaware.current_alpha() is None
    with costaware.weighting(0.4):
        assert costaware.current_alpha() == 0.4
    with costaware.weighting(0.0):
        assert costaware.current_alpha() is None  # nothing left to weigh: the plain acquisition
    assert costaware.current_alpha() is None


def test_a_trial_costs_its_useful_device_seconds_or_its_running_seconds() -> None:
    assert Usage(run_s=100.0, gpu_s=200.0, lost_gpu_s=50.0).cost == 150.0  # two devices, a lost part
    assert Usage(run_s=30.0).cost == 30.0  # no devices: its running time
    assert Usage().cost is None


SPACE = """
name: cost
search_space:
  w: {type: choice, values: [1, 2, 3, 4, 5, 6, 7, 8], ordered: true}
  d: {type: choice, values: [1, 2, 3, 4, 5, 6], ordered: true}
  batch: {type: choice, values: [small, large]}
objectives: {err: {goal: minimize, threshold: 1.0}, size: {goal: minimize, threshold: 60}}
budget: {max_trials: 200, parallelism: 1}
trial: {function: "x:y"}
"""


def _picks(cost_aware: bool, steps: int = 16) -> collections.Counter[str]:
    """Which `batch` the model's proposals chose, where `batch` changes the cost 100-fold
    and nothing else."""
    opt = AxOptimizer(parse_spec(SPACE + f"optimizer: {{seed: 0, cost_aware: {str(cost_aware).lower()}}}\n"))
    picks: collections.Counter[str] = collections.Counter()
    for _ in range(steps):
        (c,) = opt.generate(1)
        p = c.parameters
        if c.method != "Sobol":
            picks[str(p["batch"])] += 1
        opt.complete(c.index, {"err": 1.0 / (1 + p["w"] * p["d"] ** 0.5), "size": p["w"] * p["d"]},  # type: ignore[operator]
                     100.0 if p["batch"] == "small" else 1.0)
    return picks


def test_cost_aware_proposals_prefer_the_cheap_twin_of_a_configuration() -> None:
    on, off = _picks(True), _picks(False)
    assert sum(on.values()) >= 8 and sum(off.values()) >= 8
    assert on["large"] == sum(on.values())  # every model proposal took the cheap batch
    assert off["small"] >= 2  # without the cost, the batch is a coin the model does not see


def test_the_model_learns_log_cost_and_a_resume_tells_it_again() -> None:
    spec = parse_spec(SPACE + "optimizer: {seed: 0, cost_aware: true, initial_trials: 3}\n")
    opt = AxOptimizer(spec)
    told = []
    for k in range(3):
        (c,) = opt.generate(1)
        opt.complete(c.index, {"err": 0.5, "size": 10.0 + k}, 20.0 * (k + 1))
        told.append(RestoredTrial(c.index, c.parameters, "COMPLETED", c.method, {"err": 0.5, "size": 10.0 + k},
                                  cost=20.0 * (k + 1)))
    df = opt.experiment.lookup_data().df
    logged = df[df["metric_name"] == costaware.COST_METRIC].sort_values("trial_index")["mean"].tolist()
    assert logged == pytest.approx([math.log(20.0), math.log(40.0), math.log(60.0)])
    rebuilt = AxOptimizer(spec)
    rebuilt.restore(told)
    df = rebuilt.experiment.lookup_data().df
    assert sorted(df[df["metric_name"] == costaware.COST_METRIC]["mean"]) == pytest.approx(logged)
    plain = AxOptimizer(parse_spec(SPACE + "optimizer: {seed: 0, cost_aware: false}\n"))
    (c,) = plain.generate(1)
    plain.complete(c.index, {"err": 0.5, "size": 10.0}, 20.0)
    assert costaware.COST_METRIC not in set(plain.experiment.lookup_data().df["metric_name"])


def test_a_promotion_costs_what_its_configuration_costs_to_the_top_rung() -> None:
    spec = parse_spec("""
name: mfcost
search_space: {x: {type: float, low: 0, high: 1}}
objectives: {err: {goal: minimize}, size: {goal: minimize}}
budget: {max_trials: 40}
trial: {script: train.py}
optimizer: {seed: 0, cost_aware: true, initial_trials: 2, fidelity: {parameter: epochs, min: 1, max: 9, eta: 3}}
""")
    opt = MultiFidelityOptimizer(spec)
    (new,) = opt.generate(1)
    assert new.parameters["epochs"] == 1
    assert opt._model_cost(new.index, 5.0) == pytest.approx(45.0)  # 1 of 9 epochs for 5: 45 for all 9
    opt.complete(new.index, {"err": 0.3, "size": 1.0}, 5.0)
    promoted = opt.promote(new.index)
    assert promoted.parameters["epochs"] == 3
    assert opt._model_cost(promoted.index, 10.0) == pytest.approx(45.0)  # epochs 2 and 3 for 10
