"""Warm starts for local trials: each trial is forked from a process that has
already imported its libraries.

A digits trial spends ~3 s importing torch, Lightning and scikit-learn, and
about 0.5 s training (2 epochs, measured here). With `trial.preload` (on by
default for the built-in trainer) the local runner starts one warm server per
experiment run:

    python -m nasctl.runners.warm --socket DIR/sock --parent PID --preload torch,...

It imports the listed modules once, then listens on a Unix socket in a private
(0700) directory. Each trial still goes through TorchX and the launcher, so
status, cancel, logs and re-attaching from files work exactly as for a cold
start. The launcher finds `NASCTL_WARM_SOCKET` in its environment and, for a
command of the form `PYTHON SCRIPT ...` or `PYTHON -m MODULE ...` (the same
interpreter as its own), hands the server the command, its environment, its
working directory and its stdin/stdout/stderr instead of starting Python.

The server forks. The child leads its own session, takes over those
descriptors, the environment and the directory, sets `sys.argv` and
`sys.path[0]` as a fresh interpreter would, and runs the script or module as
`__main__`; at the end it joins its non-daemon threads and runs the `atexit`
handlers, as the interpreter does. The server reports the child's pid at once
and its exit status once reaped; the launcher records both as it does for a
process it started itself.

The server only accelerates. While it is still importing, after it is gone, or
when it refuses a request, the launcher starts the command cold. It stops
accepting on SIGTERM (the runner's `close`) or once the process that started
it is gone, and exits after its last child has been reaped, so the exit status
of a trial that outlives a crashed orchestrator is still recorded.

What a forked trial shares with the server: modules imported before the fork
and whatever they read at import time (the server starts with the trials'
common environment: thread counts, PYTHONPATH). CUDA is never initialised in
the server (it only imports; `PYTORCH_NVML_BASED_CUDA_CHECK=1` keeps an
availability check during an import from initialising the driver), so each
trial initialises CUDA itself, with its own `CUDA_VISIBLE_DEVICES`.

Standard library only at module level: the launcher imports this module.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, NoReturn

SOCKET_ENV = "NASCTL_WARM_SOCKET"
REQUEST_LIMIT = 1 << 20  # bytes of one request (command + environment)
CONNECT_TIMEOUT = 2.0
REPLY_TIMEOUT = 10.0
TICK = 1.0  # seconds between checks that the starting process is still there


def supported() -> bool:
    """Warm starts need fork and descriptor passing over Unix sockets (Linux, macOS)."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX")


def warm_argv(command: list[str], interpreter: str) -> list[str] | None:
    """The part after the interpreter when `command` can run warm, else None:
    `[SCRIPT, args...]` or `["-m", MODULE, args...]`, started by `interpreter`
    itself (a different Python has different packages)."""
    if len(command) < 2 or os.path.abspath(command[0]) != os.path.abspath(interpreter):
        return None
    rest = command[1:]
    if rest[0] == "-m":
        return rest if len(rest) >= 2 and rest[1] and not rest[1].startswith("-") else None
    return rest if not rest[0].startswith("-") else None


# --- the launcher's side ---------------------------------------------------------------------
@dataclass
class WarmChild:
    """A trial forked by the warm server; `wait` returns its exit status."""

    pid: int
    create_time: float | None
    conn: socket.socket
    _buffer: bytes = b""

    def wait(self) -> int | None:
        """The exit status (negative: killed by that signal), or None if the
        server ended before it could report one."""
        self.conn.settimeout(None)
        while True:
            msg = self.next_message()
            if msg is None:
                return None
            if "returncode" in msg:
                self.conn.close()
                return int(msg["returncode"])

    def next_message(self) -> dict[str, Any] | None:
        """The server's next JSON line, or None if the connection ended or timed out."""
        while b"\n" not in self._buffer:
            try:
                chunk = self.conn.recv(65536)
            except (OSError, socket.timeout):
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def signal(self, signum: int) -> None:
        """Signal the trial's process group (it leads its own session), or the
        process alone in the moment before its session exists."""
        for send in (os.killpg, os.kill):
            try:
                send(self.pid, signum)
                return
            except ProcessLookupError:
                continue
            except PermissionError:  # pragma: no cover - pid reused by another user's process
                return


