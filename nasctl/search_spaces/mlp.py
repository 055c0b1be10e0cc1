"""Trial entry point of the `mlp_digits` search space.

Run as `python -m nasctl.search_spaces.mlp --hidden_size_1 64 ...`. A
two-hidden-layer MLP (the "Multi-objective NAS with Ax" tutorial's model) on
scikit-learn's 8x8 digits by default; `--dataset` picks any other dataset of
nasctl.search_spaces.data (inputs are flattened). Training, logging and cost
measurement are the shared trainer's (nasctl.search_spaces.trainer).
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from nasctl.search_spaces.trainer import add_trainer_arguments, check_trainer_arguments, exit_process, run_trial

if TYPE_CHECKING:
    import torch

    from nasctl.search_spaces.data import ArrayDataset


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="nasctl.search_spaces.mlp", description=__doc__.splitlines()[0])
    p.add_argument("--hidden_size_1", type=int, default=64)
    p.add_argument("--hidden_size_2", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--activation", choices=["relu", "gelu", "tanh"], default="relu")
    add_trainer_arguments(p)
    args = p.parse_args(argv)
    check_trainer_arguments(p, args)
    for name in ("hidden_size_1", "hidden_size_2"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if not 0.0 <= args.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    return args


def build_model(args: argparse.Namespace, in_features: int = 64, num_classes: int = 10) -> torch.nn.Module:
    import torch.nn as nn

    act = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}[args.activation]
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_features, args.hidden_size_1),
        act(),
        nn.Dropout(args.dropout),
        nn.Linear(args.hidden_size_1, args.hidden_size_2),
        act(),
        nn.Dropout(args.dropout),
        nn.Linear(args.hidden_size_2, num_classes),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def build(data: ArrayDataset) -> torch.nn.Module:
        return build_model(args, math.prod(data.shape), data.num_classes)

    return run_trial(args, build, "mlp_digits")


if __name__ == "__main__":
    exit_process(main())
