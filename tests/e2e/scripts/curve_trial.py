"""A trial that logs a learning curve slowly, for early-stopping tests (trial contract).

Trial quality comes from the trial index so a test knows which trials are
hopeless: trials in $NASCTL_TEST_BAD (comma-separated indices) learn slowly
(`val_acc` 0.1, 0.13, ... towards 0.3, `num_params` 5000), the others learn
fast (towards 0.9, `num_params` 1000). `num_params` is logged once at step 0,
`val_acc` once per epoch at steps 10, 20, ..., one epoch every
$NASCTL_TEST_EPOCH_SECONDS (default 0.05 s) or, for bad trials,
$NASCTL_TEST_BAD_EPOCH_SECONDS (default 1 s). Bad trials wait while $NASCTL_TEST_HOLD names an existing file
(before logging anything). The process writes its pid to `trial.pid` and, only
when it gets to the end, `finished` in its trial directory. No torch import:
it starts in ~0.3 s.
"""

import argparse
import os
import time

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--epochs", type=int, default=10)
args = p.parse_args()
index = int(os.environ["NASCTL_TRIAL_ID"])
log_dir = os.environ["NASCTL_LOG_DIR"]
trial_dir = os.path.dirname(log_dir)
with open(os.path.join(trial_dir, "trial.pid"), "w") as f:
    f.write(str(os.getpid()))
bad = index in {int(i) for i in os.environ.get("NASCTL_TEST_BAD", "").split(",") if i}
hold = os.environ.get("NASCTL_TEST_HOLD")
while bad and hold and os.path.exists(hold):
    time.sleep(0.05)
pause = float(os.environ.get("NASCTL_TEST_BAD_EPOCH_SECONDS" if bad else "NASCTL_TEST_EPOCH_SECONDS",
                             "1.0" if bad else "0.05"))

w = EventFileWriter(log_dir, flush_secs=1)


def log(tag: str, value: float, step: int) -> None:
    w.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
    w.flush()


top, start = (0.3, 0.1) if bad else (0.9 + 0.01 * args.x, 0.5)
log("num_params", 5000.0 if bad else 1000.0, 0)
for epoch in range(1, args.epochs + 1):
    time.sleep(pause)
    log("val_acc", top - (top - start) * 0.7 ** (epoch - 1), 10 * epoch)
w.close()
with open(os.path.join(trial_dir, "finished"), "w") as f:
    f.write("done\n")
print(f"trial {index} done", flush=True)
