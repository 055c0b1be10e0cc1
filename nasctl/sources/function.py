"""`trial.function: pkg.module:fn`: a Python function as the trial.

The trial runs `python -m nasctl.search_spaces.function pkg.module:fn
--parameters JSON` (or in the orchestrator's process under the `inprocess`
runner), with the spec's folder first on PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasctl.errors import SpecError
from nasctl.runners.base import JobRequest
from nasctl.search_spaces.function import FUNCTION_ENTRY_MODULE
from nasctl.sources.base import TARGET_RE, TrialLaunch, TrialSource, python_request

if TYPE_CHECKING:
    from nasctl.spec import TrialSpec


class FunctionSource(TrialSource):
    """A function of one dict of parameters that returns its metrics."""

    key = "function"
    description = "a Python function pkg.module:fn"

    def validate(self, trial: TrialSpec) -> None:
        assert trial.function is not None
        if not TARGET_RE.match(trial.function):
            raise ValueError(f"trial.function {trial.function!r} must look like 'package.module:function'")

    def resolve(self, trial: TrialSpec, folder: Path) -> dict[str, Any]:
        """The spec's folder becomes `code_dir`, after the module was found there or on sys.path.

        Raises:
            SpecError: the module cannot be found.
        """
        assert trial.function is not None
        code_dir = str(folder.resolve())
        check_importable(trial.function.partition(":")[0], code_dir, "trial.function")
        return {"code_dir": code_dir}

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        # one JSON argument keeps every value's type exact (a choice "1" stays a string)
        args = ["-m", FUNCTION_ENTRY_MODULE, str(trial.function), "--parameters", json.dumps(dict(launch.arguments))]
        return python_request(self, trial, launch, args, trial.code_dir)


def check_importable(module: str, code_dir: str, key: str) -> None:
    """The module can be found (in `code_dir` or on sys.path) without importing it.

    Raises:
        SpecError: it cannot.
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
