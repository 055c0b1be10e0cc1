"""A fast trial that records the devices it was handed, following the trial contract.

Every process of the trial (one, or one per rank under torch.distributed.run)
appends one JSON line to $NASCTL_TEST_DEVICES: experiment, trial index, its
CUDA_VISIBLE_DEVICES, LOCAL_RANK, pid, and start and end times. The trial holds
its devices for $NASCTL_TEST_SLEEP + $NASCTL_TEST_SCALE * x seconds (default
0.2 + x; first waiting while $NASCTL_TEST_HOLD names a file), then the first process
logs f1 = x and f2 = 1 - x + y at step 1. No torch import: it starts in ~0.3 s.
"""

import argparse
import json
import os
import time

start = time.time()
p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--y", type=float, required=True)
args = p.parse_args()
hold = os.environ.get("NASCTL_TEST_HOLD")
while hold and os.path.exists(hold):  # held until the test lets it go
    time.sleep(0.05)
time.sleep(float(os.environ.get("NASCTL_TEST_SLEEP", "0.2")) + float(os.environ.get("NASCTL_TEST_SCALE", "1")) * args.x)
rank = int(os.environ.get("LOCAL_RANK", "0"))
if rank == 0:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(os.environ["NASCTL_LOG_DIR"])
    for tag, value in (("f1", args.x), ("f2", 1.0 - args.x + args.y)):
        w.add_event(Event(step=1, wall_time=time.time(),
                          summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
    w.close()
record = {
    "experiment": os.environ["NASCTL_EXPERIMENT"], "trial": int(os.environ["NASCTL_TRIAL_ID"]),
    "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "local_rank": os.environ.get("LOCAL_RANK"),
    "pid": os.getpid(), "start": start, "end": time.time(),
}
fd = os.open(os.environ["NASCTL_TEST_DEVICES"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (json.dumps(record) + "\n").encode())
os.close(fd)