def start_warm(socket_path: str, command: list[str]) -> tuple[WarmChild | None, str]:
    """Ask the warm server at `socket_path` to run `command` with this process's
    stdin/stdout/stderr, environment and directory. Returns the child, or None
    and why the command must start cold."""
    argv = warm_argv(command, sys.executable)
    if argv is None:
        return None, "the command is not `python SCRIPT` or `python -m MODULE` with this interpreter"
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(CONNECT_TIMEOUT)
    try:
        conn.connect(socket_path)
    except OSError as e:
        conn.close()
        return None, f"no warm server at {socket_path} ({e.strerror or e})"
    payload = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode() + b"\n"
    try:
        sent = socket.send_fds(conn, [payload], [0, 1, 2])
        if sent < len(payload):
            conn.sendall(payload[sent:])
        conn.settimeout(REPLY_TIMEOUT)
        child = WarmChild(pid=0, create_time=None, conn=conn)  # the pid comes in the reply
        reply = child.next_message()
    except OSError as e:
        conn.close()
        return None, f"the warm server did not take the request ({e})"
    if not reply or not isinstance(reply.get("pid"), int):
        conn.close()
        why = (reply or {}).get("error") or "no answer"
        return None, f"the warm server refused: {why}"
    child.pid = reply["pid"]
    child.create_time = reply.get("create_time")
    return child, ""


def create_time(pid: int) -> float | None:
    """When `pid` was created (psutil's create_time, which status checks compare
    against to tell a reused pid); None if it is gone."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


# --- the server --------------------------------------------------------------------------------

class Server:
    def __init__(self, socket_path: str, parent: int) -> None:
        self.socket_path = socket_path
        self.parent = parent
        self.children: dict[int, socket.socket] = {}
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.listener: socket.socket | None = None

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum != signal.SIGCHLD:
            self.stopping = True

    def listen(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        os.chmod(self.socket_path, 0o600)
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener
        self.sel.register(listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        signal.set_wakeup_fd(self.wake_w)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def run(self) -> int:
        while True:
            for key, _ in self.sel.select(timeout=TICK):
                if key.data == "accept" and self.listener is not None and not self.stopping:
                    self._accept()
                elif key.data == "wake":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
            self._reap()
            if not self.stopping and os.getppid() != self.parent:
                self.stopping = True  # the orchestrator is gone: no new trials will come
            if self.stopping:
                self._stop_listening()
                if not self.children:
                    return 0

    def _stop_listening(self) -> None:
        if self.listener is None:
            return
        self.sel.unregister(self.listener)
        self.listener.close()
        self.listener = None
        try:
            os.unlink(self.socket_path)
        except FileNotFoundError:
            pass

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        fds: list[int] = []
        try:
            conn.setblocking(True)
            conn.settimeout(REPLY_TIMEOUT)
            if hasattr(socket, "SO_PEERCRED"):
                import struct

                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                if struct.unpack("3i", creds)[2] != os.getuid():
                    raise ValueError("the request came from another user")
            data, fds, _, _ = socket.recv_fds(conn, REQUEST_LIMIT, 3)
            while not data.endswith(b"\n") and data and len(data) < REQUEST_LIMIT:
                more = conn.recv(REQUEST_LIMIT)
                if not more:
                    break
                data += more
            req = json.loads(data)
            if len(fds) != 3 or not _valid_request(req):
                raise ValueError("a request needs argv, env, cwd and three descriptors")
        except (OSError, ValueError) as e:
            for fd in fds:
                os.close(fd)
            _send(conn, {"error": str(e)})
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req, fds, [self.sel, conn, self.listener, *self.children.values()], (self.wake_r, self.wake_w))
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        # read now, while the child is ours to reap (still at least a zombie); if the
        # launcher went away meanwhile, the trial runs on, as a cold one would
        _send(conn, {"pid": pid, "create_time": create_time(pid)})
        print(json.dumps({"event": "forked", "pid": pid, "argv": req["argv"][:3], "time": time.time()}), flush=True)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                _send(conn, {"returncode": os.waitstatus_to_exitcode(status)})
                conn.close()


def _send(conn: socket.socket, msg: dict[str, Any]) -> bool:
    try:
        conn.sendall(json.dumps(msg).encode() + b"\n")
        return True
    except OSError:
        return False


def _valid_request(req: Any) -> bool:
    return (
        isinstance(req, dict)
        and isinstance(req.get("argv"), list)
        and bool(req["argv"])
        and all(isinstance(a, str) for a in req["argv"])
        and isinstance(req.get("env"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in req["env"].items())
        and isinstance(req.get("cwd"), str)
    )


# --- the forked trial --------------------------------------------------------------------------
def _child(req: dict[str, Any], fds: list[int], sockets: list[Any], pipe: tuple[int, int]) -> NoReturn:
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for s in sockets:
            if s is not None:
                s.close()
        for fd in pipe:
            os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        _fresh_stdio()
        _fresh_random_state()
        code = _run_main(req["argv"])
    except BaseException:  # noqa: BLE001 - whatever happens, this process must end here
        traceback.print_exc()
    _finish(code)


def _fresh_stdio() -> None:
    """New sys.stdin/stdout/stderr on descriptors 0-2, buffered as a fresh interpreter's would be."""
    write_through = bool(os.environ.get("PYTHONUNBUFFERED"))
    enc = os.environ.get("PYTHONIOENCODING", "").split(":")[0] or sys.stdout.encoding or "utf-8"

    def out(fd: int, line: bool) -> io.TextIOWrapper:
        buf = io.BufferedWriter(io.FileIO(fd, "w", closefd=False))
        return io.TextIOWrapper(buf, encoding=enc, errors="backslashreplace" if fd == 2 else "strict",
                                line_buffering=line or os.isatty(fd), write_through=write_through)

    streams = {"stdin": io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=enc),
               "stdout": out(1, False), "stderr": out(2, True)}
    for name, stream in streams.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)  # what the interpreter's own stdio objects are, in a fresh start


