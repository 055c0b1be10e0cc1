"""Ax generation strategies for each `optimizer.method` (see `methods`).

Every model-based strategy is Ax's own dispatch (a center point, Sobol for
`spec.initial_trials` trials, then a modular-BoTorch node named "MBM"), with
the model and the acquisition-optimisation budget set here. Keeping Ax's node
names ("Sobol", "MBM") keeps `AxOptimizer.restore` working for every method.

Acquisition budget. BoTorch's defaults (20 restarts from the best of 1,024
raw samples) took 1.4 s of a 2.4 s proposal (BraninCurrin, 48 trials, loaded
2-core machine); 8 restarts from 256 raw samples cost roughly a quarter of
that. The resulting quality is in docs/benchmarks.md. The budget grows with
the number of tunable parameters, where a small start set would miss basins.
"""

from __future__ import annotations

from typing import Any

from nasctl.spec import ExperimentSpec

SAAS_NUTS = {"warmup_steps": 128, "num_samples": 128, "thinning": 16, "max_tree_depth": 6}
"""NUTS for SAASBO: 8 posterior samples of the hyperparameters after 128 warm-up
steps (BoTorch's defaults are 512/256/16 = 16 samples, ~4x the cost)."""


FIT_MAXITER = 100
"""L-BFGS-B iterations for fitting the categorical GP's hyperparameters. The
mixed kernel's many lengthscales made BoTorch's fit (no limit) take ~1,000
likelihood evaluations; the optimum moves little after the first hundred."""


def _register_categorical_fit() -> None:
    """Fit MixedSingleTaskGP with a bounded number of L-BFGS-B iterations, through
    Ax's own dispatcher for model fitting (registered once per process)."""
    from ax.generators.torch.botorch_modular.utils import fit_botorch_model
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.gp_regression_mixed import MixedSingleTaskGP

    if getattr(_register_categorical_fit, "done", False):
        return

    @fit_botorch_model.register(MixedSingleTaskGP)
    def _fit_mixed(model: Any, mll_class: Any, mll_options: dict[str, Any] | None = None) -> None:
        mll = mll_class(likelihood=model.likelihood, model=model, **(mll_options or {}))
        fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": FIT_MAXITER}})

    _register_categorical_fit.done = True  # type: ignore[attr-defined]


def mc_samples(objectives: int) -> int:
    """Quasi-MC posterior samples for qLogNEHVI. With 3+ objectives each sample
    needs its own box decomposition of the baseline front (~60 ms each at 25
    trials on a loaded 2-core machine: 7.6 s of a 15 s proposal with BoTorch's
    128); 32 QMC samples keep the estimate's ranking of candidates."""
    return 128 if objectives <= 2 else 32


def acquisition_budget(dims: int) -> dict[str, int]:
    """Restarts and raw samples of the acquisition optimiser for `dims` tunable parameters."""
    if dims <= 8:
        return {"num_restarts": 8, "raw_samples": 256}
    if dims <= 20:
        return {"num_restarts": 10, "raw_samples": 512}
    return {"num_restarts": 12, "raw_samples": 1024}


def build_strategy(spec: ExperimentSpec, method: str, device: str | None) -> Any:
    """The `GenerationStrategy` for `method` (one of botorch, categorical, saasbo, sobol)."""
    from ax.adapter.registry import Mixed_transforms, Y_trans
    from ax.api.utils.generation_strategy_dispatch import choose_generation_strategy
    from ax.api.utils.structs import GenerationStrategyDispatchStruct
    from ax.generators.torch.botorch_modular.surrogate import ModelConfig
    from botorch.models.fully_bayesian import SaasFullyBayesianSingleTaskGP

    seed = spec.optimizer.seed
    if method == "sobol":
        struct = GenerationStrategyDispatchStruct(method="random_search", initialization_random_seed=seed)
        return choose_generation_strategy(struct)
    if method == "saasbo":
        config = ModelConfig(
            botorch_model_class=SaasFullyBayesianSingleTaskGP,
            mll_options={"disable_progbar": True, "seed": seed or 0, **SAAS_NUTS},
            name="SAASBO",
        )
    elif method == "categorical":
        _register_categorical_fit()
        config = ModelConfig(name="categorical")
    elif method == "botorch":
        config = ModelConfig(name="botorch")
    else:
        raise ValueError(f"unknown optimizer method {method!r}")
    struct = GenerationStrategyDispatchStruct(
        method="custom",
        initialization_budget=spec.initial_trials,
        initialization_random_seed=seed,
        torch_device=device,
    )
    gs = choose_generation_strategy(struct, model_config=config)
    dims = len(spec.tunable)
    for node in gs._nodes:  # noqa: SLF001 - Ax offers no public hook for these options
        for gspec in node.generator_specs:
            if gspec.generator_enum.value != "BoTorch":
                continue
            if method == "categorical":
                # keep unordered choices as single categorical features (no one-hot):
                # Ax then fits MixedSingleTaskGP and optimises over valid choices only
                gspec.generator_kwargs["transforms"] = [*Mixed_transforms, *Y_trans]
            budget = acquisition_budget(dims)
            if method == "categorical":
                # local search over neighbouring choices: each start is refined
                # exactly, so fewer starts suffice than for gradient ascent
                budget = {"num_restarts": 4, "raw_samples": 128}
            gspec.generator_kwargs["acquisition_options"] = {
                **gspec.generator_kwargs.get("acquisition_options", {}),
                "mc_samples": mc_samples(len(spec.objectives)),
            }
            options: dict[str, Any] = {"optimizer_kwargs": budget}
            gspec.generator_gen_kwargs = {
                **gspec.generator_gen_kwargs,
                "model_gen_options": {**gspec.generator_gen_kwargs.get("model_gen_options", {}), **options},
            }
    return gs
