"""Everything that models and proposes: nasctl's interface to Ax and BoTorch.

Modules:

- `base`: the `Optimizer` protocol the scheduler loop sees and the values
  that cross it (`Candidate`, `RestoredTrial`); imports neither Ax nor BoTorch;
- `ax_optimizer`: `AxOptimizer`, the in-memory Ax client the candidate
  generator asks for proposals and tells results (`multifidelity`: its
  multi-fidelity subclass);
- `methods`: `optimizer.method` and the `auto` rule (imports neither Ax nor
  BoTorch); `strategies`: the Ax generation strategy of each method;
- `acquisition`: nasctl's Ax `Acquisition` and qLogNEHVI subclasses, with the
  speed-ups in `singleq`, `boxdecomp`, `nondominated`, `jointpost`;
- `catgp`, `gpfit`, `logscale`: the categorical GP, warm-started GP fits and
  log-scale modelling; `novelty`: no repeated proposals while nothing is
  feasible; `diagnostics`: leave-one-out cross-validation for the dashboard;
- `compat`: every read of an Ax or BoTorch internal, one function each;
  `quiet`: the libraries quiet during nasctl's calls only; `fused_kernel`:
  BoTorch's compiled qLogNEHVI kernel, built outside the orchestrator.

This is the only package that imports Ax and BoTorch. It changes their
behaviour only through their extension points (subclasses and arguments
handed to the generation step, Ax's fit dispatcher for nasctl's own model
class), never by assigning to their modules or classes. Importing it checks
that the installed Ax and BoTorch are the versions it was built against
(`SUPPORTED`): BoTorch's private methods that the subclasses override change
between releases.
"""

from __future__ import annotations

from importlib import metadata

from nasctl.errors import UnsupportedVersionError

SUPPORTED: dict[str, str] = {"ax-platform": "1.3.1", "botorch": "0.18.1"}
"""The Ax and BoTorch releases nasctl's optimizer supports (pyproject.toml pins the same)."""


def check_versions(found: dict[str, str | None] | None = None) -> None:
    """Raise `UnsupportedVersionError` unless the installed Ax and BoTorch are the
    `SUPPORTED` releases. `found` (distribution -> version, None when not
    installed) replaces what is installed, for tests."""
    if found is None:
        found = {}
        for dist in SUPPORTED:
            try:
                found[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                found[dist] = None
    wrong = {d: v for d, v in found.items() if d in SUPPORTED and v != SUPPORTED[d]}
    if wrong:
        have = ", ".join(f"{d} {v or 'not installed'}" for d, v in sorted(wrong.items()))
        want = ", ".join(f"{d}=={SUPPORTED[d]}" for d in sorted(wrong))
        raise UnsupportedVersionError(
            f"nasctl's optimizer supports {want}; found {have}",
            f"pip install {' '.join(repr(f'{d}=={SUPPORTED[d]}') for d in sorted(wrong))}",
        )


check_versions()
