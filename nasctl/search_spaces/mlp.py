"""Trial entry point of the `mlp_digits` search space.

Run as `python -m nasctl.search_spaces.mlp --hidden_size_1 64 ...`. It trains a
two-hidden-layer MLP on scikit-learn's 8x8 digits with Lightning (on CUDA when
present) and writes TensorBoard scalars to NASCTL_LOG_DIR (or --log_dir):
`train_loss`, `val_loss` and `val_acc` per epoch, then `val_acc`, `num_params`,
`model_bytes` and `latency_ms` together at the final step, so one step holds
every objective.

This follows the trial contract any user script can follow too.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import torch


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="nasctl.search_spaces.mlp", description=__doc__.splitlines()[0])
    p.add_argument("--hidden_size_1", type=int, default=64)
    p.add_argument("--hidden_size_2", type=int, default=64)
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--activation", choices=["relu", "gelu", "tanh"], default="relu")
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--latency_batch_size", type=int, default=1)
    p.add_argument("--latency_repeats", type=int, default=50)
    p.add_argument("--log_dir", default=os.environ.get("NASCTL_LOG_DIR", "tb_logs"))
    args = p.parse_args(argv)
    for name in ("hidden_size_1", "hidden_size_2", "batch_size", "epochs", "latency_batch_size", "latency_repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if not 0.0 <= args.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    return args


def build_model(args: argparse.Namespace) -> torch.nn.Module:
    import torch.nn as nn

    act = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}[args.activation]
    return nn.Sequential(
        nn.Linear(64, args.hidden_size_1),
        act(),
        nn.Dropout(args.dropout),
        nn.Linear(args.hidden_size_1, args.hidden_size_2),
        act(),
        nn.Dropout(args.dropout),
        nn.Linear(args.hidden_size_2, 10),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import pytorch_lightning as pl
    import torch
    import torch.nn.functional as F
    from pytorch_lightning.loggers import TensorBoardLogger
    from torch.utils.data import DataLoader, TensorDataset

    from nasctl.metrics.latency import count_parameters, measure_latency, model_bytes
    from nasctl.search_spaces.data import load_digits, train_val_split

    pl.seed_everything(args.seed, verbose=False)
    X, y = load_digits()
    Xtr, ytr, Xva, yva = train_val_split(X, y)
    train = TensorDataset(torch.from_numpy(Xtr), torch.from_numpy(ytr))
    val = TensorDataset(torch.from_numpy(Xva), torch.from_numpy(yva))

    class DigitsMLP(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = build_model(args)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
            x, t = batch
            loss = F.cross_entropy(self(x), t)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
            x, t = batch
            logits = self(x)
            self.log("val_loss", F.cross_entropy(logits, t), on_epoch=True)
            self.log("val_acc", (logits.argmax(-1) == t).float().mean(), on_epoch=True)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)

    model = DigitsMLP()
    logger = TensorBoardLogger(save_dir=args.log_dir, name="", version="", default_hp_metric=False)
    trainer = pl.Trainer(
        max_epochs=args.epochs,
        accelerator="auto",
        devices=1,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
    )
    trainer.fit(
        model,
        DataLoader(train, batch_size=args.batch_size, shuffle=True),
        DataLoader(val, batch_size=512),
    )

    device = next(model.parameters()).device
    model.eval()
    with torch.inference_mode():
        logits = model(val.tensors[0].to(device))
        val_acc = float((logits.argmax(-1).cpu() == val.tensors[1]).float().mean())
    example = val.tensors[0][: args.latency_batch_size].to(device)
    lat = measure_latency(model, example, repeats=args.latency_repeats)
    final = {
        "val_acc": val_acc,
        "num_params": float(count_parameters(model)),
        "model_bytes": float(model_bytes(model)),
        "latency_ms": lat.median_ms,
    }
    logger.log_metrics(final, step=trainer.global_step)
    logger.finalize("success")
    print(
        f"final step {trainer.global_step}: "
        + ", ".join(f"{k}={v:.6g}" for k, v in final.items())
        + f" (latency: median of {lat.repeats} runs, batch {lat.batch_size}, {lat.threads} thread, {lat.device})",
        flush=True,
    )
    return 0


def exit_process(code: int) -> NoReturn:
    """End the trial process at once, skipping the interpreter's shutdown.

    With torch and Lightning loaded that shutdown (module teardown, garbage
    collection) took 4-6 s here after training had finished: a quarter of a
    digits trial, during which the worker's slot stays taken. Everything the
    trial leaves behind is complete by then (the TensorBoard logger was
    finalized, which closes its event files); only stdout and stderr need a flush.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_process(main())