def _fresh_random_state() -> None:
    """Fresh entropy for NumPy's global generator, which would otherwise be the
    same in every forked trial (Python's `random` reseeds itself after a fork;
    torch's default seed is a constant in every fresh process anyway)."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()


def _run_main(argv: list[str]) -> int:
    """Run `SCRIPT args` or `-m MODULE args` as __main__; the exit code Python would give."""
    import runpy

    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    try:
        if argv[0] == "-m":
            # A cold `python -m M` has not imported M under its own name; the
            # server may have (M in `trial.preload`). Forget that copy, so runpy
            # runs M once as __main__, as a cold start does, instead of warning
            # that M was imported before it ran. A package keeps its copy: it
            # runs its __main__ submodule, which no preload imports as such.
            if not hasattr(sys.modules.get(argv[1]), "__path__"):
                sys.modules.pop(argv[1], None)
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()  # `python -m` puts the working directory first
            sys.path[1:1] = extra
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))  # a script's folder comes first
            sys.path[1:1] = extra
            runpy.run_path(argv[0], run_name="__main__")
        return 0
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code & 0xFF
        print(e.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        _print_user_traceback(e)
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # end as Python does: by SIGINT itself
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except BaseException as e:  # noqa: BLE001 - reported as an uncaught exception, exit 1
        _print_user_traceback(e)
        return 1


def _print_user_traceback(exc: BaseException) -> None:
    """The traceback a cold start prints: without the frames of runpy and of this module."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")
                              or tb.tb_frame.f_globals.get("__name__") == "runpy"):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _finish(code: int) -> NoReturn:
    """The interpreter's shutdown, without tearing modules down: join
    non-daemon threads, run atexit handlers, flush, exit."""
    import atexit
    import threading

    try:
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        atexit._run_exitfuncs()  # noqa: SLF001 - what the interpreter runs at exit
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe must not change the exit code
                pass
        os._exit(code)


def preload(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import `modules`; a module that fails is reported and skipped (its trials import it themselves)."""
    loaded, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except BaseException as e:  # noqa: BLE001 - an import may also SystemExit
            failed[name] = f"{type(e).__name__}: {e}"
    return loaded, failed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nasctl.runners.warm", description=__doc__.splitlines()[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--parent", type=int, required=True, help="stop accepting once this process is gone")
    p.add_argument("--preload", default="", help="comma-separated modules to import once")
    args = p.parse_args(argv)
    server = Server(args.socket, args.parent)
    t0 = time.perf_counter()
    loaded, failed = preload([m for m in args.preload.split(",") if m])
    print(json.dumps({"event": "preloaded", "modules": loaded, "failed": failed,
                      "seconds": round(time.perf_counter() - t0, 3)}), flush=True)
    if os.getppid() != args.parent:
        return 0  # the run ended while we were importing
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        # a child of a process with CUDA initialised cannot use CUDA: serve nothing, trials start cold
        print(json.dumps({"event": "refused", "reason": "importing the preload modules initialised CUDA"}),
              flush=True)
        return 0
    server.listen()
    try:
        return server.run()
    finally:
        server._stop_listening()  # noqa: SLF001
        try:
            os.rmdir(os.path.dirname(args.socket))
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
