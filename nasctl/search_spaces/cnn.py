"""Trial entry point of the `cnn` search space.

Run as `python -m nasctl.search_spaces.cnn --num_blocks 2 --channels_1 16 ...`.
A stack of `num_blocks` (1-4) conv blocks, then a classifier head:

    block k: Conv(channels_k, kernel_size_k, padding "same") -> ReLU -> Pool(2)
    head:    Flatten -> Linear(classifier_width) -> ReLU -> Dropout -> Linear(classes)

`channels_k` and `kernel_size_k` exist only for k <= num_blocks (declare them
with `when: {num_blocks: [...]}` so inactive ones never reach the trial). The
convolutions are 2-D for image datasets (C x H x W) and 1-D for signals
(C x L), chosen by the dataset's shape. `pooling` is max or avg; a block whose
input is already 1 wide is not pooled. Training, logging and cost measurement
are the shared trainer's (nasctl.search_spaces.trainer).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from nasctl.search_spaces.trainer import add_trainer_arguments, check_trainer_arguments, exit_process, run_trial

if TYPE_CHECKING:
    import torch

    from nasctl.search_spaces.data import ArrayDataset

MAX_BLOCKS = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="nasctl.search_spaces.cnn", description=__doc__.splitlines()[0])
    p.add_argument("--num_blocks", type=int, default=2)
    for k in range(1, MAX_BLOCKS + 1):
        p.add_argument(f"--channels_{k}", type=int, default=None)
        p.add_argument(f"--kernel_size_{k}", type=int, default=None)
    p.add_argument("--pooling", choices=["max", "avg"], default="max")
    p.add_argument("--classifier_width", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.0)
    add_trainer_arguments(p, dataset="mnist1d")
    args = p.parse_args(argv)
    check_trainer_arguments(p, args)
    if not 1 <= args.num_blocks <= MAX_BLOCKS:
        p.error(f"--num_blocks must be in 1..{MAX_BLOCKS}")
    for k in range(1, MAX_BLOCKS + 1):
        for name, default in ((f"channels_{k}", 8 * 2 ** (k - 1)), (f"kernel_size_{k}", 3)):
            value = getattr(args, name)
            if k > args.num_blocks:
                if value is not None:  # a spec without `when:` tunes a parameter that does nothing
                    print(f"warning: --{name} ignored: num_blocks is {args.num_blocks}", file=sys.stderr)
                setattr(args, name, None)
            elif value is None:
                setattr(args, name, default)
            elif value < 1:
                p.error(f"--{name} must be >= 1")
    if args.classifier_width < 1:
        p.error("--classifier_width must be >= 1")
    if not 0.0 <= args.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    return args


def build_model(args: argparse.Namespace, shape: tuple[int, ...], num_classes: int) -> torch.nn.Module:
    """The CNN for inputs of `shape` ((C, L) -> Conv1d, (C, H, W) -> Conv2d)."""
    import torch.nn as nn

    from nasctl.errors import TrialSetupError

    if len(shape) not in (2, 3):
        raise TrialSetupError(f"the cnn space needs C x L or C x H x W inputs, got {shape}", "pick another dataset")
    two_d = len(shape) == 3
    conv = nn.Conv2d if two_d else nn.Conv1d
    pool = {("max", True): nn.MaxPool2d, ("avg", True): nn.AvgPool2d,
            ("max", False): nn.MaxPool1d, ("avg", False): nn.AvgPool1d}[(args.pooling, two_d)]
    layers: list[nn.Module] = []
    channels, spatial = shape[0], list(shape[1:])
    for k in range(1, args.num_blocks + 1):
        out = getattr(args, f"channels_{k}")
        layers += [conv(channels, out, getattr(args, f"kernel_size_{k}"), padding="same"), nn.ReLU()]
        if min(spatial) >= 2:
            layers.append(pool(2))
            spatial = [s // 2 for s in spatial]
        channels = out
    flat = channels
    for s in spatial:
        flat *= s
    layers += [
        nn.Flatten(),
        nn.Linear(flat, args.classifier_width),
        nn.ReLU(),
        nn.Dropout(args.dropout),
        nn.Linear(args.classifier_width, num_classes),
    ]
    return nn.Sequential(*layers)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def build(data: ArrayDataset) -> torch.nn.Module:
        return build_model(args, data.shape, data.num_classes)

    return run_trial(args, build, "cnn")


if __name__ == "__main__":
    exit_process(main())
