"""A fast trial that follows the trial contract (no torch): logs a learning curve
and two objectives from its --width and --lr arguments; fails when --width is 13."""

from __future__ import annotations

import argparse
import math
import os
import sys

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, required=True)
p.add_argument("--lr", type=float, required=True)
p.add_argument("--act", default="relu")
args = p.parse_args()
print(f"training width={args.width} lr={args.lr} act={args.act} <not-markup>")
if args.width == 13:
    print("simulated failure for width 13", file=sys.stderr)
    sys.exit(3)
acc = 1 - math.exp(-args.width / 20) * (1.2 - args.lr * 50)
w = EventFileWriter(os.environ["NASCTL_LOG_DIR"])


def log(tag: str, value: float, step: int) -> None:
    w.add_event(Event(step=step, wall_time=0.0, summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))


for step in range(1, 4):
    log("train_loss", 1.0 / step + args.lr, step)
    log("val_acc", acc * step / 3, step)
log("num_params", float(args.width * 64 + args.width), 3)
log("latency_ms", args.width / 10, 3)
w.close()
print("done", file=sys.stderr)
