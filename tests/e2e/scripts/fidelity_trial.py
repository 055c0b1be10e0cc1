"""A fast multi-fidelity trial for tests, following the resume contract.

`--epochs E` is the fidelity to reach. It appends "<trial index> <checkpoint
it resumed from, or ->" to $NASCTL_TEST_RUNS (to count real launches), sleeps
$NASCTL_TEST_SLEEP seconds, "trains" from the epoch its checkpoint holds
($NASCTL_RESUME_FROM, a JSON file here) up to E, logs one `loss` point per
epoch it trained and the objectives f1 = x + 1/E, f2 = 1 - sqrt(x) + y + 1/E,
then saves its checkpoint as $NASCTL_CHECKPOINT_DIR/last.ckpt. It avoids
importing torch so it starts in ~0.3 s.
"""

import argparse
import json
import math
import os
import time

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--y", type=float, required=True)
p.add_argument("--epochs", type=int, required=True)
args = p.parse_args()
index = os.environ["NASCTL_TRIAL_ID"]
resume = os.environ.get("NASCTL_RESUME_FROM")
runs = os.environ.get("NASCTL_TEST_RUNS")
if runs:
    with open(runs, "a") as f:
        f.write(f"{index} {resume or '-'}\n")
time.sleep(float(os.environ.get("NASCTL_TEST_SLEEP", "0")))
start = 0
if resume:
    with open(resume) as f:
        start = json.load(f)["epochs"]

w = EventFileWriter(os.environ["NASCTL_LOG_DIR"])


def log(tag: str, value: float, step: int) -> None:
    w.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))


for epoch in range(start, args.epochs):
    log("loss", 1.0 / (epoch + 1), epoch + 1)
log("f1", args.x + 1.0 / args.epochs, args.epochs)
log("f2", 1.0 - math.sqrt(args.x) + args.y + 1.0 / args.epochs, args.epochs)
w.close()
folder = os.environ["NASCTL_CHECKPOINT_DIR"]
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, "last.ckpt.tmp"), "w") as f:
    json.dump({"epochs": args.epochs}, f)
os.replace(os.path.join(folder, "last.ckpt.tmp"), os.path.join(folder, "last.ckpt"))
print(f"trial {index} trained epochs {start}..{args.epochs}", flush=True)
