"""Every Ax and BoTorch internal nasctl uses (`nasctl.optimizer.compat`) is where the
pinned releases keep it and means what nasctl takes it to mean: each function runs
against real Ax and BoTorch objects here. A release that moves one fails with a
message naming the attribute and the pinned versions (`compat.moved`). The public
ways that replaced private reads elsewhere are checked against what they replaced."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from nasctl.errors import UnsupportedVersionError
from nasctl.optimizer import SUPPORTED, compat
from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.spec import parse_spec
from tests.helpers.optimizer import COMPAT_SPEC, compat_outcome

ROOT = Path(__file__).resolve().parents[2]


def require(obj: Any, name: str, owner: str) -> Any:
    """`obj.<name>`, or the test fails with `compat.moved`'s message."""
    if not hasattr(obj, name):
        pytest.fail(str(compat.moved(f"{owner}.{name}")))
    return getattr(obj, name)


class Captured:
    """A real run to its first model-based proposal, with the Ax `Acquisition` and
    the BoTorch qLogNEHVI it built."""

    def __init__(self) -> None:
        from nasctl.optimizer.acquisition import NasctlAcquisition

        self.acquisitions: list[Any] = []
        self.acqfs: list[Any] = []
        construct = NasctlAcquisition._construct_botorch_acquisition

        def recording(acq: Any, **kwargs: Any) -> Any:
            acqf = construct(acq, **kwargs)
            self.acquisitions.append(acq)
            self.acqfs.append(acqf)
            return acqf

        with pytest.MonkeyPatch.context() as mp:  # nasctl's own class, for the duration of the run
            mp.setattr(NasctlAcquisition, "_construct_botorch_acquisition", recording)
            self.opt = AxOptimizer(parse_spec(COMPAT_SPEC))
            self.methods = []
            for _ in range(6):
                (c,) = self.opt.generate(1)
                self.methods.append(c.method)
                self.opt.complete(c.index, compat_outcome(c.parameters))
                if c.method == "MBM":
                    break


@pytest.fixture(scope="module")
def run() -> Iterator[Captured]:
    captured = Captured()
    assert captured.methods[-1] == "MBM" and captured.acquisitions, captured.methods
    yield captured


# --- the error and the overridden methods ---------------------------------------------


def test_a_moved_attribute_is_named_with_the_pinned_and_found_versions() -> None:
    class Thing:
        pass

    with pytest.raises(UnsupportedVersionError) as info:
        compat._read(Thing(), "_gone", "ax.api.Client")
    message = str(info.value)
    assert "ax.api.Client._gone is not there" in message and "\n" not in message
    for dist, version in SUPPORTED.items():
        assert f"{dist} {version}" in message
    assert compat.pinned() == "ax-platform 1.3.1, botorch 0.18.1"
    assert "ax-platform==1.3.1" in (info.value.hint or "") and "compat.py" in (info.value.hint or "")


@pytest.mark.parametrize(("module", "cls", "method", "parameters"), compat.PRIVATE_OVERRIDES,
                         ids=[f"{c}.{m}" for _, c, m, _ in compat.PRIVATE_OVERRIDES])
def test_overridden_private_methods_exist_with_the_overrides_parameters(
    module: str, cls: str, method: str, parameters: tuple[str, ...]
) -> None:
    owner = require(importlib.import_module(module), cls, module)
    function = require(owner, method, f"{module}.{cls}")
    found = tuple(inspect.signature(function).parameters)
    if found != parameters:
        pytest.fail(str(compat.moved(f"{module}.{cls}.{method}", f"takes {found}, not {parameters}")))


def test_the_overrides_listed_are_the_ones_nasctl_defines() -> None:
    """Every private method nasctl's subclasses define is in `PRIVATE_OVERRIDES`."""
    from nasctl.optimizer.acquisition import HypervolumeImprovement, NasctlAcquisition
    from nasctl.optimizer.boxdecomp import BatchedNondominatedPartitioning, NumpyNondominatedPartitioning

    listed = {m for _, _, m, _ in compat.PRIVATE_OVERRIDES}
    for cls in (HypervolumeImprovement, NasctlAcquisition, NumpyNondominatedPartitioning,
                BatchedNondominatedPartitioning):
        for name, value in vars(cls).items():
            if name.startswith("_") and not name.startswith("__") and callable(value):
                if name in ("_finish", "_local_search_near_front"):  # nasctl's own helpers
                    continue
                assert name in listed, f"{cls.__name__}.{name} overrides a private method not in PRIVATE_OVERRIDES"


# --- Ax: the client, its strategy and generator runs ---------------------------------


def test_client_experiment() -> None:
    from ax.api import Client
    from ax.api.configs import RangeParameterConfig
    from ax.core.experiment import Experiment

    client = Client(random_seed=5)
    client.configure_experiment(
        parameters=[RangeParameterConfig(name="x", bounds=(0.0, 1.0), parameter_type="float")], name="c"
    )
    experiment = compat.client_experiment(client)
    assert isinstance(experiment, Experiment) and experiment.name == "c"
    # the public replacement of `Client._random_seed`: the seed the client was given
    assert require(client, "_random_seed", "ax.api.Client") == 5


