"""`trial.function: pkg.module:fn`: a Python function as the trial.

The trial runs `python -m nasctl.search_spaces.function pkg.module:fn
--parameters JSON` (or in the orchestrator's process under the `inprocess`
runner), with the spec's folder (`trial.code_dir`) first on PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import TYPE_CHECKING

from nasctl.errors import SpecError
from nasctl.runners.base import JobRequest
from nasctl.search_spaces.function import FUNCTION_ENTRY_MODULE
from nasctl.sources.base import TrialLaunch, TrialSource, python_request

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


class FunctionSource(TrialSource):
    """A function of one dict of parameters that returns its metrics."""

    key = "function"

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """The function's module can be found next to the spec (when the spec was
        read as a file: `trial.code_dir` is set) or on sys.path, without importing it.

        Raises:
            SpecError: the module is not found.
        """
        trial = spec.trial
        assert trial.function is not None
        if trial.code_dir is not None:
            check_importable(trial.function.partition(":")[0], trial.code_dir, "trial.function")

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        # one JSON argument keeps every value's type exact (a choice "1" stays a string)
        args = ["-m", FUNCTION_ENTRY_MODULE, str(trial.function), "--parameters", json.dumps(dict(launch.arguments))]
        return python_request(self, trial, launch, args, trial.code_dir)


def check_importable(module: str, code_dir: str, key: str) -> None:
    """The module can be found (next to the spec or on sys.path) without importing it.

    Raises:
        SpecError: it is not found; the message names `key`.
    """
    sys.path.insert(0, code_dir)
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    finally:
        sys.path.remove(code_dir)
    if found is None:
        raise SpecError(f"{key}: module {module!r} was not found next to the spec ({code_dir}) or on PYTHONPATH",
                        "check the module name, or install the package that provides it")
