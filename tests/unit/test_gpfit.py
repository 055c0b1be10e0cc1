"""GP fits: warm starts between proposals, the 3-objective sample count, and
proposals while no trial meets the thresholds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nasctl.optimizer import gpfit, strategies
from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.spec import ExperimentSpec, parse_spec


def make_spec(objectives: int, threshold: float = 1.5, max_trials: int = 30) -> ExperimentSpec:
    data = {
        "name": "g",
        "search_space": {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(3)},
        "objectives": {f"f{k}": {"goal": "minimize", "threshold": threshold} for k in range(objectives)},
        "budget": {"max_trials": max_trials},
        "trial": {"script": "/bin/true"},
        "optimizer": {"seed": 2, "initial_trials": 5, "method": "botorch"},
    }
    return parse_spec(json.dumps(data))


def f(p: dict[str, Any], objectives: int) -> dict[str, float]:
    x = [float(p[f"x{i}"]) for i in range(3)]
    return {f"f{k}": sum((xi - 0.2 * k) ** 2 for xi in x) + 0.1 * k for k in range(objectives)}


def propose(opt: AxOptimizer, n: int, objectives: int) -> None:
    for _ in range(n):
        (c,) = opt.generate(1)
        check = f(c.parameters, objectives)
        opt.complete(c.index, check)


def test_successive_fits_start_warm_and_go_cold_as_data_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpfit, "WARM_FROM", 0)  # the growth rule alone, from the first fit
    opt = AxOptimizer(make_spec(2))
    propose(opt, 6, 2)  # 5 quasi-random, then the first model fit (cold)
    assert opt.fits.fits >= 1 and opt.fits.warm_fits == 0
    propose(opt, 1, 2)  # 6 observations after a cold start at 5: warm
    assert opt.fits.warm_fits == 1
    (entry,) = opt.fits.entries.values()
    assert entry.cold_size == 5
    propose(opt, 1, 2)  # 7 >= 1.25 x 5: cold again, from the new size
    assert opt.fits.warm_fits == 1
    (entry,) = opt.fits.entries.values()
    assert entry.cold_size == 7


def test_small_training_sets_are_fitted_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below `WARM_FROM` training points every fit is cold, however little the data grew."""
    monkeypatch.setattr(gpfit, "WARM_FROM", 7)
    opt = AxOptimizer(make_spec(2))
    propose(opt, 6, 2)  # the first model fit, on 5 results: cold
    propose(opt, 1, 2)  # 6 < 1.25 x 5, but below WARM_FROM: cold, from the new size
    assert opt.fits.fits >= 2 and opt.fits.warm_fits == 0
    (entry,) = opt.fits.entries.values()
    assert entry.cold_size == 6
    propose(opt, 1, 2)  # 7 points: from WARM_FROM on, within 1.25 x 6: warm
    assert opt.fits.warm_fits == 1


