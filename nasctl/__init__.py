"""nasctl: multi-objective neural architecture search and experiment orchestration.

The Python API (documented in docs/python-api.md)::

    import nasctl

    exp = nasctl.run("spec.yaml", max_trials=20)   # blocks until the budget is spent
    exp.trials_dataframe()
    exp.pareto()
    nasctl.load("digits-mlp").status()
    nasctl.list_experiments()

`import nasctl` stays light: the API (and everything it needs) is imported on
first use of one of its names.
"""

from __future__ import annotations

__version__ = "0.1.0"

# `typing` is not imported at run time (a few ms); type checkers treat this name as True
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nasctl.api import Experiment, ExperimentInfo, Trial, list_experiments, load, resume, run
    from nasctl.errors import NasctlError

_LAZY = {
    "Experiment": "nasctl.api",
    "ExperimentInfo": "nasctl.api",
    "Trial": "nasctl.api",
    "list_experiments": "nasctl.api",
    "load": "nasctl.api",
    "resume": "nasctl.api",
    "run": "nasctl.api",
    "NasctlError": "nasctl.errors",
}

__all__ = ["Experiment", "ExperimentInfo", "NasctlError", "Trial", "__version__", "list_experiments", "load",
           "resume", "run"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nasctl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
