"""A trial for the retry tests: it saves a checkpoint (last.ckpt) after its first
"epoch", then waits, on its first attempt, for the file named by NASCTL_TEST_RELEASE
(the test kills it before that); an attempt resumed from the checkpoint
(NASCTL_RESUME_FROM) or released finishes and logs f1, f2 and whether it resumed.
With NASCTL_TEST_EXIT set it fails with that exit code instead (a user failure)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from torch.utils.tensorboard import SummaryWriter

p = argparse.ArgumentParser()
p.add_argument("--x", type=float)
p.add_argument("--y", type=float)
args = p.parse_args()
if os.environ.get("NASCTL_TEST_EXIT"):
    print("failing on purpose", file=sys.stderr, flush=True)
    sys.exit(int(os.environ["NASCTL_TEST_EXIT"]))
resume = os.environ.get("NASCTL_RESUME_FROM")
start = 0
if resume:
    with open(resume, encoding="utf-8") as f:
        start = int(f.read().strip())
    print(f"resumed at epoch {start} from {resume}", flush=True)
ckpt_dir = os.environ["NASCTL_CHECKPOINT_DIR"]
os.makedirs(ckpt_dir, exist_ok=True)
w = SummaryWriter(os.environ["NASCTL_LOG_DIR"])
for epoch in range(start, 2):
    w.add_scalar("epoch", epoch, epoch)
    w.flush()
    tmp = os.path.join(ckpt_dir, f"last.ckpt.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(epoch + 1))
    os.replace(tmp, os.path.join(ckpt_dir, "last.ckpt"))
    release = os.environ.get("NASCTL_TEST_RELEASE", "")
    while epoch == 0 and not resume and release and not os.path.exists(release):
        time.sleep(0.05)  # the test kills this attempt here
w.add_scalar("f1", args.x, 2)
w.add_scalar("f2", args.y, 2)
w.add_scalar("resumed", 1.0 if resume else 0.0, 2)
w.close()
