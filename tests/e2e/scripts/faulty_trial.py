"""A trial script following the trial contract whose behaviour depends on the
trial index, so one experiment exercises every kind of trial failure."""

import argparse
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--y", type=float, required=True)
args = p.parse_args()
index = int(os.environ["NASCTL_TRIAL_ID"])
log_dir = os.environ["NASCTL_LOG_DIR"]
mode = ["ok", "crash", "nan", "missing", "hang", "corrupt", "ok", "oom", "nolog"][index % 9]
print(f"trial {index} mode {mode} x={args.x} y={args.y}", flush=True)

if mode == "crash":
    raise RuntimeError("simulated training crash")
if mode == "oom":  # what the kernel's OOM killer does
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
if mode == "nolog":
    sys.exit(0)
if mode == "hang":
    time.sleep(600)
if mode == "corrupt":
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "events.out.tfevents.0.broken"), "wb") as f:
        f.write(b"\x00" * 64)
    sys.exit(0)

from torch.utils.tensorboard import SummaryWriter  # noqa: E402

w = SummaryWriter(log_dir)
for step in range(3):
    w.add_scalar("loss", 1.0 / (step + 1), step)
f1 = args.x
f2 = (1 - args.x) ** 2 + args.y
w.add_scalar("f1", float("nan") if mode == "nan" else f1, 3)
if mode != "missing":
    w.add_scalar("f2", f2, 3)
w.close()
