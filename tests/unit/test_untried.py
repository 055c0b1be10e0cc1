"""Proposals among the configurations not tried yet (nasctl/optimizer/untried.py): the
listing itself, and a multi-fidelity search of a discrete space whose new
configurations all come from the model, none tried before at any rung."""

from __future__ import annotations

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
    new = [c for c in history if c.method != PROMOTION]
    configs = [(c.parameters["width"], c.parameters["depth"], c.parameters["lr"]) for c in new]
    assert len(set(configs)) == len(configs)
    assert not [c for c in new if c.method == EXPLORE]
    assert sum(c.method == "MBM" for c in new) >= 5
