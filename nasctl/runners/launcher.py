"""Wrapper that makes a local trial re-attachable from files alone.

TorchX's local scheduler keeps its job table in the orchestrator's memory, so a
restarted orchestrator could neither poll nor cancel jobs it did not launch.
Each local trial therefore runs as

    python -m nasctl.runners.launcher --state-dir TRIAL_DIR/job -- COMMAND...

and this wrapper, launched by TorchX, keeps the job's state on disk:

- `claim`: created with O_EXCL before anything runs. If it already exists the
  trial was launched before (say the orchestrator died between submitting and
  recording the job), and this launch exits at once with code 75 (EX_TEMPFAIL)
  without running anything: a trial is never trained twice.
- `launch.json`: the launcher's and the training process's pid and start time,
  the TorchX job id, the devices it was handed (CUDA_VISIBLE_DEVICES), and
  where stdout/stderr go.
- `exit.json`: the training process's exit status, written when it ends
  (a SIGTERM/SIGINT to the launcher is forwarded and recorded as a cancellation).

With `NASCTL_WARM_SOCKET` set (see `nasctl.runners.warm`), the training
process is forked by the warm server instead of started here; `launch.json`
then says `"warm": true`, and everything else is the same.

Only the standard library and psutil are imported, so the wrapper costs
milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from nasctl.runners.warm import SOCKET_ENV, create_time, start_warm

DUPLICATE_EXIT = 75
CLAIM, LAUNCH, EXIT = "claim", "launch.json", "exit.json"


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _fd_target(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nasctl.runners.launcher")
    p.add_argument("--state-dir", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("no command given after --")
    os.makedirs(args.state_dir, exist_ok=True)
    try:
        fd = os.open(os.path.join(args.state_dir, CLAIM), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        print(f"trial already launched (found {os.path.join(args.state_dir, CLAIM)}); not running it twice",
              file=sys.stderr, flush=True)
        return DUPLICATE_EXIT
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)

    info: dict[str, Any] = {
        "pid": os.getpid(),
        "create_time": create_time(os.getpid()),
        "torchx_job_id": os.environ.get("TORCHX_JOB_ID"),
        "stdout": _fd_target(1),
        "stderr": _fd_target(2),
        "started": time.time(),
        "command": cmd,
        "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # as placed by nasctl (None: not set)
    }
    launch_path = os.path.join(args.state_dir, LAUNCH)
    write_json_atomic(launch_path, info)

    received: list[int] = []
    send: Callable[[int], None]
    warm, why_cold = None, None
    sock = os.environ.get(SOCKET_ENV)
    if sock:
        warm, why_cold = start_warm(sock, cmd)
    if warm is not None:
        child_pid, child_start = warm.pid, warm.create_time or create_time(warm.pid)
        send = warm.signal
    else:
        child = subprocess.Popen(cmd)
        child_pid, child_start = child.pid, create_time(child.pid)
        send = child.send_signal

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        send(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    info.update(child_pid=child_pid, child_create_time=child_start, warm=warm is not None)
    if why_cold:
        info["cold_because"] = why_cold
    write_json_atomic(launch_path, info)

    if warm is not None:
        rc_or_none = warm.wait()
        if rc_or_none is None:
            write_json_atomic(os.path.join(args.state_dir, EXIT), {
                "returncode": None, "ended": time.time(),
                "error": "the warm server ended before reporting the trial's exit status"})
            return 1
        rc = rc_or_none
    else:
        rc = child.wait()  # retries EINTR itself
    result: dict[str, Any] = {"returncode": rc, "ended": time.time()}
    if rc < 0:
        result["signal"] = signal.Signals(-rc).name
    if received:
        result["cancelled"] = True
        result["signal"] = signal.Signals(received[0]).name
    write_json_atomic(os.path.join(args.state_dir, EXIT), result)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
