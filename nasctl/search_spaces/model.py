"""Trial entry point for user models (`trial.model: "pkg.module:build"`).

Run as `python -m nasctl.search_spaces.model --model pkg.module:build --dataset
mnist1d --width 32 ...`. The trainer's own parameters (learning rate, batch
size, epochs, precision, ...; see nasctl.search_spaces.trainer) are consumed
here; every other `--name value` goes into the dict passed to `build(params)`,
with values parsed as int, float, True/False or left as strings. The dict also
holds `input_shape` (one example's shape, e.g. [1, 40]) and `num_classes`, so
one build function can serve several datasets. `build` must return a
`torch.nn.Module` mapping (N, *input_shape) inputs to (N, num_classes) logits.
The module is imported from PYTHONPATH (nasctl puts the spec's folder there).
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING, Any

from nasctl.errors import TrialSetupError
from nasctl.search_spaces.trainer import add_trainer_arguments, check_trainer_arguments, exit_process, run_trial

if TYPE_CHECKING:
    import torch

    from nasctl.search_spaces.data import ArrayDataset


def parse_value(text: str) -> bool | int | float | str:
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, Any]]:
    p = argparse.ArgumentParser(prog="nasctl.search_spaces.model", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="pkg.module:function returning an nn.Module")
    add_trainer_arguments(p)
    args, rest = p.parse_known_args(argv)
    check_trainer_arguments(p, args)
    params: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        key = rest[i]
        if not key.startswith("--") or i + 1 >= len(rest):
            p.error(f"expected --name value pairs, got {' '.join(rest[i:i + 2])!r}")
        params[key[2:]] = parse_value(rest[i + 1])
        i += 2
    return args, params


def load_builder(target: str) -> Any:
    """Import `pkg.module:function`.

    Raises:
        TrialSetupError: malformed target, module not importable, or no such callable.
    """
    module_name, _, func = target.partition(":")
    if not module_name or not func:
        raise TrialSetupError(f"--model {target!r} must look like pkg.module:function", "fix trial.model")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise TrialSetupError(f"cannot import {module_name} for --model {target}: {e}", "check trial.model and PYTHONPATH") from e
    fn = getattr(module, func, None)
    if not callable(fn):
        raise TrialSetupError(f"module {module_name} has no function {func!r}", "fix trial.model")
    return fn


def main(argv: list[str] | None = None) -> int:
    args, params = parse_args(argv)

    def build(data: ArrayDataset) -> torch.nn.Module:
        import torch

        fn = load_builder(args.model)
        net = fn({**params, "input_shape": list(data.shape), "num_classes": data.num_classes})
        if not isinstance(net, torch.nn.Module):
            raise TrialSetupError(
                f"{args.model} returned {type(net).__name__}, not a torch.nn.Module", "return the model from build()"
            )
        return net

    return run_trial(args, build, args.model)


if __name__ == "__main__":
    exit_process(main())
