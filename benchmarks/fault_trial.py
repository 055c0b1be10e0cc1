"""The checkpointing trial of `faults.py`: `--epochs` "epochs" of `--epoch_seconds`
each (a sleep: almost no CPU), following the trial contract.

- After every epoch it saves `$NASCTL_CHECKPOINT_DIR/last.ckpt` atomically (a
  temporary file in the same folder, then `os.replace`): `{"epoch": N}`, the
  epochs done.
- With `NASCTL_RESUME_FROM` it starts after the epochs that checkpoint says are
  done; a checkpoint it cannot read means training from scratch.
- SIGUSR1/SIGUSR2 (a scheduler's warning) are noted and training goes on (the
  checkpoint of the epochs done is already saved); SIGTERM saves the checkpoint
  and ends the process by SIGTERM.
- TensorBoard, in `$NASCTL_LOG_DIR` (one event file per run of the process, all in
  the trial's folder): `resumed_at` (the epochs the run found done) when it
  starts, `epoch_started` and `epoch_done` (step = the epoch's number, from 1) at
  each epoch's start and end, `warned` once per warning signal, `stopped` (the
  epochs done) on SIGTERM, and at the end `epochs_this_attempt` and the two
  objectives `f1`, `f2` (from `--x`, `--y`).

Signal handlers only note the signal or raise: the event writer and the file
writes run in the main flow, never inside a handler.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from types import FrameType

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter


class Stopped(Exception):
    """SIGTERM arrived: save, then end by SIGTERM."""


def read_checkpoint(path: str | None) -> int:
    """The epochs done according to the checkpoint at `path`; 0 without a readable one."""
    if not path:
        return 0
    try:
        with open(path, encoding="utf-8") as f:
            epoch = json.load(f)["epoch"]
        return epoch if isinstance(epoch, int) and epoch >= 0 else 0
    except (OSError, ValueError, KeyError, TypeError):
        print(f"cannot read checkpoint {path}; training from scratch", file=sys.stderr, flush=True)
        return 0


def save_checkpoint(folder: str, epoch: int) -> None:
    """Replace `last.ckpt` atomically with the epochs done."""
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f"last.ckpt.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"epoch": epoch}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, "last.ckpt"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--x", type=float, required=True)
    p.add_argument("--y", type=float, required=True)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--epoch_seconds", type=float, default=3.0)
    args = p.parse_args()
    ckpt_dir = os.environ["NASCTL_CHECKPOINT_DIR"]
    writer = EventFileWriter(os.environ["NASCTL_LOG_DIR"])

    def log(tag: str, value: float, step: int) -> None:
        writer.add_event(Event(step=step, wall_time=time.time(),
                               summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
        writer.flush()

    warnings: list[int] = []

    def warned(signum: int, frame: FrameType | None) -> None:
        warnings.append(signum)

    def stopped(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # Slurm may send it more than once
        raise Stopped

    start = read_checkpoint(os.environ.get("NASCTL_RESUME_FROM"))
    done, noted = start, 0
    signal.signal(signal.SIGUSR1, warned)
    signal.signal(signal.SIGUSR2, warned)
    signal.signal(signal.SIGTERM, stopped)
    try:
        print(f"run starts at epoch {start} of {args.epochs}", flush=True)
        log("resumed_at", float(start), start)
        for epoch in range(start + 1, args.epochs + 1):
            log("epoch_started", float(epoch), epoch)
            time.sleep(args.epoch_seconds)
            done = epoch  # before the save: a SIGTERM during it saves this epoch again
            save_checkpoint(ckpt_dir, epoch)
            log("epoch_done", float(epoch), epoch)
            for signum in warnings[noted:]:
                print(f"warning {signal.Signals(signum).name}: checkpoint of {done} epochs saved", flush=True)
                log("warned", float(done), done)
            noted = len(warnings)
    except Stopped:
        save_checkpoint(ckpt_dir, done)
        log("stopped", float(done), done)
        writer.close()
        print(f"SIGTERM after {done} epochs: checkpoint saved", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # the signal ends the process before this returns
    log("epochs_this_attempt", float(args.epochs - start), args.epochs)
    log("f1", args.x, args.epochs)
    log("f2", (1.0 - args.x) ** 2 + args.y, args.epochs)
    writer.close()


if __name__ == "__main__":
    main()
