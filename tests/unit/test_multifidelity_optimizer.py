"""MultiFidelityOptimizer (nasctl/optimizer/multifidelity.py) on a cheap analytic
problem, in process: promotions before new configurations, Ax indices equal to
the store's, new configurations at the lowest rung and never repeated, and a
rebuilt optimizer that never promotes a trial twice."""

from __future__ import annotations

import math

import pytest

from nasctl.optimizer.ax_optimizer import Candidate, RestoredTrial
from nasctl.optimizer.multifidelity import PROMOTION, MultiFidelityOptimizer
from nasctl.optimizer.promotion import RungResult
from nasctl.spec import parse_spec

SPEC = """
name: mfo
search_space:
  x: {type: float, low: 0, high: 1}
  z: {type: float, low: 0, high: 1}
objectives:
  err: {goal: minimize}
  size: {goal: minimize}
budget: {max_trials: 40, parallelism: 2}
trial: {script: train.py}
optimizer: {initial_trials: 4, seed: 1, fidelity: {parameter: epochs, min: 1, max: 9, eta: 3}}
"""


def evaluate(p: dict) -> dict[str, float]:
    e = float(p["epochs"])
    return {"err": (p["x"] - 0.3) ** 2 + 0.2 * p["z"] + 0.5 / e, "size": (1 - p["x"]) + 0.1 * p["z"]}


def drive(opt: MultiFidelityOptimizer, steps: int, complete_last: bool = True) -> list[Candidate]:
    """`steps` candidates one at a time, each completed (the last only if `complete_last`)."""
    history = []
    for step in range(steps):
        (c,) = opt.generate(1)
        history.append(c)
        if complete_last or step < steps - 1:
            opt.complete(c.index, evaluate(c.parameters))
    return history


GPU_BUDGET = ("parallelism: 2}", "parallelism: 2, max_gpu_hours: 1.0}")
ON_A_GPU = ("trial: {script: train.py}", "trial: {script: train.py, resources: {gpu: 1}}")


def spend(opt: MultiFidelityOptimizer, seconds: float) -> tuple[list[Candidate], list[float]]:
    """Candidates one at a time, each completed at 100 GPU-seconds an epoch it trains,
    until `seconds` are spent: (the candidates, the seconds spent before each)."""
    history: list[Candidate] = []
    before: list[float] = []
    spent = 0.0
    while spent < seconds:
        before.append(spent)
        (c,) = opt.generate(1)
        history.append(c)
        cost = 100.0 * (c.parameters["epochs"] - (history[c.promoted_from].parameters["epochs"]
                                                  if c.promoted_from is not None else 0))
        opt.complete(c.index, evaluate(c.parameters), cost)
        spent += cost
    return history, before


@pytest.mark.parametrize(("rule", "rank"), [("strict", "rung"), ("eager", "rung"), ("eager", "model")])
def test_promotions_come_first_and_indices_stay_aligned(rule: str, rank: str) -> None:
    spec = parse_spec(SPEC.replace("eta: 3}", f"eta: 3, promotion: {rule}, rank: {rank}}}"))
    assert spec.optimizer.fidelity is not None and spec.optimizer.fidelity.promotion == rule
    assert spec.optimizer.fidelity.rank == rank
    opt = MultiFidelityOptimizer(spec)
    history = []
    for step in range(14):
        (c,) = opt.generate(1)
        assert c.index == step  # Ax's index is the store's
        history.append(c)
        opt.complete(c.index, evaluate(c.parameters))
    promotions = [c for c in history if c.method == PROMOTION]
    new = [c for c in history if c.method != PROMOTION]
    assert all(c.parameters["epochs"] == 1 and c.promoted_from is None for c in new)
    assert promotions and len({c.promoted_from for c in promotions}) == len(promotions)
    by_index = {c.index: c for c in history}
    for c in promotions:
        src = by_index[c.promoted_from]
        assert {k: c.parameters[k] for k in ("x", "z")} == {k: src.parameters[k] for k in ("x", "z")}
        assert c.parameters["epochs"] == {1: 3, 3: 9}[src.parameters["epochs"]]
    first = promotions[0]
    if rule == "strict":
        # the first promotion came as soon as rung 0 held eta (3) results: no waiting for a full rung
        assert sum(1 for c in history[: first.index] if c.parameters["epochs"] == 1) >= 3
        assert first.index <= 4
    else:
        # the first result goes on at once, rung by rung, to the top: trials 0 (1), 1 (3), 2 (9 epochs)
        assert [(c.index, c.parameters["epochs"], c.promoted_from) for c in history[:3]] == [
            (0, 1, None), (1, 3, 0), (2, 9, 1)]
    # no configuration was started twice
    configs = [(round(c.parameters["x"], 6), round(c.parameters["z"], 6)) for c in new]
    assert len(set(configs)) == len(configs)


