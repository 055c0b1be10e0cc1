"""The digits trainer with a clock: `python benchmarks/trial_clock.py --hidden_size_1 64 ...`.

Runs `nasctl.search_spaces.mlp` in this very process (same arguments, same
TensorBoard output, same way out: `mlp.exit_process`) and writes `clock.json` next to the trial's TensorBoard
directory (the parent of NASCTL_LOG_DIR): when the process was created (the
real launch, from the OS), when training ended, when the process was gone
(after the interpreter's own shutdown, which is seconds for torch and
Lightning), and the exit code. The exit is seen by a small forked watcher
that waits for the trainer's end of a pipe to close, so the trainer does
nothing differently. The end-to-end benchmark reads these files for nasctl
and for the reference alike, so both are timed the same way.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _clock_path() -> str:
    log_dir = os.environ.get("NASCTL_LOG_DIR", "tb_logs")
    return os.path.join(os.path.dirname(os.path.abspath(log_dir)), "clock.json")


def _watch_exit(read_fd: int) -> None:
    """In the forked watcher: wait until the trainer process is gone, then add its exit time."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.setsid()  # leave the trainer's process group: a cancel must not count as an exit
    try:
        while os.read(read_fd, 1):
            pass
        exited = time.time()
        path = _clock_path()
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        data["exit"] = exited
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    finally:
        os._exit(0)


def _process_start() -> float:
    """When this process was created, to the kernel's 10 ms tick (psutil's
    create_time rounds the boot time to whole seconds)."""
    with open("/proc/self/stat", encoding="ascii") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def main() -> None:
    started = _process_start()
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:
        os.close(write_fd)
        _watch_exit(read_fd)
    os.close(read_fd)  # write_fd stays open, unused, until this process has exited
    from nasctl.search_spaces import mlp

    rc = 1
    try:
        rc = mlp.main(sys.argv[1:])
    finally:
        with open(_clock_path(), "w", encoding="utf-8") as f:
            json.dump({"start": started, "end": time.time(), "returncode": rc, "pid": os.getpid()}, f)
    mlp.exit_process(rc)  # how `python -m nasctl.search_spaces.mlp` ends


if __name__ == "__main__":
    main()
