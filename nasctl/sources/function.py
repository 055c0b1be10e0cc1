"""`trial.function: pkg.module:fn`: a Python function as the trial.

The trial runs `python -m nasctl.search_spaces.function pkg.module:fn
--parameters JSON` (or in the orchestrator's process under the `inprocess`
runner), with the spec's folder (`trial.code_dir`) first on PYTHONPATH.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from nasctl.runners.base import JobRequest
from nasctl.search_spaces.function import FUNCTION_ENTRY_MODULE
from nasctl.sources.base import TrialLaunch, TrialSource, python_request

if TYPE_CHECKING:
    from nasctl.spec import TrialSpec


class FunctionSource(TrialSource):
    """A function of one dict of parameters that returns its metrics."""

    key = "function"

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        # one JSON argument keeps every value's type exact (a choice "1" stays a string)
        args = ["-m", FUNCTION_ENTRY_MODULE, str(trial.function), "--parameters", json.dumps(dict(launch.arguments))]
        return python_request(self, trial, launch, args, trial.code_dir)
