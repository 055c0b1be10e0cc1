"""Proposals among the configurations not tried yet (nasctl/optimizer/untried.py): the
listing itself, and a multi-fidelity search of a discrete space whose new
configurations all come from the model, none tried before at any rung."""

from __future__ import annotations

import pytest
import torch

from nasctl.optimizer import untried
from nasctl.optimizer.multifidelity import PROMOTION, MultiFidelityOptimizer
from nasctl.optimizer.novelty import METHOD as EXPLORE
from nasctl.spec import parse_spec

CHOICES = {0: [0.0, 1.0, 2.0], 1: [0.0, 1.0], 2: [0.0, 0.5, 1.0]}  # column 2: the fidelity


def test_every_free_configuration_not_tried_at_any_fidelity_is_listed() -> None:
    tried = [torch.tensor([[1.0, 0.0, 0.0], [2.0, 1.0, 0.5]], dtype=torch.double),  # observed at low fidelities
             torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.double)]  # pending
    out = untried.untried_candidates(3, CHOICES, {2: 1.0}, [*tried, None])
    assert out is not None and out.shape == (6 - 3, 3)
    rows = {tuple(r) for r in out.tolist()}
    assert rows == {(0.0, 0.0, 1.0), (1.0, 1.0, 1.0), (2.0, 0.0, 1.0)}  # the fidelity at its fixed value


def test_nothing_is_listed_where_ax_already_avoids_repeats_or_the_space_is_too_large() -> None:
    assert untried.untried_candidates(3, CHOICES, None, []) is None  # nothing fixed: Ax's discrete optimiser
    assert untried.untried_candidates(3, {0: [0.0, 1.0], 2: [0.0]}, {2: 0.0}, []) is None  # column 1 continuous
    assert untried.untried_candidates(3, CHOICES, {2: 1.0}, [], limit=5) is None
    assert untried.untried_candidates(3, CHOICES, {2: 1.0}, [], limit=6) is not None


def test_with_unfixed_a_fully_discrete_space_is_listed_without_fixed_features(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(untried, "UNFIXED", True)
    tried = [torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.double), None]
    out = untried.untried_candidates(3, CHOICES, None, tried)
    assert out is not None and out.shape == (6 * len(CHOICES[2]) - 1, 3)
    assert (1.0, 0.0, 1.0) not in {tuple(r) for r in out.tolist()}
    assert untried.untried_candidates(3, {0: [0.0, 1.0], 2: [0.0]}, None, []) is None  # column 1 continuous
    assert untried.untried_candidates(3, CHOICES, None, [], limit=5) is None


SPEC = """
name: mfd
search_space:
  width: {type: choice, values: [8, 16, 32, 64], ordered: true}
  depth: {type: choice, values: [1, 2, 3], ordered: true}
  lr: {type: choice, values: [0.001, 0.01, 0.1], ordered: true}
objectives:
  err: {goal: minimize}
  size: {goal: minimize}
budget: {max_trials: 40, parallelism: 2}
trial: {script: train.py}
optimizer: {initial_trials: 4, seed: 3, fidelity: {parameter: epochs, min: 1, max: 9, eta: 3}}
"""


def _evaluate(p: dict) -> dict[str, float]:
    e = float(p["epochs"])
    lr_penalty = {0.001: 0.3, 0.01: 0.0, 0.1: 0.2}[p["lr"]]
    return {"err": 1.0 / p["width"] + 0.1 / p["depth"] + lr_penalty + 0.5 / e, "size": p["width"] * p["depth"]}


def test_new_configurations_of_a_discrete_multi_fidelity_search_come_from_the_model_never_repeated() -> None:
    """36 configurations: scored at the top rung, the model used to propose ones it had
    seen at lower rungs, each replaced by a quasi-random point ("Explore")."""
    opt = MultiFidelityOptimizer(parse_spec(SPEC))
    history = []
    for _ in range(24):
        (c,) = opt.generate(1)
        history.append(c)
        opt.complete(c.index, _evaluate(c.parameters))
    new = [c for c in history if c.method != PROMOTION and c.promoted_from is None]  # not continuations
    configs = [(c.parameters["width"], c.parameters["depth"], c.parameters["lr"]) for c in new]
    assert len(set(configs)) == len(configs)
    assert not [c for c in new if c.method == EXPLORE]
    assert sum(c.method == "MBM" for c in new) >= 5


def test_a_pending_point_is_moved_to_the_fixed_features_once() -> None:
    pending = [torch.tensor([[2.0, 1.0, 0.0], [2.0, 1.0, 0.5], [1.0, 0.0, 1.0]], dtype=torch.double), None]
    out = untried.pending_at_fixed(pending, {2: 1.0})
    assert out is not None and out[1] is None
    assert {tuple(r) for r in out[0].tolist()} == {(2.0, 1.0, 1.0), (1.0, 0.0, 1.0)}
    assert out[0].shape == (2, 3)
    assert untried.pending_at_fixed(pending, None) == pending  # nothing fixed: Ax's points as they are
    assert untried.pending_at_fixed(None, {2: 1.0}) is None


