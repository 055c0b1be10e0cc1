"""Every use of an Ax or BoTorch internal, in one place.

nasctl's optimizer reads a few private attributes of Ax and BoTorch objects
where neither library offers a public way to the same value, and its
subclasses override a few private methods. Those are not part of either
library's API and may move in any release, so they are all here, as small
named functions, each with a test (`tests/unit/test_optimizer_compat.py`)
that runs it against the pinned releases (`SUPPORTED`: ax-platform 1.3.1,
botorch 0.18.1). A release that moves one fails that test, and at run time
stops with an `UnsupportedVersionError` naming the attribute, never with a
bare `AttributeError` deep inside a proposal. Nothing else in nasctl reads or
writes an underscored attribute of an Ax or BoTorch object.

Where a public way exists it is used instead, outside this module: the
client's generation strategy is the one `AxOptimizer` hands to
`Client.set_generation_strategy` (kept), its random seed is the spec's, a
strategy's nodes are `GenerationStrategy.nodes_by_name`, an acquisition's
reference point is `Acquisition.objective_thresholds` (read) and the
`ref_point` entry of `botorch_acqf_options` (replaced), a surrogate's outcomes
are `Surrogate.outcomes`, a box decomposition's front and reference point are
`pareto_Y` and `ref_point` (negated), a model's batch shape is `batch_shape`,
and a kernel's length scale is set through its `lengthscale` property.

Writes that have no public replacement (each documented where it is made):

- `set_generator_state_after_gen`: the quasi-random fast path tells Ax's
  "Sobol" node where its sequence goes on. Ax reads that position from the
  state recorded in the node's latest generator run, in preference to the
  node's arguments, and offers no setter.
- `set_local_upper_bounds`, `set_dual_local_upper_bounds`: `boxdecomp`'s
  partitionings compute BoTorch's box decomposition themselves; BoTorch's own
  methods (`update`) go on from the local upper bounds they leave in BoTorch's
  attributes.

The private methods nasctl's subclasses override are listed in
`PRIVATE_OVERRIDES`; the test checks that each still exists with the
parameters the override expects.

Imports of Ax and BoTorch happen inside the functions: importing this module
costs nothing.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from nasctl.errors import UnsupportedVersionError
from nasctl.optimizer import SUPPORTED

FUSED_KERNEL_MODULE = "logei_fused_ext"
"""The module BoTorch imports first for its fused qLogNEHVI kernel
(`_try_load_fused_kernel`), before it compiles one itself."""

PRIVATE_OVERRIDES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    # (module, class, method, parameters): overridden by `acquisition.HypervolumeImprovement`
    ("botorch.acquisition.multi_objective.logei", "qLogNoisyExpectedHypervolumeImprovement",
     "_set_cell_bounds", ("self", "num_new_points")),
    ("botorch.acquisition.multi_objective.logei", "qLogNoisyExpectedHypervolumeImprovement",
     "_compute_posterior_samples_and_concat_pending", ("self", "X")),
    ("botorch.acquisition.multi_objective.logei", "qLogNoisyExpectedHypervolumeImprovement",
     "_compute_log_qehvi", ("self", "samples", "X")),
    # by `acquisition.NasctlAcquisition`
    ("ax.generators.torch.botorch_modular.acquisition", "Acquisition",
     "_construct_botorch_acquisition", ("self", "botorch_acqf_class", "botorch_acqf_options", "model")),
    # by `boxdecomp.NumpyNondominatedPartitioning` and `BatchedNondominatedPartitioning`
    ("botorch.utils.multi_objective.box_decompositions.non_dominated", "FastNondominatedPartitioning",
     "_partition_space", ("self",)),
    ("botorch.utils.multi_objective.box_decompositions.non_dominated", "FastNondominatedPartitioning",
     "_get_partitioning", ("self",)),
    ("botorch.utils.multi_objective.box_decompositions.non_dominated", "FastNondominatedPartitioning",
     "_compute_hypervolume_if_y_has_data", ("self",)),
)
"""Private methods of Ax and BoTorch that nasctl's subclasses override (and call
through `super()`), with the parameters the overrides take."""


def pinned() -> str:
    """The supported releases, as `ax-platform 1.3.1, botorch 0.18.1`."""
    return ", ".join(f"{dist} {version}" for dist, version in SUPPORTED.items())


def moved(what: str, detail: str = "is not there") -> UnsupportedVersionError:
    """The error for an Ax or BoTorch internal (`what`, e.g. `Client._experiment`)
    that is not what nasctl relies on."""
    found = []
    for dist in SUPPORTED:
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist} not installed")
    return UnsupportedVersionError(
        f"{what} {detail}: nasctl's optimizer relies on it as in {pinned()} (found {', '.join(found)})",
        f"pip install {' '.join(repr(f'{d}=={v}') for d, v in SUPPORTED.items())}, "
        "or adapt nasctl/optimizer/compat.py to the installed release",
    )


def _read(obj: Any, name: str, owner: str) -> Any:
    """`obj.<name>` (a private attribute of `owner`), or the `moved` error."""
    try:
        return getattr(obj, name)
    except AttributeError:
        raise moved(f"{owner}.{name}") from None


# --- Ax: the client, its strategy and generator runs ---------------------------------


def client_experiment(client: Any) -> Any:
    """The `Experiment` of an `ax.api.Client` (`Client._experiment`: the client
    has no public accessor for the experiment it builds in `configure_experiment`)."""
    return _read(client, "_experiment", "ax.api.Client")


def advance_strategy(generation_strategy: Any) -> bool:
    """Move a `GenerationStrategy` on to the node its transition criteria allow,
    as `gen` does first (`GenerationStrategy._maybe_transition_to_next_node`
    with `raise_data_required_error=False`); True if it moved. The public
    `current_generator_run_limit` does the same but swallows
    `GenerationStrategyCompleted` and also computes the node's trial limit."""
    advance = _read(generation_strategy, "_maybe_transition_to_next_node", "GenerationStrategy")
    return bool(advance(raise_data_required_error=False))