def test_the_model_rank_predicts_every_configuration_at_the_top_rung() -> None:
    """Once the model is fitted, `predict_top` gives each configuration's top-rung
    outcome: the fidelity-independent objective as observed, the error below what
    one epoch reached (the model has seen the error fall with the epochs)."""
    opt = MultiFidelityOptimizer(parse_spec(SPEC))
    history = drive(opt, 16)
    assert any(c.method not in (PROMOTION, "Sobol", "CenterOfSearchSpace") for c in history)  # the model's
    rung0 = [RungResult(c.index, 0, evaluate(c.parameters)) for c in history if c.parameters["epochs"] == 1]
    predicted = opt.predict_top(rung0)
    assert predicted is not None and [p.index for p in predicted] == [r.index for r in rung0]
    for r, p in zip(rung0, predicted):
        c = next(h for h in history if h.index == r.index)
        truth = evaluate({**c.parameters, "epochs": 9})
        assert p.values["size"] == pytest.approx(truth["size"], abs=0.05)
        assert p.values["err"] < r.values["err"]  # better than at one epoch


def test_the_model_rank_waits_for_the_model() -> None:
    """Before the quasi-random start is over there is no model: `predict_top` says so."""
    opt = MultiFidelityOptimizer(parse_spec(SPEC))
    (c,) = opt.generate(1)
    opt.complete(c.index, evaluate(c.parameters))
    assert opt.predict_top([RungResult(c.index, 0, evaluate(c.parameters))]) is None


def test_a_rebuilt_optimizer_never_promotes_a_recorded_promotion_again() -> None:
    spec = parse_spec(SPEC)
    stored = drive(MultiFidelityOptimizer(spec), 6, complete_last=False)
    last = stored[-1]
    assert any(c.promoted_from is not None for c in stored)
    # resume: the last one (maybe a promotion) was recorded but never ran
    restored = [RestoredTrial(c.index, c.parameters, "COMPLETED" if c is not last else "CANDIDATE", c.method,
                              evaluate(c.parameters) if c is not last else {}, None, c.promoted_from)
                for c in stored]
    again = MultiFidelityOptimizer(spec)
    again.restore(restored)
    already = {c.promoted_from for c in stored if c.promoted_from is not None}
    more = again.generate(4)
    assert [c.index for c in more] == list(range(6, 10))
    for c in more:
        assert c.promoted_from not in already
        if c.promoted_from is not None:
            already.add(c.promoted_from)
    assert all(math.isfinite(float(c.parameters["epochs"])) for c in more)


def test_brackets_start_new_configurations_where_starts_have_cost_least() -> None:
    """With `brackets: 3` on rungs 1, 3, 9 epochs, each new configuration starts at the
    rung whose starts have cost the fewest epochs so far (ties: the lowest), and a
    rebuilt optimizer goes on with the same schedule."""
    from nasctl.errors import SpecError

    start14 = SPEC.replace("initial_trials: 4", "initial_trials: 14")  # no result needed to propose
    spec = parse_spec(start14.replace("eta: 3}", "eta: 3, brackets: 3}"))
    opt = MultiFidelityOptimizer(spec)
    starts = [float(c.parameters["epochs"]) for c in (opt.generate(1)[0] for _ in range(12))]
    # spent per bracket after each start: 1|0|0, 1|3|0, 1|3|9, 2|3|9, 3|3|9, 4|3|9 -> rung 1 ...
    assert starts == [1, 3, 9, 1, 1, 1, 3, 1, 1, 1, 3, 1]
    spent = [sum(s for s in starts if s == rung) for rung in (1, 3, 9)]
    assert max(spent) - min(spent) <= 9  # the brackets share the epochs spent on starts: [8, 9, 9]
    rebuilt = MultiFidelityOptimizer(spec)
    rebuilt.restore([RestoredTrial(i, {**c, "epochs": int(s)}, "RUNNING", "Sobol", {})
                     for i, (c, s) in enumerate(zip(opt._configs.values(), starts))])
    assert rebuilt._start_rung() == opt._start_rung()
    plain = MultiFidelityOptimizer(parse_spec(start14))  # the default: successive halving, all at the lowest
    assert [float(c.parameters["epochs"]) for c in plain.generate(3)] == [1, 1, 1]
    with pytest.raises(SpecError, match=r"brackets \(4\) must be at most the number of rungs \(3: 1, 3, 9\)"):
        parse_spec(SPEC.replace("eta: 3}", "eta: 3, brackets: 4}"))