def _acquisition_pending(fixed: dict[int, float]) -> torch.Tensor | None:
    """X_pending of nasctl's acquisition with one trial in flight at the fixed fidelity (1.0)
    and one at a lower one (0.0), both new configurations."""
    from ax.core.search_space import SearchSpaceDigest
    from ax.generators.torch.botorch_modular.surrogate import Surrogate
    from ax.generators.torch_base import TorchOptConfig
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.utils.datasets import SupervisedDataset

    from nasctl.optimizer.acquisition import NasctlAcquisition

    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.5]],
                     dtype=torch.double)
    y = torch.stack([x.sum(-1), -x[:, 0]], -1)
    ssd = SearchSpaceDigest(feature_names=["a", "b", "epochs"], bounds=[(0.0, 2.0), (0.0, 1.0), (0.0, 1.0)],
                            ordinal_features=[0, 1], discrete_choices=CHOICES)
    surrogate = Surrogate()
    surrogate.fit(datasets=[SupervisedDataset(X=x, Y=y[:, i:i + 1], feature_names=ssd.feature_names,
                                              outcome_names=[name]) for i, name in enumerate(("err", "size"))],
                  search_space_digest=ssd)
    pending = torch.tensor([[2.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.double)
    config = TorchOptConfig(objective_weights=torch.eye(2, dtype=torch.double), fixed_features=fixed,
                            pending_observations=[pending, pending],
                            objective_thresholds=torch.tensor([0.0, -3.0], dtype=torch.double))
    acq = NasctlAcquisition(surrogate=surrogate, search_space_digest=ssd, torch_opt_config=config,
                            botorch_acqf_class=qLogNoisyExpectedHypervolumeImprovement)
    return acq.X_pending


def test_a_configuration_in_flight_at_a_lower_rung_is_pending_where_proposals_are_scored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ax keeps only the pending points at the fixed features: the configuration training
    at the lower fidelity was invisible to the acquisition (several free slots could get
    its neighbours); with the rule on it counts at the top rung."""
    monkeypatch.setattr(untried, "PENDING_AT_FIXED", True)
    pending = _acquisition_pending({2: 1.0})
    assert pending is not None
    assert {tuple(r) for r in pending.tolist()} == {(2.0, 1.0, 1.0), (1.0, 1.0, 1.0)}


def test_without_the_rule_or_fixed_features_the_pending_points_are_ax_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(untried, "PENDING_AT_FIXED", True)
    pending = _acquisition_pending({})
    assert pending is not None
    assert {tuple(r) for r in pending.tolist()} == {(2.0, 1.0, 0.0), (1.0, 1.0, 1.0)}
    monkeypatch.setattr(untried, "PENDING_AT_FIXED", False)  # the default
    pending = _acquisition_pending({2: 1.0})
    assert pending is not None and pending.tolist() == [[1.0, 1.0, 1.0]]  # Ax's: only the one at the top rung


SMALL = SPEC.replace("values: [8, 16, 32, 64]", "values: [8, 64]").replace("values: [1, 2, 3]", "values: [1, 3]") \
    .replace("values: [0.001, 0.01, 0.1]", "values: [0.001, 0.01]").replace("initial_trials: 4", "initial_trials: 3")


def _drive(opt: MultiFidelityOptimizer, proposals: int) -> list:
    out = []
    for _ in range(proposals):
        (c,) = opt.generate(1)
        out.append(c)
        opt.complete(c.index, _evaluate(c.parameters))
    return out


def test_the_model_continues_a_paused_configuration_from_where_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 configurations: once each has a trial, the model's choice is one that stopped
    below the top rung, and it goes on from that trial to the next rung."""
    monkeypatch.setattr(untried, "CONTINUE_PAUSED", True)
    opt = MultiFidelityOptimizer(parse_spec(SMALL))
    history = _drive(opt, 16)
    by_index = {c.index: c for c in history}
    continued = [c for c in history if c.method != PROMOTION and c.promoted_from is not None]
    assert continued, [(c.method, c.parameters, c.promoted_from) for c in history]
    rungs = opt.fidelity.rungs
    for c in continued:
        source = by_index[c.promoted_from]
        assert {k: c.parameters[k] for k in ("width", "depth", "lr")} == \
            {k: source.parameters[k] for k in ("width", "depth", "lr")}
        assert rungs.index(c.parameters["epochs"]) == rungs.index(source.parameters["epochs"]) + 1
    sources = [c.promoted_from for c in history if c.promoted_from is not None]
    assert len(sources) == len(set(sources))  # never continued twice
    configs = [(c.parameters["width"], c.parameters["depth"], c.parameters["lr"], c.parameters["epochs"])
               for c in history]
    assert len(configs) == len(set(configs))  # no configuration trained to the same rung twice


def test_without_continuing_a_model_proposal_never_continues_a_trial() -> None:
    assert not untried.CONTINUE_PAUSED  # the default
    history = _drive(MultiFidelityOptimizer(parse_spec(SMALL)), 16)
    assert not [c for c in history if c.method != PROMOTION and c.promoted_from is not None]
