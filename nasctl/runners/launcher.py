"""Wrapper that makes a trial's job re-attachable, and its end explainable, from files alone.

TorchX's local scheduler keeps its job table in the orchestrator's memory, so a
restarted orchestrator could neither poll nor cancel jobs it did not launch.
Each trial (on every TorchX-backed runner) therefore runs as

    python -m nasctl.runners.launcher --state-dir TRIAL_DIR/job -- COMMAND...

and this wrapper, launched by TorchX, keeps the job's state on disk:

- `claim`: created with O_EXCL before anything runs; it names the job that
  claimed the trial (TorchX's job id) and the launcher's pid. If it already
  exists and names another job, the trial was launched before (say the
  orchestrator died between submitting and recording the job), and this launch
  exits at once with code 75 (EX_TEMPFAIL) without running anything: a trial is
  never trained twice. If it names this same job, the scheduler restarted the job
  (a Slurm requeue after a node failure or preemption keeps the job id): the
  trial runs again, from `$NASCTL_CHECKPOINT_DIR/last.ckpt` when there is one
  (passed as `NASCTL_RESUME_FROM`). A restart of a job whose trial already exited
  0 runs nothing and exits 0.
- `launch.json`: the launcher's and the training process's pid and start time,
  the host, the TorchX job id, the devices it was handed (CUDA_VISIBLE_DEVICES),
  where stdout/stderr go, and `restarts`: one entry per earlier run of the same
  job (when and where it started, and its exit record).
- `exit.json`: the training process's exit status, written when it ends. A
  SIGTERM/SIGINT to the launcher is forwarded to the trial and recorded as
  `signal`; it is recorded as nasctl's cancellation (`cancelled: true`) only when
  the runner's `cancel` wrote `CANCEL_MARKER` first, so a SIGTERM from anyone
  else (a person, a shutdown, Slurm at a time limit) is not mistaken for one.
  A trial killed by a signal is recorded with that signal. A launcher stopped
  before the trial started does not start it.

SIGUSR1 and SIGUSR2 (a scheduler's warning before a time limit, e.g. Slurm's
`--signal`) are the trial contract's checkpoint request: the launcher writes
`$NASCTL_CHECKPOINT_DIR/checkpoint.request` (the signal and the time; a script
can watch for it) and forwards the signal to the trial. The trial is started
with both signals ignored, so one that does not handle them (any script that
does not use the built-in trainer) is not killed by a warning; one that installs
a handler (the built-in trainer saves) gets it. The exit record lists the
warnings received (`warned`). Under a Slurm job step the launcher forwards no
signal at all: Slurm signals every process of the step itself, and a second
delivery would make the trial see each warning twice, or kill it with a second
SIGTERM while it exits in good order.

A multi-node trial (`--nnodes N`, see nasctl/runners/distributed.py) runs one
launcher per node, each starting torch.distributed.run for its node. Node 0 keeps
the claim, `launch.json` and `exit.json` as above; node k > 0 waits for node 0's
claim, runs nothing when it names another job (a duplicate submission), and
records its own part in `node-<k>.json`.

With `NASCTL_WARM_SOCKET` set (see `nasctl.runners.warm`), the training
process is forked by the warm server instead of started here; `launch.json`
then says `"warm": true`, and everything else is the same.

Only the standard library and psutil are imported, so the wrapper costs
milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from nasctl.runners.distributed import multi_node_command, node_name, node_placement, rank_records
from nasctl.runners.outcome import first_failure
from nasctl.runners.warm import SOCKET_ENV, create_time, start_warm

DUPLICATE_EXIT = 75
CLAIM, LAUNCH, EXIT = "claim", "launch.json", "exit.json"
CANCEL_MARKER = "cancelled.json"
"""Written in the state folder by a runner's `cancel` before it signals the job."""
CHECKPOINT_DIR_ENV, RESUME_ENV, CHECKPOINT_FILE = "NASCTL_CHECKPOINT_DIR", "NASCTL_RESUME_FROM", "last.ckpt"
"""The checkpoint contract (see nasctl/orchestration/fidelity.py): a restart resumes from CHECKPOINT_FILE."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
WARNING_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
FOLLOW_WAIT_SECONDS = 300.0
"""How long a node other than 0 of a multi-node trial waits for node 0 to claim the trial."""
CHECKPOINT_REQUEST = "checkpoint.request"
"""Written in `$NASCTL_CHECKPOINT_DIR` when a warning signal arrives: save soon."""


def _ignore_warnings() -> None:
    """In the trial's process before it starts (Popen's preexec_fn): warning signals
    ignored until the trial installs handlers of its own."""
    for sig in WARNING_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def request_checkpoint(env: Mapping[str, str], signum: int) -> str | None:
    """Write the checkpoint request for a warning signal; returns its path (None without a checkpoint folder)."""
    folder = env.get(CHECKPOINT_DIR_ENV)
    if not folder:
        return None
    path = os.path.join(folder, CHECKPOINT_REQUEST)
    try:
        os.makedirs(folder, exist_ok=True)
        write_json_atomic(path, {"signal": _signame(signum), "time": time.time()})
    except OSError:
        return None
    return path


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    """Write `data` to `path` whole or not at all (a temporary file, fsync, rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def exit_record(sdir: str) -> dict[str, Any] | None:
    """The attempt's exit record (`exit.json`), None before there is one. For a trial run
    by several processes (nasctl/runners/distributed.py) that did not exit 0, it carries
    `failed_rank`: the record of the first rank that failed on its own, the cause of the
    others' ends (they lost their peer, or the scheduler stopped them). Such a failure
    is the record even where node 0's launcher could not write one: a scheduler that
    stops a job when one of its tasks fails (srun --kill-on-bad-exit) kills the
    launcher too, when its processes outlive the grace period."""
    record = read_json(os.path.join(sdir, EXIT))
    if record is not None and record.get("returncode") == 0:
        return record
    first = first_failure(rank_records(sdir))
    if first is None:
        return record
    if record is None:
        if os.path.exists(os.path.join(sdir, CANCEL_MARKER)):
            return None  # nasctl stopped it: the ranks' ends say nothing of their own
        return {"returncode": first.get("returncode"), "ended": first.get("ended"), "failed_rank": first}
    return {**record, "failed_rank": first}


def mark_cancel(sdir: str | None, handle: str) -> str | None:
    """Write the cancel marker in the attempt's state folder `sdir`, as a runner's
    `cancel` does before it signals the job. Returns the marker's path, or None when
    nothing was written: no folder, the job already recorded its exit, or it was
    marked before, or the folder takes no file (a full disk: the job is cancelled all
    the same, and its end is then judged by its signal)."""
    if not sdir or not os.path.isdir(sdir) or os.path.exists(os.path.join(sdir, EXIT)):
        return None
    path = os.path.join(sdir, CANCEL_MARKER)
    if os.path.exists(path):
        return None
    try:
        write_json_atomic(path, {"handle": handle, "time": time.time()})
    except OSError:
        try:  # an empty marker needs no data block, only what is left of the folder
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        except OSError:
            return None
    return path


def job_identity(env: Mapping[str, str]) -> str | None:
    """The scheduler job a launch belongs to: TorchX's job id (`slurm://torchx/<id>` on
    Slurm, the same for every restart of a requeued job; unique per submission on
    local_cwd). None outside TorchX: such a launch can never be a restart."""
    return env.get("TORCHX_JOB_ID") or None


def read_claim(sdir: str) -> dict[str, Any] | None:
    """The claim in `sdir`: None without one, {} while it is still empty (created, not
    yet written). A claim written by an older nasctl holds only a pid."""
    try:
        with open(os.path.join(sdir, CLAIM), encoding="utf-8") as f:
            text = f.read().strip()
    except OSError:
        return None
    if text.isdigit():
        return {"pid": int(text)}
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def claim(sdir: str, identity: str | None) -> tuple[str, dict[str, Any]]:
    """Claim the trial's state folder for this launch.

    Returns ("first", claim) for the first launch, ("restart", claim) when the folder
    was claimed by this same job (the scheduler restarted it), or ("duplicate", the
    other claim) when another job claimed it.
    """
    mine: dict[str, Any] = {"pid": os.getpid(), "job": identity, "host": socket.gethostname(),
                            "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "claimed": time.time()}
    path = os.path.join(sdir, CLAIM)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        earlier = read_claim(sdir) or {}
        if identity is None or earlier.get("job") != identity:
            return "duplicate", earlier
        mine["restarts"] = int(earlier.get("restarts") or 0) + 1
        write_json_atomic(path, mine)
        return "restart", mine
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(mine, f)
    return "first", mine


def resume_point(env: Mapping[str, str]) -> str | None:
    """The checkpoint a restarted trial resumes from: `$NASCTL_CHECKPOINT_DIR/last.ckpt`
    when it exists, else None (the trial starts over)."""
    folder = env.get(CHECKPOINT_DIR_ENV)
    path = os.path.join(folder, CHECKPOINT_FILE) if folder else None
    return path if path and os.path.isfile(path) else None


def _fd_target(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _signame(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _say(message: str) -> None:
    print(f"nasctl launcher: {message}", file=sys.stderr, flush=True)


def _prepare_restart(sdir: str, identity: str | None, number: int) -> dict[str, Any] | None:
    """Before running a restarted job's trial again: the launch record's fields that
    carry over (its `restarts`, extended by the earlier run, and `resumed_from`), and
    NASCTL_RESUME_FROM set where there is a checkpoint. None when the earlier run's
    trial already exited 0, so nothing is to run."""
    done = read_json(os.path.join(sdir, EXIT))
    if done is not None and done.get("returncode") == 0 and not done.get("cancelled"):
        _say(f"restart {number} of job {identity}: the trial already exited 0; not running it again")
        return None
    previous = read_json(os.path.join(sdir, LAUNCH)) or {}
    earlier = {k: previous.get(k) for k in ("started", "host", "pid", "child_pid", "resumed_from")}
    carried: dict[str, Any] = {"restarts": [*previous.get("restarts", []), {**earlier, "exit": done}]}
    resume = resume_point(os.environ)
    if resume is not None:
        os.environ[RESUME_ENV] = resume
        carried["resumed_from"] = resume
        _say(f"restart {number} of job {identity}: resuming from {resume}")
    else:
        folder = os.environ.get(CHECKPOINT_DIR_ENV)
        where = f"no checkpoint {os.path.join(folder, CHECKPOINT_FILE)} yet" if folder else f"no {CHECKPOINT_DIR_ENV} set"
        start = f" from {os.environ[RESUME_ENV]}, as first launched" if os.environ.get(RESUME_ENV) else ""
        _say(f"restart {number} of job {identity}: {where}; the trial starts over{start}")
    return carried


class _Relay:
    """The launcher's signal handling: stop signals are recorded (and passed on),
    warnings passed on; a signal that arrives before the trial has started is
    delivered once it runs. Under a Slurm job step nothing is passed on: Slurm
    signals every process of the step itself (scancel, the time limit, a requeue,
    --signal), so forwarding would deliver each signal twice, and a second SIGTERM
    during the trial's orderly exit would kill it (Python restores default
    handlers as it exits)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.warned: list[int] = []
        self._pending: list[int] = []
        self._send: Callable[[int], None] | None = None
        self._forward = "SLURM_STEP_ID" not in os.environ
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_stop)
        for sig in WARNING_SIGNALS:
            signal.signal(sig, self._on_warning)

    def _deliver(self, signum: int) -> None:
        if not self._forward:
            return
        if self._send is not None:
            self._send(signum)
        else:
            self._pending.append(signum)

    def _on_stop(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        self._deliver(signum)

    def _on_warning(self, signum: int, _frame: object) -> None:
        self.warned.append(signum)
        request_checkpoint(os.environ, signum)
        self._deliver(signum)

    def attach(self, send: Callable[[int], None]) -> None:
        """The trial runs: pass on to it what came before and what comes after."""
        self._send = send
        for signum in self._pending:
            send(signum)


def _record_exit(sdir: str, rc: int, received: list[int], warned: list[int] | None = None) -> None:
    result: dict[str, Any] = {"returncode": rc, "ended": time.time()}
    if warned:
        result["warned"] = sorted({_signame(s) for s in warned})
    ended_by = received[0] if received else (-rc if rc < 0 else None)
    if ended_by is not None:
        result["signal"] = _signame(ended_by)
        if rc != 0 and os.path.exists(os.path.join(sdir, CANCEL_MARKER)):
            result["cancelled"] = True
    write_json_atomic(os.path.join(sdir, EXIT), result)


def _launch_info(cmd: list[str], carried: dict[str, Any]) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "create_time": create_time(os.getpid()),
        "host": socket.gethostname(),
        "node": node_name(os.environ),
        "torchx_job_id": os.environ.get("TORCHX_JOB_ID"),
        "stdout": _fd_target(1),
        "stderr": _fd_target(2),
        "started": time.time(),
        "command": cmd,
        "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # as placed by nasctl (None: not set)
        **carried,
    }


def _run_trial(sdir: str, cmd: list[str], info: dict[str, Any], relay: _Relay) -> int:
    """Start the trial (forked by the warm server where there is one), record it, wait for it."""
    warm, why_cold = None, None
    sock = os.environ.get(SOCKET_ENV)
    if sock:
        warm, why_cold = start_warm(sock, cmd)
    if warm is not None:
        child_pid, child_start = warm.pid, warm.create_time or create_time(warm.pid)
        relay.attach(warm.signal)
    else:
        child = subprocess.Popen(cmd, preexec_fn=_ignore_warnings)  # the launcher is single-threaded
        child_pid, child_start = child.pid, create_time(child.pid)
        relay.attach(child.send_signal)
    info.update(child_pid=child_pid, child_create_time=child_start, warm=warm is not None)
    if why_cold:
        info["cold_because"] = why_cold
    write_json_atomic(os.path.join(sdir, LAUNCH), info)
    if warm is None:
        rc = child.wait()  # retries EINTR itself
    else:
        rc_or_none = warm.wait()
        if rc_or_none is None:
            write_json_atomic(os.path.join(sdir, EXIT), {
                "returncode": None, "ended": time.time(),
                "error": "the warm server ended before reporting the trial's exit status"})
            return 1
        rc = rc_or_none
    _record_exit(sdir, rc, relay.received, relay.warned)
    return rc if rc >= 0 else 128 - rc


def _node_command(args: argparse.Namespace, cmd: list[str], sdir: str) -> tuple[int, list[str]]:
    """This node's rank and what it runs: for a multi-node trial (`--nnodes` above 1),
    torch.distributed.run on this node with the rendezvous on node 0 (see
    nasctl/runners/distributed.py); otherwise node 0 and `cmd` as given."""
    if args.nnodes <= 1:
        return 0, cmd
    node_rank, host, port = node_placement(os.environ, args.node_rank, args.rank0_env)
    return node_rank, multi_node_command(cmd, args.nnodes, args.nproc_per_node, node_rank, (host, port), sdir)


def _follow(sdir: str, identity: str | None, node_rank: int, cmd: list[str]) -> int:
    """Node `node_rank` > 0 of a multi-node trial: run its part once node 0 has claimed the
    trial for this same job (a duplicate submission's nodes run nothing), record it in
    `node-<rank>.json`. Node 0 keeps the trial's claim, launch and exit records."""
    deadline = time.monotonic() + FOLLOW_WAIT_SECONDS
    while True:
        claimed = read_claim(sdir)
        if claimed and claimed.get("job") is not None:
            break
        if time.monotonic() > deadline:
            _say(f"node {node_rank}: node 0 did not claim the trial within {FOLLOW_WAIT_SECONDS:.0f} s; not running")
            return DUPLICATE_EXIT
        time.sleep(0.2)
    if identity is None or claimed.get("job") != identity:
        _say(f"node {node_rank}: the trial was claimed by {claimed.get('job')}, not this job; not running it twice")
        return DUPLICATE_EXIT
    done = read_json(os.path.join(sdir, EXIT))
    if done is not None and done.get("returncode") == 0 and not done.get("cancelled"):
        return 0
    path = os.path.join(sdir, f"node-{node_rank}.json")
    info = {**_launch_info(cmd, {}), "node_rank": node_rank}
    write_json_atomic(path, info)
    relay = _Relay()
    child = subprocess.Popen(cmd, preexec_fn=_ignore_warnings)
    relay.attach(child.send_signal)
    rc = child.wait()
    write_json_atomic(path, {**info, "child_pid": child.pid, "returncode": rc, "ended": time.time()})
    return rc if rc >= 0 else 128 - rc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nasctl.runners.launcher")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--nnodes", type=int, default=1, help="nodes of a multi-node trial (one launcher on each)")
    p.add_argument("--nproc-per-node", type=int, default=1, help="processes per node of a multi-node trial")
    p.add_argument("--node-rank", type=int, default=None, help="this node's rank (default: SLURM_NODEID)")
    p.add_argument("--rank0-env", default=None,
                   help="the environment variable that holds node 0's address (default: Slurm's first host)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("no command given after --")
    sdir = args.state_dir
    os.makedirs(sdir, exist_ok=True)
    identity = job_identity(os.environ)
    try:
        node_rank, cmd = _node_command(args, cmd, sdir)
    except RuntimeError as e:
        _say(str(e))
        return 2
    if node_rank > 0:
        return _follow(sdir, identity, node_rank, cmd)
    kind, claimed = claim(sdir, identity)
    if kind == "duplicate":
        print(f"trial already launched (found {os.path.join(sdir, CLAIM)}, claimed by "
              f"{claimed.get('job') or 'another launch'}); not running it twice", file=sys.stderr, flush=True)
        return DUPLICATE_EXIT
    carried: dict[str, Any] = {}
    if kind == "restart":
        prepared = _prepare_restart(sdir, identity, int(claimed.get("restarts") or 1))
        if prepared is None:
            return 0
        carried = prepared
    if args.nnodes > 1:
        carried.update(nodes=args.nnodes, node_rank=0)
    info = _launch_info(cmd, carried)
    write_json_atomic(os.path.join(sdir, LAUNCH), info)
    if kind == "restart":
        try:  # the earlier run's exit record now lives in launch.json's `restarts`
            os.unlink(os.path.join(sdir, EXIT))
        except FileNotFoundError:
            pass
    relay = _Relay()  # handlers first: a signal that arrives while the trial starts is delivered once it runs
    if relay.received:  # stopped before the trial started: it never runs
        _record_exit(sdir, -relay.received[0], relay.received)
        return 128 + relay.received[0]
    return _run_trial(sdir, cmd, info, relay)


if __name__ == "__main__":
    sys.exit(main())
