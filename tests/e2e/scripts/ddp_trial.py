"""A multi-process trial (started by torch.distributed.run, as TorchX's dist.ddp does).

Every process joins a gloo process group and all-reduces its rank; rank 0 logs
`world_size`, `rank_sum` and the objectives f1 = x, f2 = 1 - x + y at step 1.
With `--crash_rank r`, rank r exits 3 once the ranks have met (leaving its process
group first: a process that exits with a gloo group still open may abort in the
group's destructor when its peers close theirs, and end by SIGABRT, not its code).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--y", type=float, required=True)
p.add_argument("--crash_rank", type=int, default=-1)
args = p.parse_args()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank {rank} of {world} pid {os.getpid()}: rank sum {t.item()}", flush=True)
if rank == args.crash_rank:  # the trial's own failure on one rank, after the ranks met
    dist.destroy_process_group()
    raise SystemExit(3)
if rank == 0:
    w = EventFileWriter(os.environ["NASCTL_LOG_DIR"])
    for tag, value in (("world_size", world), ("rank_sum", t.item()), ("f1", args.x), ("f2", 1.0 - args.x + args.y)):
        w.add_event(Event(step=1, wall_time=time.time(),
                          summary=Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])))
    w.close()
dist.destroy_process_group()