def test_warm_start_loads_the_previous_hyperparameters(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fit of the next proposal starts from the parameters the last fit ended with."""
    monkeypatch.setattr(gpfit, "WARM_FROM", 0)
    opt = AxOptimizer(make_spec(2))
    propose(opt, 6, 2)
    (before,) = [e.values for e in opt.fits.entries.values()]
    seen: dict[str, Any] = {}

    def spy(mll: Any, optimizer_kwargs: Any = None, **_: Any) -> Any:
        seen.update({n: p.detach().clone() for n, p in mll.model.named_parameters()})
        seen["maxiter"] = (optimizer_kwargs or {}).get("options", {}).get("maxiter")
        return mll.eval()

    import botorch.fit

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", spy)
    propose(opt, 1, 2)
    assert seen["maxiter"] == gpfit.WARM_MAXITER
    for name, value in before.items():
        assert seen[name].equal(value), name


def test_fits_outside_an_optimizer_are_plain() -> None:
    """Ax used elsewhere in the process fits as it would without nasctl."""
    import torch
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    gpfit.register()
    from ax.generators.torch.botorch_modular.utils import fit_botorch_model

    x = torch.rand(8, 2, dtype=torch.float64)
    model = SingleTaskGP(x, x.sum(-1, keepdim=True))
    fit_botorch_model(model, mll_class=ExactMarginalLogLikelihood)
    assert not model.training  # fitted (BoTorch leaves a fitted model in eval mode)


def _samplers(opt: AxOptimizer) -> list[Any]:
    return [g.generator_kwargs.get("botorch_acqf_options", {}).get("sampler")
            for node in opt.client._generation_strategy._nodes for g in node.generator_specs]


def test_three_objectives_use_fewer_samples_and_propose_while_nothing_is_feasible() -> None:
    """With 3 objectives the acquisition gets a 32-sample sampler. While no trial
    meets every threshold Ax switches to the probability of feasibility, whose
    constructor takes the same sampler."""
    spec = make_spec(3, threshold=0.01, max_trials=8)  # nothing reaches 0.01 in all three
    opt = AxOptimizer(spec)
    assert [s.sample_shape[0] for s in _samplers(opt) if s is not None] == [32]
    propose(opt, 7, 3)
    assert sum(1 for t in opt.client._experiment.trials.values() if t.status.is_completed) == 7


def test_two_objectives_in_a_continuous_space_use_half_the_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """qLogNEHVI of a continuous 2-objective space is built with a 64-sample sampler,
    the price of its larger acquisition budget (`CONTINUOUS_BUDGET`)."""
    from ax.generators.torch.botorch_modular import acquisition

    built: list[Any] = []
    real = acquisition.Acquisition._construct_botorch_acquisition

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        acqf = real(self, *args, **kwargs)
        built.append(acqf)
        return acqf

    monkeypatch.setattr(acquisition.Acquisition, "_construct_botorch_acquisition", spy)
    opt = AxOptimizer(make_spec(2, max_trials=8))
    assert [s.sample_shape[0] for s in _samplers(opt) if s is not None] == [64]
    propose(opt, 7, 2)
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    from nasctl.optimizer.acquisition import HypervolumeImprovement

    # nasctl's subclass of BoTorch's qLogNEHVI, with BoTorch's sampler argument
    assert built and all(type(a) is HypervolumeImprovement for a in built)
    assert issubclass(HypervolumeImprovement, qLogNoisyExpectedHypervolumeImprovement)
    assert all(a.sampler.sample_shape[0] == 64 for a in built)


def test_two_objectives_elsewhere_keep_botorchs_default_samples() -> None:
    """A space with an integer is not continuous; SAASBO is not the plain GP; 9
    floats are more than the pair budget was measured for: 128 samples."""
    data = make_spec(2).model_dump(mode="json")
    data["search_space"]["n"] = {"type": "int", "low": 1, "high": 9}
    saas = make_spec(2).model_dump(mode="json")
    saas["optimizer"]["method"] = "saasbo"
    wide = make_spec(2).model_dump(mode="json")
    wide["search_space"] = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(9)}
    for spec in (parse_spec(json.dumps(data)), parse_spec(json.dumps(saas)), parse_spec(json.dumps(wide))):
        samplers = _samplers(AxOptimizer(spec))
        assert samplers and all(s is None for s in samplers)


def _optimiser_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict[str, Any]]:
    """The keyword arguments of every call Ax makes to BoTorch's optimiser `name`."""
    from ax.generators.torch.botorch_modular import acquisition

    seen: list[dict[str, Any]] = []
    real = getattr(acquisition, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(acquisition, name, spy)
    return seen


def test_continuous_spaces_keep_the_first_acquisition_optimisation(monkeypatch: pytest.MonkeyPatch) -> None:
    """BoTorch's retry after an abnormal L-BFGS-B end discards the first
    attempt's restarts; for continuous spaces (BoTorch's `optimize_acqf`) it is off."""
    seen = _optimiser_calls(monkeypatch, "optimize_acqf")
    propose(AxOptimizer(make_spec(2, max_trials=8)), 7, 2)
    assert seen and all(k["retry_on_optimization_warning"] is False for k in seen)
    # two and three objectives: the larger budget (`CONTINUOUS_BUDGET`); four: the small one
    assert all(k["num_restarts"] == 12 and k["raw_samples"] == 512 for k in seen)
    for objectives, budget in ((3, (12, 512)), (4, (8, 256))):
        seen.clear()
        propose(AxOptimizer(make_spec(objectives, max_trials=8)), 7, objectives)
        assert seen and all((k["num_restarts"], k["raw_samples"]) == budget for k in seen), objectives


def test_mixed_spaces_do_not_get_the_continuous_only_option() -> None:
    spec = make_spec(2, max_trials=8)
    data = spec.model_dump(mode="json")
    data["search_space"]["n"] = {"type": "int", "low": 1, "high": 9}
    opt = AxOptimizer(parse_spec(json.dumps(data)))
    for node in opt.client._generation_strategy._nodes:
        for g in node.generator_specs:
            budget = g.generator_gen_kwargs.get("model_gen_options", {}).get("optimizer_kwargs", {})
            assert "retry_on_optimization_warning" not in budget
    for _ in range(7):
        (c,) = opt.generate(1)  # the mixed optimiser accepts the options it is given
        opt.complete(c.index, {"f0": float(c.parameters["n"]) + float(c.parameters["x0"]), "f1": -float(c.parameters["n"])})


def _with_space(space: dict[str, Any]) -> ExperimentSpec:
    data = make_spec(2, max_trials=8).model_dump(mode="json")
    data["search_space"] = space
    return parse_spec(json.dumps(data))


GRIDS = {f"g{i}": {"type": "choice", "values": [1, 2, 4, 8, 16, 32, 64, 128], "ordered": True} for i in range(4)}


def test_which_spaces_are_searched_over_discrete_values_only() -> None:
    assert strategies.discrete_local_search(_with_space({**GRIDS, "b": {"type": "choice", "values": ["x", "y"]},
                                                         "n": {"type": "int", "low": 1, "high": 100}}))
    # one float, or an integer with more values than BoTorch's local search takes: gradient ascent
    assert not strategies.discrete_local_search(_with_space({**GRIDS, "x": {"type": "float", "low": 0.0, "high": 1.0}}))
    assert not strategies.discrete_local_search(_with_space({**GRIDS, "n": {"type": "int", "low": 1, "high": 101}}))


def test_discrete_spaces_get_the_local_search_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """An all-discrete space too large to enumerate (4 grids of 8 values x 1-100:
    409,600 points) goes to BoTorch's local search, which is given the local-search
    budget, not gradient ascent's."""
    seen = _optimiser_calls(monkeypatch, "optimize_acqf_discrete_local_search")
    opt = AxOptimizer(_with_space({**GRIDS, "n": {"type": "int", "low": 1, "high": 100}}))
    for _ in range(7):
        (c,) = opt.generate(1)
        p = c.parameters
        opt.complete(c.index, {"f0": sum(float(p[g]) for g in GRIDS) / 512 + float(p["n"]) / 100,
                               "f1": 1.0 - float(p["g0"]) / 128 + float(p["n"]) / 200})
    assert len(seen) == 2  # the two model-based proposals after 5 quasi-random ones
    assert all((k["num_restarts"], k["raw_samples"]) == (4, 128) for k in seen)
