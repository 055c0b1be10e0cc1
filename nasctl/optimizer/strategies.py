"""Ax generation strategies for each `optimizer.method` (see `methods`).

Every model-based strategy is Ax's own dispatch (a center point, Sobol for
`spec.initial_trials` trials, then a modular-BoTorch node named "MBM"), with
the model, the transforms (`logscale.WideLogY`), the acquisition
(`acquisition.NasctlAcquisition`) and the acquisition-optimisation budget set
here, through the generator's arguments. Keeping Ax's node
names ("Sobol", "MBM") keeps `AxOptimizer.restore` working for every method.

Acquisition budget. BoTorch's defaults (20 restarts from the best of 1,024
raw samples) took 1.4 s of a 2.4 s proposal (BraninCurrin, 48 trials, loaded
2-core machine); 8 restarts from 256 raw samples cost roughly a quarter of
that, and the budget grows with the number of tunable parameters, where a
small start set would miss basins. Continuous spaces of up to 8 parameters
with two or three objectives get a larger budget (`CONTINUOUS_BUDGET`); with
two it is paid for with half the quasi-MC samples. Spaces searched over discrete values
only (the categorical method, and any space of integers and choices that
BoTorch's local search takes) get `LOCAL_SEARCH_BUDGET`. The measurements behind each
are in docs/benchmarks.md.
"""

from __future__ import annotations

from typing import Any

from nasctl.optimizer import catgp, gpfit
from nasctl.spec import ChoiceParameter, ExperimentSpec, FloatParameter, IntParameter

SAAS_NUTS = {"warmup_steps": 128, "num_samples": 128, "thinning": 16, "max_tree_depth": 6}
"""NUTS for SAASBO: 8 posterior samples of the hyperparameters after 128 warm-up
steps (BoTorch's defaults are 512/256/16 = 16 samples, ~4x the cost)."""


DEFAULT_MC_SAMPLES = 128
"""BoTorch's quasi-MC sample count for its acquisition functions."""


CONTINUOUS_BUDGET = {"num_restarts": 12, "raw_samples": 512}
CONTINUOUS_PAIR_MC_SAMPLES = 64
"""Continuous spaces of up to 8 parameters with two or three objectives
(measured on 2, 5 and 6 parameters; larger spaces keep the budget that grows
with them, and 4+ objectives, whose every acquisition value costs more, the
small one): 12 restarts from 512 raw samples. With two objectives, 64
quasi-MC samples instead of 128 pay for them.
`benchmarks/ablation.py`, 20 seeds x 30 trials, hypervolume at 20 / 30 trials
against 8 restarts from 256 with 128 samples: BraninCurrin 0.880 / 0.949 ->
0.896 / 0.953 (better on 13 seeds at 30, worse on 7), DTLZ2 0.488 / 0.661 ->
0.513 / 0.673 (12 / 8).
BoTorch's own budget (20 from 1,024) did as well with 64 samples (0.893 /
0.956 and 0.514 / 0.655) as with 128 (0.894 / 0.954 and 0.514 / 0.654), but a
proposal at 40-49 trials cost 1.4-1.6x the small budget's in the grid's loop;
12 from 512 with 64 samples cost about the same as the small budget there
(median 0.52 -> 0.53 s on BraninCurrin, 0.53 -> 0.56 s on DTLZ2). 64 samples
alone did not help (0.894 / 0.952 and 0.473 / 0.636). With three objectives
(32 samples, `mc_samples`) BoTorch's budget doubled the CPU of a VehicleSafety
proposal at 40-45 trials (0.51 -> 1.09 s), past the 1 s target; 12 from 512
cost 1.26x (0.48 -> 0.61 s) and, over 40 seeds x 30 trials, gave 0.944 /
0.976 -> 0.942 / 0.978 (better on 31 seeds at 30, worse on 9; BoTorch's
0.945 / 0.979, also 31 / 9)."""


def mc_samples(objectives: int, larger_budget: bool = False) -> int:
    """Quasi-MC posterior samples for qLogNEHVI. With 3+ objectives each sample
    needs its own box decomposition of the baseline front (~60 ms each at 25
    trials on a loaded 2-core machine with BoTorch's own code: 7.6 s of a 15 s
    proposal with BoTorch's 128; `boxdecomp` now does them ~4x faster).
    From 1,000 random NAS-Bench-201 cells (3 objectives; 6 benchmark states
    x 3 sampler seeds) a 32-sample estimate picked a cell with 0.996 of the
    best hypervolume improvement under a 512-sample estimate, on average; 16
    samples picked 0.965 (once 0.51). See benchmarks/acq_samples.py.
    `larger_budget`: the space gets `CONTINUOUS_BUDGET` (see `build_strategy`);
    with two objectives it then gets `CONTINUOUS_PAIR_MC_SAMPLES`."""
    if larger_budget and objectives == 2:
        return CONTINUOUS_PAIR_MC_SAMPLES
    if objectives >= 3:
        return 32
    return DEFAULT_MC_SAMPLES


