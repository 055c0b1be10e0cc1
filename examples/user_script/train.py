"""A trial script in plain PyTorch (no Lightning) that follows nasctl's trial contract.

1. Parameters arrive as `--name value` arguments.
2. TensorBoard scalars whose tags are the metric names go to $NASCTL_LOG_DIR:
   curves per epoch, and every objective at one common final step.
3. Exit 0 on success.

Optionally it writes trial_info.json next to the event files; nasctl stores
that object with the trial (shown by `nasctl trials --json` and the dashboard).
The data is scikit-learn's 8x8 digits, read from the file scikit-learn ships.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.tensorboard import SummaryWriter


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    assert spec is not None and spec.submodule_search_locations, "scikit-learn is not installed"
    path = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data", "digits.csv.gz")
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return data[:, :-1] / 16.0, data[:, -1].astype(np.int64)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=1e-2)
    p.add_argument("--epochs", type=int, default=5)
    args = p.parse_args()
    log_dir = os.environ.get("NASCTL_LOG_DIR", "tb_logs")

    torch.manual_seed(0)
    X, y = load_digits()
    order = np.random.default_rng(0).permutation(len(y))  # a fixed split for every trial
    val, train = order[:360], order[360:]
    xtr, ytr = torch.from_numpy(X[train]), torch.from_numpy(y[train])
    xva, yva = torch.from_numpy(X[val]), torch.from_numpy(y[val])

    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    writer = SummaryWriter(log_dir)
    writer.add_scalar("num_params", num_params, 0)  # known before training

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for i in range(0, len(ytr), 64):
            loss = F.cross_entropy(model(xtr[i:i + 64]), ytr[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        writer.add_scalar("train_loss", loss.item(), step)
        model.eval()
        with torch.no_grad():
            acc = (model(xva).argmax(-1) == yva).float().mean().item()
        writer.add_scalar("val_acc", acc, step)

    writer.add_scalar("val_acc", acc, step + 1)  # every objective at one final step
    writer.add_scalar("num_params", num_params, step + 1)
    writer.close()
    with open(os.path.join(log_dir, "trial_info.json"), "w") as f:
        json.dump({"script": "examples/user_script/train.py", "torch": torch.__version__,
                   "python": platform.python_version(), "threads": torch.get_num_threads()}, f)
    print(f"val_acc={acc:.4f} num_params={num_params}")


if __name__ == "__main__":
    main()
