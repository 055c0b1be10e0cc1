"""Ax generation strategies for each `optimizer.method` (see `methods`).

Every model-based strategy is Ax's own dispatch (a center point, Sobol for
`spec.initial_trials` trials, then a modular-BoTorch node named "MBM"), with
the model and the acquisition-optimisation budget set here. Keeping Ax's node
names ("Sobol", "MBM") keeps `AxOptimizer.restore` working for every method.

Acquisition budget. BoTorch's defaults (20 restarts from the best of 1,024
raw samples) cost ~1.5 s per proposal on a loaded 2-core machine; the
acquisition surface of a GP fitted to <= a few hundred points is smooth enough
that 8 restarts from 256 raw samples find the same optimum in our benchmarks
(docs/benchmarks.md) at a third of the cost. The budget grows with the
number of tunable parameters, where a small start set would miss basins.
"""

from __future__ import annotations

from typing import Any

from nasctl.spec import ExperimentSpec

SAAS_NUTS = {"warmup_steps": 128, "num_samples": 128, "thinning": 16, "max_tree_depth": 6}
"""NUTS for SAASBO: 8 posterior samples of the hyperparameters after 128 warm-up
steps (BoTorch's defaults are 512/256/16 = 16 samples, ~4x the cost)."""


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
            mll_options={"disable_progbar": True, **SAAS_NUTS},
            name="SAASBO",
        )
    elif method == "categorical":
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
            options: dict[str, Any] = {"optimizer_kwargs": acquisition_budget(dims)}
            gspec.generator_gen_kwargs = {
                **gspec.generator_gen_kwargs,
                "model_gen_options": {**gspec.generator_gen_kwargs.get("model_gen_options", {}), **options},
            }
    return gs