LOCAL_SEARCH_BUDGET = {"num_restarts": 4, "raw_samples": 128}
"""Starts of BoTorch's local search over neighbouring discrete values. Each start
is climbed exactly to a local optimum, so fewer suffice than for gradient
ascent: on NAS-Bench-201 (categorical) 16 starts from 1,024 raw samples cost
2.4x the CPU for no better hypervolume; on HPOLib (ordered and binary
choices) 4 / 128 instead of 10 / 512 halved the proposal's CPU with the same
hypervolume at 30 trials (docs/benchmarks.md)."""

MAX_LOCAL_SEARCH_VALUES = 100
"""BoTorch (`optimize_mixed.MAX_CARDINALITY_FOR_LOCAL_SEARCH`) searches a fully
discrete space by local search when no parameter has more values than this;
with more it relaxes the large ones to continuous values and needs the
gradient ascent's starts."""


def discrete_local_search(spec: ExperimentSpec) -> bool:
    """Whether Ax optimises this space's acquisition over discrete values only (by
    enumeration or local search): every tunable parameter is an integer or a
    choice with at most `MAX_LOCAL_SEARCH_VALUES` values."""
    for p in spec.tunable.values():
        if isinstance(p, ChoiceParameter):
            count = len(p.values)
        elif isinstance(p, IntParameter):
            count = p.high - p.low + 1
        else:
            return False
        if count > MAX_LOCAL_SEARCH_VALUES:
            return False
    return True


def acquisition_budget(dims: int, larger_budget: bool = False) -> dict[str, int]:
    """Restarts and raw samples of the acquisition optimiser for `dims` tunable
    parameters (gradient ascent; discrete local search has its own budget).
    `larger_budget`: a continuous space that gets `CONTINUOUS_BUDGET` (see
    `build_strategy`)."""
    if larger_budget:
        return dict(CONTINUOUS_BUDGET)
    if dims <= 8:
        return {"num_restarts": 8, "raw_samples": 256}
    if dims <= 20:
        return {"num_restarts": 10, "raw_samples": 512}
    return {"num_restarts": 12, "raw_samples": 1024}


MIN_OBSERVED_RESULTS = 1
"""Results the model step waits for with several trials at once (at most the
quasi-random start's size). Waiting for 5, with quasi-random points for the slots
that free meanwhile (`benchmarks/ablation.py --parallelism K --variants
default,min-observed-5`), was measured against it on the simulated clock,
HV@30 of the optimizer alone: BraninCurrin K = 4 0.943 against 0.927, K = 16
0.638 against 0.527; VehicleSafety K = 16 0.874 against 0.860; DTLZ2 K = 4
0.444 against 0.491 (standard errors of the differences 0.012-0.069). A model
fitted to one result with the rest of the start pending spreads its proposals
away from the pending points, which served at least as well as more
quasi-random points (docs/benchmarks.md, "Sample efficiency at parallelism")."""

FILL_WHILE_WAITING = True
"""While the model step waits for `MIN_OBSERVED_RESULTS` results, a slot that
frees gets another quasi-random point (True) or stays idle until they are in
(False: the optimizer proposes nothing, `AxOptimizer.generate` returns no
candidate)."""


START_WITHIN_REQUEST = True
"""Whether the first request may start more quasi-random trials than
`initial_trials` (True: Ax's strategy moves from the center point to its
Sobol node within the request and fills every free slot; False: the first
request gets at most `initial_trials` candidates, and the other slots wait
for the model, as a stock Ax `Client` does). `benchmarks/ablation.py`
variant `cap-start` sets False."""


RETRY_ON_OPTIMIZATION_WARNING = False
"""Whether BoTorch optimises a continuous space's acquisition again when a restart
warns. BoTorch re-runs the whole optimisation from new starting points when any
restart's L-BFGS-B ends abnormally (a failed line search on a flat
log-acquisition surface), and keeps the second attempt's result, not the better
of the two: on VehicleSafety at 45 trials 3 proposals in 5 paid it (1.4-2.6 s
of optimisation instead of 0.4-0.9 s). The first attempt's best restart is as
good a candidate."""


def _model_config(method: str, seed: int | None) -> Any:
    """Ax's `ModelConfig` (the GP) of a model-based `method`."""
    from ax.generators.torch.botorch_modular.utils import ModelConfig
    from botorch.models.fully_bayesian import SaasFullyBayesianSingleTaskGP

    if method == "saasbo":
        return ModelConfig(
            botorch_model_class=SaasFullyBayesianSingleTaskGP,
            mll_options={"disable_progbar": True, "seed": seed or 0, **SAAS_NUTS},
            name="SAASBO",
        )
    if method == "categorical":
        return ModelConfig(botorch_model_class=catgp.model_class(), name="categorical")
    if method == "botorch":
        return ModelConfig(name="botorch")
    raise ValueError(f"unknown optimizer method {method!r}")


