"""optimizer.method: the auto rule, SAASBO and the categorical model propose valid
candidates, and a rebuilt optimizer continues where the first one stopped."""

from __future__ import annotations

from typing import Any

import pytest

from nasctl.errors import SpecError
from nasctl.optimizer import strategies
from nasctl.optimizer.methods import resolve_method
from nasctl.optimizer.ax_optimizer import AxOptimizer, RestoredTrial
from nasctl.spec import ExperimentSpec
from tests.helpers.optimizer import CELL, MIXED, make_spec, outcome, run


def check_valid(spec: ExperimentSpec, params: dict[str, Any]) -> None:
    assert set(params) == set(spec.tunable)
    for name, p in spec.tunable.items():
        v = params[name]
        if p.type == "choice":
            assert v in p.values and type(v) is type(p.values[0])
        elif p.type == "int":
            assert isinstance(v, int) and p.low <= v <= p.high
        else:
            assert isinstance(v, float) and p.low <= v <= p.high


def test_auto_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from nasctl.optimizer import methods

    # the rule as it stands with the saasbo extra installed (without it: test_saasbo_without_jax_falls_back_or_is_refused)
    monkeypatch.setattr(methods, "saasbo_available", lambda: True)
    assert resolve_method(make_spec(CELL)).method == "categorical"
    assert resolve_method(make_spec(MIXED)).method == "botorch"
    wide = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(24)}
    assert resolve_method(make_spec(wide, max_trials=100)).method == "saasbo"
    # a large budget makes SAAS too slow and unnecessary
    assert resolve_method(make_spec(wide, max_trials=1000)).method == "botorch"
    # binary unordered choices are one-hot friendly: not "categorical"
    binary = {f"b{i}": {"type": "choice", "values": ["a", "b"]} for i in range(4)}
    assert resolve_method(make_spec(binary)).method == "botorch"
    chosen = resolve_method(make_spec(CELL, method="botorch"))
    assert (chosen.method, chosen.reason) == ("botorch", "set in the spec")
    assert "4 of 4 parameters are unordered choices" in str(resolve_method(make_spec(CELL)))


def test_unknown_method_is_a_one_line_spec_error() -> None:
    with pytest.raises(SpecError) as ei:
        make_spec(CELL, method="turbo")
    msg = str(ei.value)
    assert "\n" not in msg and "optimizer.method" in msg and "categorical" in msg and "saasbo" in msg


def test_categorical_model_proposes_valid_choices_and_restores() -> None:
    spec = make_spec(CELL, method="categorical")
    opt = AxOptimizer(spec)
    cands = run(opt, 5)
    assert [c.method for c in cands][-2:] == ["MBM", "MBM"]  # the model, not Sobol, made the last two
    for c in cands:
        check_valid(spec, c.parameters)
    assert len({tuple(c.parameters.values()) for c in cands}) == 5
    # rebuild from "the store" and continue: indices go on, no repeats of drawn points
    again = AxOptimizer(spec)
    again.restore([RestoredTrial(c.index, c.parameters, "COMPLETED", c.method, outcome(c.parameters))
                   for c in cands])
    (nxt,) = again.generate(1)
    assert nxt.index == 5 and nxt.method == "MBM"
    check_valid(spec, nxt.parameters)
    assert tuple(nxt.parameters.values()) not in {tuple(c.parameters.values()) for c in cands}


def test_categorical_on_mixed_space_with_conditionals() -> None:
    spec = make_spec(MIXED, method="categorical", initial=3)
    opt = AxOptimizer(spec)
    for c in run(opt, 4):
        check_valid(spec, c.parameters)
        active = spec.active_parameters(c.parameters)
        assert ("width_2" in active) == (c.parameters["depth"] == 2)


@pytest.mark.saasbo
def test_saasbo_proposes_valid_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    # a very short NUTS chain: validity does not depend on it. Still the slowest
    # test here (JAX compiles the sampler: ~20 s CPU), so one model proposal only;
    # restore() is the same code for every method (tested above).
    monkeypatch.setattr(strategies, "SAAS_NUTS", {"warmup_steps": 16, "num_samples": 16, "thinning": 8,
                                                   "max_tree_depth": 4})
    space = {**{f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(3)},
             "n": {"type": "int", "low": 1, "high": 4}}
    spec = make_spec(space, method="saasbo", initial=3)
    cands = run(AxOptimizer(spec), 4)
    assert cands[-1].method == "MBM"
    for c in cands:
        check_valid(spec, c.parameters)


def test_sobol_method_restores_without_repeating() -> None:
    spec = make_spec(MIXED, method="sobol")
    first = run(AxOptimizer(spec), 3)
    uninterrupted = run(AxOptimizer(spec), 5)
    again = AxOptimizer(spec)
    again.restore([RestoredTrial(c.index, c.parameters, "COMPLETED", c.method, outcome(c.parameters))
                   for c in first])
    rest = run(again, 2)
    assert [c.parameters for c in rest] == [c.parameters for c in uninterrupted[3:]]


def test_saasbo_without_jax_falls_back_or_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from nasctl.errors import BadInputError
    from nasctl.optimizer import methods
    from nasctl.orchestration.control import check_spec_runnable

    monkeypatch.setattr(methods, "saasbo_available", lambda: False)
    import nasctl.orchestration.control as control

    monkeypatch.setattr(control, "saasbo_available", lambda: False)
    wide = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(24)}
    choice = resolve_method(make_spec(wide, max_trials=100))
    assert choice.method == "botorch" and "nasctl[saasbo]" in choice.reason
    with pytest.raises(BadInputError, match="saasbo needs JAX"):
        check_spec_runnable(make_spec(wide, method="saasbo"))