def strategy_generator_runs(generation_strategy: Any) -> list[Any]:
    """Every generator run a `GenerationStrategy` made, oldest first
    (`GenerationStrategy._generator_runs`; public is only the last one)."""
    return list(_read(generation_strategy, "_generator_runs", "GenerationStrategy"))


def generation_node_name(run: Any) -> str | None:
    """The name of the generation node that made a `GeneratorRun`
    (`GeneratorRun._generation_node_name`, a constructor argument with no accessor)."""
    name = _read(run, "_generation_node_name", "GeneratorRun")
    return None if name is None else str(name)


def generator_key(run: Any) -> str | None:
    """The generator key of a `GeneratorRun` (`GeneratorRun._generator_key`)."""
    key = _read(run, "_generator_key", "GeneratorRun")
    return None if key is None else str(key)


def generator_state_after_gen(run: Any) -> dict[str, Any] | None:
    """The generator state a `GeneratorRun` recorded (`GeneratorRun._generator_state_after_gen`;
    for a Sobol run, `init_position`: where the sequence goes on). The live dict, not a copy."""
    state = _read(run, "_generator_state_after_gen", "GeneratorRun")
    if state is not None and not isinstance(state, dict):
        raise moved("GeneratorRun._generator_state_after_gen", "is not a dict")
    return state


def set_generator_state_after_gen(run: Any, key: str, value: Any) -> bool:
    """Set one entry of a `GeneratorRun`'s recorded generator state (see
    `generator_state_after_gen`); False (nothing set) where it recorded none.
    Ax fits the next adapter of the run's node with that state and offers no
    setter for it."""
    state = generator_state_after_gen(run)
    if state is None:
        return False
    state[key] = value
    return True


# --- Ax: the adapter and the acquisition -------------------------------------------------


def adapter_optimization_config(adapter: Any) -> Any:
    """The optimization config an Ax `Adapter` was built with (`Adapter._optimization_config`),
    already set while its transforms are constructed; None for no adapter."""
    if adapter is None:
        return None
    return _read(adapter, "_optimization_config", "ax.adapter.base.Adapter")


def acquisition_objective_weights(acquisition: Any) -> Any:
    """An Ax `Acquisition`'s objective weights over the outputs of its subset model
    (`Acquisition._objective_weights`; the public `objective_weights` are those
    over all outcomes, before subsetting)."""
    return _read(acquisition, "_objective_weights", "Acquisition")


