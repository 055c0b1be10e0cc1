"""Trial entry point of `trial.function`: a Python function as the trial.

`python -m nasctl.search_spaces.function pkg.module:fn --parameters '{"x": 0.5}'`
imports `fn`, calls it with the trial's active parameters (and `trial.args`) as
one dict, and logs the metrics it returns (a mapping of names to numbers) at
step 0 in NASCTL_LOG_DIR, so the orchestrator reads them like any trial's.

The same `run_function` runs inside the orchestrator's process under the
`inprocess` runner: one code path for both, only the process differs. Use it
for cheap objectives (analytic test problems, tabular benchmarks, surrogate
models); anything that trains belongs in a separate process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from nasctl.errors import BadInputError

FUNCTION_ENTRY_MODULE = "nasctl.search_spaces.function"


def load_function(target: str) -> Callable[[dict[str, Any]], Mapping[str, Any]]:
    """Import `pkg.module:fn`.

    Raises:
        BadInputError: the module cannot be imported or has no such callable.
    """
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInputError(
            f"trial.function {target}: cannot import {module_name}: {e}",
            "put the module next to the spec file or on PYTHONPATH",
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise BadInputError(f"trial.function {target}: {module_name} has no function {attr!r}",
                            "check the name after ':'")
    return fn  # type: ignore[no-any-return]


def call_function(target: str, parameters: Mapping[str, Any]) -> dict[str, float]:
    """Call the function and return its metrics as floats.

    Raises:
        BadInputError: the function is missing or returned something other than
            a mapping of metric names to numbers.
    """
    out = load_function(target)(dict(parameters))
    if not isinstance(out, Mapping) or not out:
        raise BadInputError(f"trial.function {target} returned {type(out).__name__}",
                            "return a dict of metric names to numbers")
    values: dict[str, float] = {}
    for k, v in out.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)):
            raise BadInputError(f"trial.function {target} returned {k!r}: {v!r}",
                                "return a dict of metric names to numbers")
        values[k] = float(v)
    return values


def run_function(target: str, parameters: Mapping[str, Any], log_dir: str, step: int = 0) -> dict[str, float]:
    """Call the function and log what it returns at `step` (0 for a whole trial).

    Raises:
        BadInputError: the function is missing or returned something other than
            a mapping of metric names to numbers.
    """
    from nasctl.metrics.tensorboard import write_scalars

    values = call_function(target, parameters)
    write_scalars(log_dir, values, step=step)
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=FUNCTION_ENTRY_MODULE, description=__doc__.splitlines()[0])
    p.add_argument("target", help="pkg.module:function")
    p.add_argument("--parameters", default="{}", help="the trial's parameters as a JSON object")
    args = p.parse_args(argv)
    try:
        args.parameters = json.loads(args.parameters)
    except json.JSONDecodeError as e:
        p.error(f"--parameters is not JSON: {e}")
    if not isinstance(args.parameters, dict):
        p.error("--parameters must be a JSON object")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log_dir = os.environ.get("NASCTL_LOG_DIR", "tb_logs")
    try:
        values = run_function(args.target, args.parameters, log_dir)
    except BadInputError as e:
        print(f"error: {e.message}; {e.hint}", file=sys.stderr)
        return 2
    print(", ".join(f"{k}={v:.6g}" if math.isfinite(v) else f"{k}={v}" for k, v in values.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
