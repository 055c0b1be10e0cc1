"""The categorical method's GP: a length-scale prior on every categorical kernel,
better held-out predictions than BoTorch's prior-free model from few points,
and it is the model the categorical method fits."""

from __future__ import annotations

import math

import pytest
import torch

from nasctl.optimizer import catgp

from tests.helpers.optimizer import CELL, make_spec, run


def _cell_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n cells of 6 edges x 5 ops and a cost that adds up per edge, with one
    interaction (two adjacent 'conv' edges) - the shape of a NAS objective."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.tensor([0.0, 0.1, 0.6, 1.0, 0.2], dtype=torch.float64)
    x = torch.randint(0, 5, (n, 6), generator=g).to(torch.float64)
    y = weights[x.long()].sum(-1) + 0.5 * ((x[:, 0] == 3) & (x[:, 1] == 3)).to(torch.float64)
    return x, y.unsqueeze(-1)


def _fit(cls: type, x: torch.Tensor, y: torch.Tensor) -> object:
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model = cls(x, y, cat_dims=list(range(x.shape[-1])))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def _categorical_kernels(model: object) -> list[object]:
    from botorch.models.kernels.categorical import CategoricalKernel

    return [k for k in model.covar_module.modules() if isinstance(k, CategoricalKernel)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("mixed", [False, True])
def test_every_categorical_kernel_gets_the_prior(mixed: bool) -> None:
    from gpytorch.priors import LogNormalPrior

    x, y = _cell_data(12, 0)
    if mixed:  # a continuous column too: BoTorch's sum + product kernel, two categorical kernels
        x = torch.cat([x, torch.linspace(0, 1, 12, dtype=torch.float64).unsqueeze(-1)], -1)
    model = catgp.model_class()(x, y, cat_dims=list(range(6)))
    kernels = _categorical_kernels(model)
    assert len(kernels) == (2 if mixed else 1)
    loc, scale = catgp.CATEGORICAL_LENGTHSCALE_PRIOR
    for k in kernels:
        prior = k.lengthscale_prior  # type: ignore[attr-defined]
        assert isinstance(prior, LogNormalPrior)
        assert prior.loc.dtype == torch.float64  # the model's dtype, not torch's default
        assert float(prior.loc) == loc and float(prior.scale) == scale
    # the prior takes part in the marginal likelihood (gpytorch adds every registered prior)
    on_categorical = [name for name, module, *_ in model.named_priors() if module in kernels]
    assert len(on_categorical) == len(kernels)


def test_prior_predicts_held_out_cells_better_than_the_prior_free_model() -> None:
    """From 20 observed cells, the prior-free model is confidently wrong about
    held-out ones; the prior keeps its predictions calibrated and better ranked."""
    from botorch.models.gp_regression_mixed import MixedSingleTaskGP
    from scipy.stats import spearmanr

    x_test, y_test = _cell_data(1000, 99)
    scores: dict[str, list[tuple[float, float]]] = {"plain": [], "prior": []}
    for seed in range(4):
        x, y = _cell_data(20, seed)
        for name, cls in (("plain", MixedSingleTaskGP), ("prior", catgp.model_class())):
            model = _fit(cls, x, y)
            model.eval()  # type: ignore[attr-defined]
            with torch.no_grad():
                post = model.posterior(x_test)  # type: ignore[attr-defined]
            mu, var = post.mean.squeeze(-1), post.variance.squeeze(-1)
            yt = y_test.squeeze(-1)
            nlpd = float((0.5 * torch.log(2 * math.pi * var) + 0.5 * (yt - mu) ** 2 / var).mean())
            rho = float(spearmanr(mu.numpy(), yt.numpy()).statistic)
            scores[name].append((nlpd, rho))
    mean = {k: [sum(s[i] for s in v) / len(v) for i in range(2)] for k, v in scores.items()}
    assert mean["prior"][0] < mean["plain"][0]  # log predictive density: better
    assert mean["prior"][1] > mean["plain"][1]  # rank correlation: better


def test_a_fitted_model_pickles_and_predicts_the_same() -> None:
    import pickle

    x, y = _cell_data(12, 1)
    model = _fit(catgp.model_class(), x, y)
    again = pickle.loads(pickle.dumps(model))
    assert type(again) is catgp.model_class()
    model.eval(), again.eval()  # type: ignore[attr-defined]
    with torch.no_grad():
        assert torch.equal(model.posterior(x).mean, again.posterior(x).mean)  # type: ignore[attr-defined]


def test_the_categorical_method_fits_this_model() -> None:
    from nasctl.optimizer.ax_optimizer import AxOptimizer

    opt = AxOptimizer(make_spec(CELL, method="categorical"))
    run(opt, 5)
    assert opt.fits.fits >= 1
    assert {name for name, _ in opt.fits.entries} == {"CategoricalGP"}


@pytest.mark.parametrize(("method", "model"), [
    ("categorical", "CategoricalGP (the categorical method's model)"),
    ("botorch", "SingleTaskGP (the botorch method's model)"),
    ("sobol", "SingleTaskGP (the botorch method's model; sobol: it has no model)"),
])
def test_the_model_diagnostics_judge_the_methods_own_model(method: str, model: str) -> None:
    """`nasctl web`/`report` cross-validate the model that the experiment's method
    fits: for a cell space searched by the categorical method, the GP with the
    prior over categorical features, not Ax's default GP over one-hot inputs;
    where the method has no model, the caption says whose model stands in."""
    import random
    from datetime import datetime, timezone

    from nasctl.optimizer.diagnostics import loo_cross_validation
    from nasctl.types import TrialRecord, TrialStatus
    from tests.helpers.optimizer import OPS, outcome

    rng = random.Random(4)
    now = datetime.now(timezone.utc)
    cells = [{f"op{i}": rng.choice(OPS) for i in range(4)} for _ in range(14)]
    trials = [TrialRecord(id=k, experiment_id=1, index=k, parameters=c, status=TrialStatus.COMPLETED,
                          generation_method="Sobol", created_at=now, values=outcome(c)) for k, c in enumerate(cells)]
    result = loo_cross_validation(make_spec(CELL, method=method), trials)
    assert result["model"] == model
    assert [r["trial_index"] for r in result["metrics"]["err"]] == list(range(14))