@pytest.mark.parametrize("late_full", [None, 0.5])
def test_late_full_starts_new_configurations_at_the_top_once_half_the_budget_is_spent(
        late_full: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """`LATE_FULL_FROM`, rungs 1, 3, 9, every epoch 100 GPU-seconds, a budget of one
    GPU-hour: new configurations start at the lowest rung until half of it is spent,
    then at the top rung (9 epochs), while promotions still go on; off, they all
    start at the lowest rung."""
    from nasctl.optimizer import multifidelity

    monkeypatch.setattr(multifidelity, "LATE_FULL_FROM", late_full)
    opt = MultiFidelityOptimizer(parse_spec(SPEC.replace(*GPU_BUDGET).replace(*ON_A_GPU)))
    history, before = spend(opt, 3000)
    share_at = [s / 3600.0 for s in before]
    starts = [(share, float(c.parameters["epochs"])) for share, c in zip(share_at, history) if c.promoted_from is None]
    early = {e for share, e in starts if share < 0.5}
    late = {e for share, e in starts if share >= 0.5}
    assert early == {1.0}
    assert late == ({9.0} if late_full else {1.0})
    assert any(c.promoted_from is not None for c in history)


@pytest.mark.parametrize("end_game", [False, True])
def test_the_end_game_sends_the_rung_below_the_top_on_once_the_budget_is_short(
        end_game: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """`END_GAME`, rungs 1, 3, 9, every epoch 100 GPU-seconds (a top-rung training
    900), parallelism 2, a budget of one GPU-hour: once at most 2 x 900 s is left,
    a free slot promotes the best waiting trial of rung 1 to the top past the
    rung's quota, before any new configuration; without it the quota holds."""
    from nasctl.optimizer import multifidelity

    monkeypatch.setattr(multifidelity, "END_GAME", end_game)
    spec = parse_spec(SPEC.replace("eta: 3}", "eta: 3, promotion: strict}").replace(*GPU_BUDGET).replace(*ON_A_GPU))
    opt = MultiFidelityOptimizer(spec)
    history, _ = spend(opt, 1800)
    at = {e: [c for c in history if c.parameters["epochs"] == e] for e in (1, 3, 9)}
    sent_on = {c.promoted_from for c in history if c.promoted_from is not None}
    waiting = [c.index for c in at[3] if c.index not in sent_on]
    assert waiting, "the run should reach the end with rung-1 trials below the quota's cut"
    assert len(at[3]) // 3 <= sum(1 for c in at[3] if c.index in sent_on)  # the quota was used up
    (nxt,) = opt.generate(1)
    if end_game:
        assert nxt.promoted_from in waiting and nxt.parameters["epochs"] == 9
    else:
        assert nxt.promoted_from is None and nxt.parameters["epochs"] == 1


@pytest.mark.parametrize("carry", [False, True])
def test_carried_thresholds_rank_each_rung_from_the_configurations_results(
        carry: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """`CARRY_THRESHOLDS`: every promotion decision ranks each rung with the thresholds
    carried down from what the configurations completed so far reached rung by rung."""
    from nasctl.optimizer import multifidelity
    from nasctl.optimizer.promotion import carried_thresholds

    monkeypatch.setattr(multifidelity, "CARRY_THRESHOLDS", carry)
    seen: list[object] = []

    def recording(*args: object, **kw: object) -> object:
        seen.append(kw.get("carried"))
        return choose(*args, **kw)

    choose = multifidelity.choose_promotion
    monkeypatch.setattr(multifidelity, "choose_promotion", recording)
    spec = parse_spec(SPEC.replace("err: {goal: minimize}", "err: {goal: minimize, threshold: 0.4}")
                      .replace("size: {goal: minimize}", "size: {goal: minimize, threshold: 0.9}"))
    opt = MultiFidelityOptimizer(spec)
    history = drive(opt, 16)
    seen.clear()
    opt.generate(1)
    ladders: dict[tuple[float, float], dict[int, dict[str, float]]] = {}
    for c in history:
        ladders.setdefault((c.parameters["x"], c.parameters["z"]), {})[{1: 0, 3: 1, 9: 2}[c.parameters["epochs"]]] = \
            evaluate(c.parameters)
    expected = carried_thresholds(list(ladders.values()), spec.objectives, 3) if carry else {}
    assert seen and seen[0] == expected
    if carry:  # the run put configurations within the thresholds at the top: something was carried
        assert expected and all(c.bound >= 0.4 for k in expected for c in expected[k] if c.metric == "err")
