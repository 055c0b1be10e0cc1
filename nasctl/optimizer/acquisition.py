"""nasctl's acquisition: subclasses of Ax's `Acquisition` and BoTorch's qLogNEHVI.

Everything nasctl changes about how Ax scores candidates goes through two
subclasses, handed to Ax in the generation step (`strategies.build_strategy`
sets `acquisition_class`); neither Ax nor BoTorch is modified, so any other
use of them in the process (a user's model in an in-process trial, the
dashboard's diagnostics) gets their own behaviour.

- `NasctlAcquisition` (Ax's `Acquisition`): Ax still chooses the BoTorch
  acquisition function (qLogNEHVI for several objectives, qLogNEI for one,
  qLogProbabilityOfFeasibility while nothing is feasible); where it chooses
  qLogNEHVI, this builds `HypervolumeImprovement` instead, and while
  objectives are modelled on the log scale it measures the hypervolume
  improvement on their own scale (`logscale.raw_scale_plan`).
  Where features are held fixed (the fidelity at its top rung) and the others
  are discrete and few enough to list, it picks among the configurations no
  trial has yet (`untried`), as Ax does in a fully discrete space (and, with
  `untried.PENDING_AT_FIXED`, off by default, counts every configuration in
  flight at another rung as pending there: `untried.pending_at_fixed`).
  With `screen.SCREEN` (off by default), a list longer than BoTorch scores
  whole (10,000) is first screened by a cheap hypervolume improvement
  (`screen`), and then a fully discrete space that large is listed too, with
  nothing held fixed, instead of Ax's local search from a few starts.
  A fully discrete space too large to list and left to Ax's local search
  starts it next to the front too, with `frontstarts.FRONT_STARTS` > 0
  (`frontstarts`).
  With `optimizer.cost_aware`, an improvement acquisition is divided by the
  modelled cost raised to the cooled weight alpha (`cost_weighted`, see
  `costaware`).
- `HypervolumeImprovement` (BoTorch's `qLogNoisyExpectedHypervolumeImprovement`):
  the same acquisition values, computed faster. Each speed-up is one named
  entry of `SPEEDUPS` (`benchmarks/ablation.py` turns them off one at a time)
  and is compared with BoTorch's reference implementation on random inputs in
  the tests; docs/optimizer.md has what each one saves.

  - "single-candidate" (`singleq`): one candidate at a time skips three
    identity steps of the log hypervolume improvement;
  - "numpy-boxes" (`boxdecomp`): the per-sample box decompositions of 3+
    objectives in NumPy;
  - "batched-boxes" (`boxdecomp`): those decompositions for all samples in
    one pass, vectorised over the samples (with "numpy-boxes" only; without
    it, BoTorch's per-sample decompositions);
  - "pairwise-pruning" (`nondominated`): the baseline pruning's
    non-dominated sort pairwise per objective instead of BoTorch's loop;
  - "joint-posterior" (`jointpost`): one joint posterior for a batch of
    candidates of the categorical method's GP.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from ax.generators.torch.botorch_modular.acquisition import Acquisition, determine_optimizer
from ax.generators.torch.botorch_modular.optimizer_argparse import optimizer_argparse
from ax.generators.utils import mk_discrete_choices
from botorch.optim.optimize import optimize_acqf_discrete_local_search
from botorch.acquisition.input_constructors import acqf_input_constructor, construct_inputs_qLogNEHVI
from ax.exceptions.model import ModelError
from botorch.acquisition.logei import TAU_RELU, qLogNoisyExpectedImprovement
from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

from nasctl.optimizer import costaware, frontstarts, jointpost, logscale, nondominated, screen, singleq, untried
from nasctl.optimizer.boxdecomp import BatchedNondominatedPartitioning, NumpyNondominatedPartitioning, SampleBatch

SPEEDUPS: frozenset[str] = frozenset(
    {"single-candidate", "numpy-boxes", "batched-boxes", "pairwise-pruning", "joint-posterior"}
)
"""The speed-ups `HypervolumeImprovement` uses (all of them; fewer for ablations)."""


class HypervolumeImprovement(qLogNoisyExpectedHypervolumeImprovement):
    """BoTorch's qLogNEHVI with the speed-ups in `SPEEDUPS`: same arguments,
    same acquisition values and gradients (to rounding; see each module)."""

    def __init__(
        self,
        model: Any,
        ref_point: Any,
        X_baseline: torch.Tensor,
        sampler: Any = None,
        objective: Any = None,
        constraints: Any = None,
        X_pending: torch.Tensor | None = None,
        eta: Any = 1e-3,
        prune_baseline: bool = False,
        alpha: float = 0.0,
        cache_pending: bool = True,
        max_iep: int = 0,
        incremental_nehvi: bool = True,
        cache_root: bool | None = None,
        tau_relu: float = TAU_RELU,
        tau_max: float = 1e-3,
        fat: bool = True,
        marginalize_dim: int | None = None,
    ) -> None:
        if prune_baseline and "pairwise-pruning" in SPEEDUPS and X_baseline.ndim == 2:
            # BoTorch's pruning (the mixin's first step), with the pairwise sort
            ref = torch.as_tensor(ref_point, dtype=X_baseline.dtype, device=X_baseline.device)
            X_baseline = nondominated.prune_inferior_points(
                model=model, X=X_baseline, ref_point=ref, objective=objective,
                constraints=constraints, marginalize_dim=marginalize_dim,
            )
            prune_baseline = False
        super().__init__(
            model=model, ref_point=ref_point, X_baseline=X_baseline, sampler=sampler,
            objective=objective, constraints=constraints, X_pending=X_pending, eta=eta,
            prune_baseline=prune_baseline, alpha=alpha, cache_pending=cache_pending,
            max_iep=max_iep, incremental_nehvi=incremental_nehvi, cache_root=cache_root,
            tau_relu=tau_relu, tau_max=tau_max, fat=fat, marginalize_dim=marginalize_dim,
        )

    def _set_cell_bounds(self, num_new_points: int) -> None:
        # BoTorch picks the partitioning class in __init__ (an instance attribute);
        # with 3+ objectives it decomposes each sample's front with it
        objectives = int(torch.as_tensor(self.ref_point).shape[-1])
        if "numpy-boxes" not in SPEEDUPS or self.alpha != 0 or objectives <= 2:
            super()._set_cell_bounds(num_new_points)
            return
        if "batched-boxes" not in SPEEDUPS:
            self.p_class = NumpyNondominatedPartitioning  # type: ignore[assignment]
            super()._set_cell_bounds(num_new_points)
            return
        # one batch per decomposition: the samples' partitionings wait for it
        self.p_class = BatchedNondominatedPartitioning  # type: ignore[assignment]
        self.p_kwargs = {"batch": SampleBatch()}  # type: ignore[dict-item]
        try:
            super()._set_cell_bounds(num_new_points)
        finally:
            self.p_kwargs = {}

    def _compute_posterior_samples_and_concat_pending(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fallback = super()._compute_posterior_samples_and_concat_pending
        if "joint-posterior" not in SPEEDUPS:
            return fallback(X)
        return jointpost.samples_and_pending(self, X, fallback)

    def _compute_log_qehvi(self, samples: torch.Tensor, X: torch.Tensor | None = None) -> torch.Tensor:
        if "single-candidate" in SPEEDUPS and singleq.skips_identities(self, samples):
            return singleq.compute_log_qehvi(self, samples, X=X)  # type: ignore[no-any-return]
        return super()._compute_log_qehvi(samples, X=X)


_COST_WEIGHABLE = (qLogNoisyExpectedHypervolumeImprovement, qLogNoisyExpectedImprovement)
"""Log-valued improvement acquisitions, which `costaware.CostWeighted` can divide by a cost."""

# BoTorch's input constructor for qLogNEHVI builds this subclass's arguments too
# (the registry is keyed by class; this is BoTorch's documented way to add one)
acqf_input_constructor(HypervolumeImprovement)(construct_inputs_qLogNEHVI)


class NasctlAcquisition(Acquisition):
    """Ax's `Acquisition`, building `HypervolumeImprovement` where Ax chose
    qLogNEHVI, measured on the objectives' own scale where they are modelled on
    the log scale (see `logscale`), and choosing among the configurations not
    tried yet where features are held fixed and the rest can be listed (see
    `untried`). Every other choice of Ax is kept."""

    _raw_columns: tuple[list[int], list[float]] | None = None

    def __init__(self, surrogate: Any, search_space_digest: Any, torch_opt_config: Any, *args: Any,
                 **kwargs: Any) -> None:
        # every pending trial's inputs, before Ax keeps only those at the fixed features
        self._pending_all: list[torch.Tensor] = [x for x in (torch_opt_config.pending_observations or []) if x is not None]
        if untried.PENDING_AT_FIXED and torch_opt_config.fixed_features and torch_opt_config.pending_observations:
            # configurations in flight at a lower rung are pending at the rung proposals are scored at
            torch_opt_config = dataclasses.replace(torch_opt_config, pending_observations=untried.pending_at_fixed(
                torch_opt_config.pending_observations, torch_opt_config.fixed_features))
        super().__init__(surrogate, search_space_digest, torch_opt_config, *args, **kwargs)

    def optimize(
        self,
        n: int,
        search_space_digest: Any,
        inequality_constraints: Any = None,
        equality_constraints: Any = None,
        fixed_features: dict[int, float] | None = None,
        rounding_func: Any = None,
        optimizer_options: dict[str, Any] | None = None,
        candidate_set: torch.Tensor | None = None,
        sampling_strategy: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if candidate_set is None and sampling_strategy is None and not inequality_constraints \
                and not equality_constraints:
            ssd = search_space_digest
            # every trial's inputs: Ax's X_observed and X_pending keep only the points at the fixed
            # features (the top rung); the model's training data and the pending observations have them all
            observed: list[torch.Tensor | None] = [ds.X for ds in self.surrogate.training_data]
            if untried.CONTINUE_PAUSED:
                # a configuration observed only below the fixed features (paused at a lower rung)
                # stays a candidate: the optimizer continues it (`multifidelity`)
                observed = [untried.at_fixed(x, fixed_features) for x in observed]
            tried = [*observed, *self._pending_all, self.X_observed, self.X_pending]
            screens = screen.applies(self.acqf)
            # a space too large for Ax to score whole is listed where the list can be screened
            # (Ax would search it locally from a few starts)
            unfixed = screens and math.prod(len(c) for c in ssd.discrete_choices.values()) > screen.ABOVE
            listed = untried.untried_candidates(len(ssd.feature_names), ssd.discrete_choices, fixed_features,
                                                tried, dtype=self.dtype or torch.double, unfixed=unfixed)
            if listed is not None and listed.shape[0] >= n:
                listed = listed.to(device=self.device)
                # too many to score by the exact acquisition: the best by a cheap one (`screen`)
                candidate_set = screen.shortlist(self.acqf, listed, n) if listed.shape[0] > screen.ABOVE else listed
            if candidate_set is None and frontstarts.FRONT_STARTS > 0:
                found = self._local_search_near_front(n, ssd, fixed_features, optimizer_options)
                if found is not None:
                    return found
        return super().optimize(n, search_space_digest, inequality_constraints=inequality_constraints,
                                equality_constraints=equality_constraints, fixed_features=fixed_features,
                                rounding_func=rounding_func, optimizer_options=optimizer_options,
                                candidate_set=candidate_set, sampling_strategy=sampling_strategy)

    def _local_search_near_front(self, n: int, ssd: Any, fixed_features: dict[int, float] | None,
                                 optimizer_options: dict[str, Any] | None
                                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """Ax's local search of a large discrete space, with starts next to the front
        added to its random ones (`frontstarts`); None where Ax would not search
        locally or there is no start to add (then Ax's own search runs)."""
        discrete = mk_discrete_choices(ssd=ssd, fixed_features=fixed_features)
        if determine_optimizer(search_space_digest=ssd, acqf=self.acqf,
                               discrete_choices=discrete) != "optimize_acqf_discrete_local_search":
            return None
        avoid = self.X_observed if self.X_pending is None else (
            self.X_pending if self.X_observed is None else torch.cat([self.X_observed, self.X_pending]))
        free = {i: c for i, c in discrete.items() if not fixed_features or i not in fixed_features}
        starts = frontstarts.neighbour_starts(self.acqf, free, fixed_features, avoid)
        if starts is None:
            return None
        options = optimizer_argparse(self.acqf, optimizer_options=dict(optimizer_options or {}),
                                     optimizer="optimize_acqf_discrete_local_search")
        choices = [torch.tensor(c, device=self.device, dtype=self.dtype) for c in discrete.values()]
        candidates, values = optimize_acqf_discrete_local_search(
            acq_function=self.acqf, q=n, discrete_choices=choices, X_avoid=avoid,
            batch_initial_conditions=starts.to(device=self.device, dtype=self.dtype), **options)
        return candidates, values, torch.ones(candidates.shape[0], dtype=self.dtype)

    def _construct_botorch_acquisition(
        self, botorch_acqf_class: type, botorch_acqf_options: dict[str, Any], model: Any
    ) -> Any:
        if botorch_acqf_class is qLogNoisyExpectedHypervolumeImprovement:
            botorch_acqf_class = HypervolumeImprovement
        plan = logscale.raw_scale_plan(self, botorch_acqf_class)
        if plan is None:
            return cost_weighted(self, super()._construct_botorch_acquisition(
                botorch_acqf_class=botorch_acqf_class, botorch_acqf_options=botorch_acqf_options, model=model
            ))
        columns, sds, mapped = plan
        # Ax passes `botorch_acqf_options` to BoTorch's input constructor after its own
        # arguments, so their `ref_point` replaces the objective thresholds for this
        # construction only; the objective comes from `get_botorch_objective_and_transform`
        # (below)
        self._raw_columns = (columns, sds)
        try:
            return cost_weighted(self, super()._construct_botorch_acquisition(
                botorch_acqf_class=botorch_acqf_class,
                botorch_acqf_options={**botorch_acqf_options, "ref_point": mapped},
                model=model,
            ))
        finally:
            self._raw_columns = None

    def get_botorch_objective_and_transform(self, *args: Any, **kwargs: Any) -> Any:
        objective, transform = super().get_botorch_objective_and_transform(*args, **kwargs)
        if self._raw_columns is not None:
            objective = logscale.RawScaleObjective(objective, *self._raw_columns)
        return objective, transform


def cost_weighted(acquisition: Acquisition, acqf: Any) -> Any:
    """`acqf` per unit of cost (`costaware.CostWeighted`) while the proposal being made
    weighs cost and `acquisition`'s model has the cost output; `acqf` itself otherwise."""
    alpha = costaware.current_alpha()
    if alpha is None or not isinstance(acqf, _COST_WEIGHABLE):
        return acqf
    try:
        outcomes = list(acquisition.surrogate.outcomes)
    except ModelError:  # a surrogate not fitted yet
        return acqf
    column = costaware.cost_column(outcomes)
    sd = costaware.cost_sd(logscale.standardized_sds(logscale.proposal_adapter()))
    if column is None or sd is None:
        return acqf
    return costaware.CostWeighted(acqf, acquisition.surrogate.model, column, alpha * sd)
