"""The categorical method's GP: BoTorch's MixedSingleTaskGP with a length-scale prior.

BoTorch's categorical kernel, k(x, x') = exp(-mean_i [x_i != x'_i] / l_i), has
no prior on its length scales. With a few dozen observations the
maximum-likelihood length scales run to extremes and the GP becomes
confidently wrong: fitted to 20 random NAS-Bench-201 cells, the model
predicted 2,000 held-out cells with a median negative log predictive density
of 12.5 (validation error), 7.4 (model size) and 4.0 (latency), where a
model that ignored the inputs would score about 1.4. A log-normal prior,
median length scale 2 (one changed choice of six keeps 0.92 of the
correlation), brought those to 1.7, 1.2 and 1.3 and raised the rank
correlation of its predictions with the truth from 0.21 / 0.42 / 0.48 to
0.43 / 0.71 / 0.66 (medians and means over 6-8 random training sets; see
docs/benchmarks.md for the optimisation runs).
"""

from __future__ import annotations

import inspect
from typing import Any

CATEGORICAL_LENGTHSCALE_PRIOR = (0.7, 1.0)
"""(loc, scale) of the log-normal prior on the categorical length scales
(median e^0.7 = 2.0, mode e^-0.3 = 0.74)."""


def _lengthscale(kernel: Any) -> Any:
    return kernel.lengthscale


def _set_lengthscale(kernel: Any, value: Any) -> None:
    kernel.lengthscale = value  # gpytorch's property setter (`Kernel._set_lengthscale`)


def model_class() -> type:
    """`CategoricalGP`: imported lazily, so that `methods` stays free of BoTorch."""
    import torch
    from botorch.models.gp_regression_mixed import MixedSingleTaskGP
    from botorch.models.kernels.categorical import CategoricalKernel
    from gpytorch.priors import LogNormalPrior

    global _CLASS
    if _CLASS is not None:
        return _CLASS

    class CategoricalGP(MixedSingleTaskGP):
        """MixedSingleTaskGP whose categorical kernels carry a log-normal length-scale prior."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            loc, scale = CATEGORICAL_LENGTHSCALE_PRIOR
            for kernel in self.covar_module.modules():
                if isinstance(kernel, CategoricalKernel):
                    like = {"dtype": kernel.raw_lengthscale.dtype, "device": kernel.raw_lengthscale.device}
                    prior = LogNormalPrior(torch.tensor(loc, **like), torch.tensor(scale, **like))
                    kernel.register_prior("lengthscale_prior", prior, _lengthscale, _set_lengthscale)

    # Ax passes only the arguments that the class's signature names
    CategoricalGP.__init__.__signature__ = inspect.signature(MixedSingleTaskGP.__init__)  # type: ignore[attr-defined]
    CategoricalGP.__qualname__ = "CategoricalGP"  # pickled by reference: `catgp.CategoricalGP`, below
    _CLASS = CategoricalGP
    return _CLASS


_CLASS: type | None = None


def __getattr__(name: str) -> Any:
    """`catgp.CategoricalGP` (what pickle looks up) builds the class on first use."""
    if name == "CategoricalGP":
        return model_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