def acquisition_subset_indices(acquisition: Any) -> Any:
    """Which outcomes an Ax `Acquisition`'s subset model keeps (`Acquisition._subset_idcs`,
    a tensor of outcome indices, or None when the model was not subset)."""
    return _read(acquisition, "_subset_idcs", "Acquisition")


# --- BoTorch: the fused qLogNEHVI kernel ----------------------------------------------


def _logei() -> Any:
    from botorch.acquisition.multi_objective import logei

    return logei


def fused_kernel() -> Any:
    """BoTorch's fused qLogNEHVI kernel module once loaded, else None (`logei._C`)."""
    return _read(_logei(), "_C", "botorch.acquisition.multi_objective.logei")


def fused_log_areas(subsets: Any, lower: Any, upper: Any, tau_relu: float, tau_max: float) -> Any:
    """Steps 1-4 of BoTorch's log hypervolume improvement in its fused kernel
    (`logei._FusedLogAreas.apply`, the autograd function BoTorch calls)."""
    function = _read(_logei(), "_FusedLogAreas", "botorch.acquisition.multi_objective.logei")
    return function.apply(subsets, lower, upper, tau_relu, tau_max)


def load_fused_kernel() -> bool:
    """Have BoTorch load its fused kernel now, compiling it where it cannot
    import `FUSED_KERNEL_MODULE` (`logei._try_load_fused_kernel`, which BoTorch
    calls when it first builds a qLogNEHVI); True if it is loaded."""
    _read(_logei(), "_try_load_fused_kernel", "botorch.acquisition.multi_objective.logei")()
    return fused_kernel() is not None


# --- BoTorch: acquisition internals --------------------------------------------------


def prune_inferior_shared_processing(**kwargs: Any) -> tuple[int, Any, Any]:
    """BoTorch's shared first step of `prune_inferior_points(_multi_objective)`
    (`botorch.acquisition.utils._prune_inferior_shared_processing`): the most
    points to keep, the objective values of the posterior samples and which
    samples are infeasible."""
    from botorch.acquisition import utils

    shared = _read(utils, "_prune_inferior_shared_processing", "botorch.acquisition.utils")
    max_points, obj_vals, infeasible = shared(**kwargs)
    return int(max_points), obj_vals, infeasible


def observed_baseline(acqf: Any) -> Any:
    """A qLogNEHVI's baseline without the pending points cached into it
    (`_X_baseline`; the public `X_baseline` includes them)."""
    return _read(acqf, "_X_baseline", "NoisyExpectedHypervolumeMixin")


def set_sampler(acqf: Any, q_in: int, posterior: Any) -> None:
    """Let an MC acquisition function's cached-Cholesky sampler follow `posterior`
    (`CachedCholeskyMCSamplerMixin._set_sampler`)."""
    _read(acqf, "_set_sampler", "CachedCholeskyMCSamplerMixin")(q_in=q_in, posterior=posterior)


def f_X_samples(acqf: Any, posterior: Any, q_in: int) -> Any:
    """The posterior samples of the `q_in` new points, drawn with the baseline's
    cached root decomposition (`CachedCholeskyMCSamplerMixin._get_f_X_samples`)."""
    return _read(acqf, "_get_f_X_samples", "CachedCholeskyMCSamplerMixin")(posterior=posterior, q_in=q_in)


# --- BoTorch: box decompositions ----------------------------------------------------------


def local_upper_bounds(partitioning: Any) -> Any:
    """The local upper bounds of a `FastPartitioning` (`_U`, minimisation)."""
    return _read(partitioning, "_U", "FastPartitioning")


def set_local_upper_bounds(partitioning: Any, U: Any, Z: Any) -> None:
    """Store the local upper bounds `U` and their defining points `Z` where a
    `FastPartitioning` keeps them (`_U`, a buffer, and `_Z`): BoTorch's `update`
    goes on from them. No public setter exists."""
    partitioning.register_buffer("_U", U)
    partitioning._Z = Z  # noqa: SLF001 - see the module docstring


def set_dual_local_upper_bounds(partitioning: Any, U2: Any, Z2: Any) -> None:
    """Store the local upper bounds of the dual problem `_get_partitioning` solves
    (`FastNondominatedPartitioning._U2`, `_Z2`), as BoTorch's own method leaves them."""
    partitioning._U2 = U2  # noqa: SLF001 - see the module docstring
    partitioning._Z2 = Z2  # noqa: SLF001