def test_advance_strategy_and_the_strategys_runs() -> None:
    from ax.core.generator_run import GeneratorRun

    opt = AxOptimizer(parse_spec(COMPAT_SPEC), fast_start=False)
    gs = opt.strategy
    assert gs is opt.client._generation_strategy_or_choose()  # the strategy the optimizer kept is the client's
    assert list(gs.nodes_by_name.values()) == list(require(gs, "_nodes", "GenerationStrategy"))
    assert compat.strategy_generator_runs(gs) == []
    (c,) = opt.generate(1)
    assert c.method == gs.current_node_name == "CenterOfSearchSpace"
    runs = compat.strategy_generator_runs(gs)
    assert len(runs) == 1 and isinstance(runs[0], GeneratorRun) and runs[0] is gs.last_generator_run
    assert compat.advance_strategy(gs) is True and gs.current_node_name == "Sobol"
    assert compat.advance_strategy(gs) is False and gs.current_node_name == "Sobol"  # needs 3 trials


def test_generator_run_fields() -> None:
    from ax.core.arm import Arm
    from ax.core.generator_run import GeneratorRun

    run = GeneratorRun(arms=[Arm(parameters={"x": 0.5})], generation_node_name="Sobol", generator_key="Sobol",
                       generator_state_after_gen={"init_position": 3})
    assert compat.generation_node_name(run) == "Sobol" and compat.generator_key(run) == "Sobol"
    state = compat.generator_state_after_gen(run)
    assert state == {"init_position": 3}
    assert compat.set_generator_state_after_gen(run, "init_position", 7) is True
    assert compat.generator_state_after_gen(run) == {"init_position": 7} and state["init_position"] == 7
    # Ax's own copy carries the state it read from where nasctl wrote it
    assert compat.generator_state_after_gen(run.clone()) == {"init_position": 7}
    bare = GeneratorRun(arms=[Arm(parameters={"x": 0.5})])
    assert compat.generation_node_name(bare) is None and compat.generator_key(bare) is None
    assert compat.generator_state_after_gen(bare) is None
    assert compat.set_generator_state_after_gen(bare, "init_position", 7) is False


# --- Ax: the adapter and the acquisition -------------------------------------------------


def test_adapter_optimization_config(run: Captured) -> None:
    adapter = run.opt.strategy.adapter
    config = compat.adapter_optimization_config(adapter)
    assert sorted(config.objective.metric_names) == ["f1", "f2"]
    assert compat.adapter_optimization_config(None) is None


def test_acquisition_objective_weights_and_subset(run: Captured) -> None:
    acq = run.acquisitions[-1]
    weights = compat.acquisition_objective_weights(acq)
    subset = compat.acquisition_subset_indices(acq)
    assert isinstance(weights, torch.Tensor) and weights.ndim == 2 and weights.shape[0] == 2
    # the weights over the subset model's outputs are the public (full) weights' columns of the subset
    full = acq.objective_weights
    assert subset is None or torch.equal(full[:, subset], weights)
    assert acq.objective_thresholds is require(acq, "_objective_thresholds", "Acquisition")
    assert list(acq.surrogate.outcomes) == require(acq.surrogate, "_outcomes", "Surrogate")


def test_ax_takes_the_reference_point_from_the_botorch_options(run: Captured) -> None:
    """`NasctlAcquisition` measures on the raw scale by passing `ref_point` in
    `botorch_acqf_options` (instead of writing `_objective_thresholds`)."""
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    acq = run.acquisitions[-1]
    ref = acq.objective_thresholds - 0.25
    acqf = acq._construct_botorch_acquisition(
        botorch_acqf_class=qLogNoisyExpectedHypervolumeImprovement,
        botorch_acqf_options={"ref_point": ref}, model=require(acq, "_model", "Acquisition"),
    )
    assert torch.equal(acqf.ref_point, ref)
    assert not torch.equal(acq.objective_thresholds, ref)  # Ax's own thresholds are untouched


# --- BoTorch: acquisition internals --------------------------------------------------


def _model(m: int = 2, n: int = 6, seed: int = 0) -> tuple[Any, torch.Tensor]:
    from botorch.models import SingleTaskGP

    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=g, dtype=torch.float64)
    y = torch.stack([torch.sin(3 * x[:, 0] + k) - x[:, 1] for k in range(m)], -1)
    return SingleTaskGP(x, y), x


def test_prune_inferior_shared_processing() -> None:
    model, x = _model()
    max_points, obj_vals, infeasible = compat.prune_inferior_shared_processing(
        model=model, X=x, is_moo=True, objective=None, constraints=None, num_samples=16, max_frac=1.0,
        marginalize_dim=None,
    )
    assert max_points == x.shape[0]
    assert obj_vals.shape == (16, x.shape[0], 2) and infeasible.shape == (16, x.shape[0])