def build_strategy(spec: ExperimentSpec, method: str, device: str | None) -> Any:
    """The `GenerationStrategy` for `method` (one of botorch, categorical, saasbo, sobol)."""
    from ax.adapter.registry import MBM_X_trans, Mixed_transforms, Y_trans
    from ax.api.utils.generation_strategy_dispatch import choose_generation_strategy
    from ax.api.utils.structs import GenerationStrategyDispatchStruct
    import torch
    from botorch.sampling.normal import SobolQMCNormalSampler

    from nasctl.optimizer import logscale
    from nasctl.optimizer.acquisition import NasctlAcquisition

    gpfit.register()
    seed = spec.optimizer.seed
    if method == "sobol":
        struct = GenerationStrategyDispatchStruct(method="random_search", initialization_random_seed=seed)
        return choose_generation_strategy(struct)
    config = _model_config(method, seed)
    struct = GenerationStrategyDispatchStruct(
        method="custom",
        initialization_budget=spec.initial_trials,
        initialization_random_seed=seed,
        torch_device=device,
        # With several trials in flight, the quasi-random start can be spent before
        # half of it has results, which Ax's model step waits for by default: Ax
        # would refuse to propose (DataRequiredError) and the run would fail at its
        # first result with `parallelism` >= 4. One result is enough to start from
        # (`MIN_OBSERVED_RESULTS`); one trial at a time, the start has all its
        # results first, so nothing changes there.
        min_observed_initialization_trials=max(1, min(spec.initial_trials, MIN_OBSERVED_RESULTS)),
        # waiting for more results, a freed slot gets another quasi-random point
        allow_exceeding_initialization_budget=MIN_OBSERVED_RESULTS > 1 and FILL_WHILE_WAITING,
    )
    gs = choose_generation_strategy(struct, model_config=config)
    dims = len(spec.tunable)
    continuous = all(isinstance(p, FloatParameter) for p in spec.tunable.values())
    local_search = discrete_local_search(spec)
    # the larger budget was measured for the single GP's gradient ascent on up to 8
    # parameters and 2-3 objectives; SAASBO's acquisition averages 8 GPs, each
    # evaluation 8x dearer
    larger_budget = continuous and method == "botorch" and dims <= 8 and len(spec.objectives) in (2, 3)
    for node in gs.nodes_by_name.values():
        for gspec in node.generator_specs:
            if gspec.generator_enum.value != "BoTorch":
                continue
            # categorical: keep unordered choices as single categorical features (no
            # one-hot): Ax then fits MixedSingleTaskGP and optimises over valid choices only
            inputs = Mixed_transforms if method == "categorical" else MBM_X_trans
            gspec.generator_kwargs["transforms"] = logscale.with_wide_log([*inputs, *Y_trans])
            # nasctl's acquisition (see `acquisition`): Ax's choice of BoTorch function,
            # qLogNEHVI as nasctl's faster subclass, hypervolumes on the raw scale
            gspec.generator_kwargs["acquisition_class"] = NasctlAcquisition
            budget = acquisition_budget(dims, larger_budget)
            if method == "categorical" or local_search:
                budget = dict(LOCAL_SEARCH_BUDGET)
            samples = mc_samples(len(spec.objectives), larger_budget)
            if samples != DEFAULT_MC_SAMPLES:
                # `botorch_acqf_options` reach BoTorch's input constructor (Ax's
                # `acquisition_options` configure its wrapper and ignore sample
                # counts). A sampler, not `mc_samples`: Ax switches to
                # qLogProbabilityOfFeasibility while no trial is feasible, and
                # its constructor takes a sampler but no `mc_samples`.
                gspec.generator_kwargs["botorch_acqf_options"] = {
                    **gspec.generator_kwargs.get("botorch_acqf_options", {}),
                    "sampler": SobolQMCNormalSampler(sample_shape=torch.Size([samples]), seed=seed),
                }
            if continuous and not RETRY_ON_OPTIMIZATION_WARNING:
                # (Only `optimize_acqf`, used for continuous spaces, takes this option.)
                budget = {**budget, "retry_on_optimization_warning": False}
            options: dict[str, Any] = {"optimizer_kwargs": budget}
            gspec.generator_gen_kwargs = {
                **gspec.generator_gen_kwargs,
                "model_gen_options": {**gspec.generator_gen_kwargs.get("model_gen_options", {}), **options},
            }
    return gs
