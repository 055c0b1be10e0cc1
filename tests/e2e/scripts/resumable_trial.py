"""A fast trial for crash/resume tests, following the trial contract.

It appends "<trial index>" to $NASCTL_TEST_RUNS (to count real launches; a
"{experiment}" in that path is replaced by the experiment's name), waits
while $NASCTL_TEST_HOLD names an existing file, sleeps $NASCTL_TEST_SLEEP
seconds, then logs a short `loss` curve and the objectives f1 = x and
f2 = 1 - sqrt(x) + y (ZDT1-like) at step 3. It avoids importing torch so it starts in ~0.3 s.
"""

import argparse
import math
import os
import time

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--y", type=float, required=True)
args = p.parse_args()
index = os.environ["NASCTL_TRIAL_ID"]
runs = os.environ.get("NASCTL_TEST_RUNS", "").replace("{experiment}", os.environ.get("NASCTL_EXPERIMENT", ""))
if runs:
    with open(runs, "a") as f:
        f.write(f"{index}\n")
hold = os.environ.get("NASCTL_TEST_HOLD")
while hold and os.path.exists(hold):
    time.sleep(0.05)
time.sleep(float(os.environ.get("NASCTL_TEST_SLEEP", "0")))

w = EventFileWriter(os.environ["NASCTL_LOG_DIR"])


def log(tag: str, value: float, step: int) -> None:
    w.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))


for step in range(3):
    log("loss", 1.0 / (step + 1), step)
log("f1", args.x, 3)
log("f2", 1.0 - math.sqrt(args.x) + args.y, 3)
w.close()
print(f"trial {index} done", flush=True)