def test_acquisition_baseline_and_samples() -> None:
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.sampling.normal import SobolQMCNormalSampler

    model, x = _model()
    pending = torch.rand(2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    acqf = qLogNoisyExpectedHypervolumeImprovement(
        model=model, ref_point=[-2.0, -2.0], X_baseline=x, X_pending=pending, prune_baseline=False,
        sampler=SobolQMCNormalSampler(sample_shape=torch.Size([8]), seed=0),
    )
    assert torch.equal(compat.observed_baseline(acqf), x)  # the public X_baseline includes the pending points
    assert acqf.X_baseline.shape[-2] == x.shape[-2] + 2
    X = torch.rand(3, 1, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    want, _ = acqf._compute_posterior_samples_and_concat_pending(X)  # BoTorch's own path
    posterior = model.posterior(torch.cat([acqf.X_baseline.expand(3, -1, -1), X], dim=-2))
    compat.set_sampler(acqf, q_in=1, posterior=posterior)
    got = compat.f_X_samples(acqf, posterior=posterior, q_in=1)
    assert torch.equal(got, want)


def test_model_batch_shape_is_the_input_batch_shape() -> None:
    """`jointpost` reads the public `batch_shape` where it read `_input_batch_shape`."""
    from botorch.models.gp_regression_mixed import MixedSingleTaskGP

    x = torch.tensor([[0.1, 0.0], [0.5, 1.0], [0.9, 2.0], [0.3, 1.0]], dtype=torch.float64)
    y = torch.stack([x[:, 0], x[:, 0] ** 2], -1)
    model = MixedSingleTaskGP(x, y, cat_dims=[1])
    assert model.batch_shape == require(model, "_input_batch_shape", "MixedSingleTaskGP") == torch.Size([])


def test_kernel_lengthscale_setter_is_gpytorchs_private_setter() -> None:
    """`catgp` sets length scales through the public property, which is `_set_lengthscale`."""
    from gpytorch.kernels import RBFKernel

    a, b = RBFKernel(), RBFKernel()
    value = torch.tensor([[0.7]])
    a.lengthscale = value
    require(b, "_set_lengthscale", "gpytorch.kernels.Kernel")(value)
    assert torch.equal(a.raw_lengthscale, b.raw_lengthscale) and torch.allclose(a.lengthscale, value)


# --- BoTorch: box decompositions ----------------------------------------------------------


def _partitioning(seed: int) -> Any:
    from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning

    y = torch.rand(12, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return FastNondominatedPartitioning(ref_point=torch.zeros(3, dtype=torch.float64), Y=y)


def test_partitionings_keep_their_bounds_where_nasctl_reads_and_writes_them() -> None:
    from botorch.utils.multi_objective.box_decompositions.non_dominated import FastNondominatedPartitioning

    p, other = _partitioning(0), _partitioning(1)
    U = compat.local_upper_bounds(p)
    assert U is require(p, "_buffers", "torch.nn.Module")["_U"]  # a buffer, as nasctl registers it
    Z = require(p, "_Z", "FastPartitioning")
    assert U.shape[-2] == Z.shape[-3] and Z.shape[-2:] == (3, 3)
    for name in ("_U2", "_Z2"):  # what BoTorch's `_get_partitioning` leaves, as nasctl's does
        require(p, name, "FastNondominatedPartitioning")
    # the front and reference point nasctl reads publicly are BoTorch's negated ones, exactly
    assert torch.equal(-p.pareto_Y, require(p, "_neg_pareto_Y", "BoxDecomposition"))
    assert torch.equal(-p.ref_point, require(p, "_neg_ref_point", "BoxDecomposition"))
    # BoTorch decomposes from the local upper bounds where nasctl stores them
    compat.set_local_upper_bounds(p, compat.local_upper_bounds(other).clone(), require(other, "_Z", "").clone())
    FastNondominatedPartitioning._get_partitioning(p)
    assert torch.equal(p.hypercell_bounds, other.hypercell_bounds)
    compat.set_dual_local_upper_bounds(p, U, Z)
    assert p._U2 is U and p._Z2 is Z


# --- BoTorch: the fused kernel (a fresh process: BoTorch loads it once per process) ------


def test_botorch_loads_the_prebuilt_kernel_by_its_module_name() -> None:
    code = (
        "import sys, torch\n"
        "from nasctl.orchestration.control import prepare_orchestrator_process\n"
        "prepare_orchestrator_process()\n"
        "from nasctl.optimizer import compat, fused_kernel\n"
        "path = list(sys.path)\n"
        "assert fused_kernel.build_extension(), 'no kernel could be built'\n"
        "assert fused_kernel.use_prebuilt_extension()\n"
        "assert compat.load_fused_kernel()\n"
        "kernel = compat.fused_kernel()\n"
        "assert kernel is sys.modules[compat.FUSED_KERNEL_MODULE], kernel\n"
        "assert sys.path == path\n"
        "g = torch.Generator().manual_seed(0)\n"
        "obj = torch.rand(4, 1, 1, 2, dtype=torch.float64, generator=g)\n"
        "lower = torch.zeros(3, 2, dtype=torch.float64)\n"
        "upper = torch.ones(3, 2, dtype=torch.float64)\n"
        "out = compat.fused_log_areas(obj, lower, upper, 1e-6, 1e-2)\n"
        "assert out.shape == (4, 3, 1) and torch.isfinite(out).all(), out.shape\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
