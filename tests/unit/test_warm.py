"""Warm starts (nasctl/runners/warm.py): a trial forked by the warm server must
behave like the same command started cold, through the real launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from nasctl.errors import SpecError
from nasctl.orchestration.jobs import build_request, preload_modules
from nasctl.runners import JobRequest, JobState, get_runner
from nasctl.runners.launcher import CANCEL_MARKER
from nasctl.runners.warm import SOCKET_ENV, warm_argv
from nasctl.search_spaces import TRAINER_PRELOAD
from nasctl.spec import parse_spec

PROBE = textwrap.dedent("""
    import json, os, sys
    import numpy
    print(json.dumps({
        "argv": sys.argv, "name": __name__, "cwd": os.getcwd(), "path0": sys.path[0],
        "env": os.environ.get("PROBE_VALUE"), "extra_on_path": os.environ.get("PROBE_DIR") in sys.path,
        "email_loaded": "email.mime.text" in sys.modules, "ppid": os.getppid(), "pid": os.getpid(),
        "random": numpy.random.random(),
    }), flush=True)
    print("to stderr", file=sys.stderr)
    if len(sys.argv) > 1 and sys.argv[1] == "raise":
        raise ValueError("boom from the trial")
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
""")


class Server:
    def __init__(self, tmp: Path, preload: str = "email.mime.text") -> None:
        self.dir = tempfile.mkdtemp(prefix="nasctl-warm-test-")
        self.socket = os.path.join(self.dir, "sock")
        self.log = tmp / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nasctl.runners.warm", "--socket", self.socket,
                 "--parent", str(os.getpid()), "--preload", preload],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(self.socket):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.01)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    yield s
    s.stop()


def launch(tmp: Path, name: str, args: list[str], socket: str | None, wait: bool = True,
           env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    full = {**os.environ, "PROBE_VALUE": name, **(env or {})}
    full.pop(SOCKET_ENV, None)
    if socket:
        full[SOCKET_ENV] = socket
    cwd = tmp / name
    cwd.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasctl.runners.launcher", "--state-dir", str(cwd / "job"), "--",
         sys.executable, *args],
        cwd=cwd, env=full, stdout=open(cwd / "out", "wb"), stderr=open(cwd / "err", "wb"), start_new_session=True)
    if wait:
        proc.wait(60)
    return proc


def result(tmp: Path, name: str) -> tuple[dict, dict, dict, str]:
    d = tmp / name
    out = (d / "out").read_text()
    first = json.loads(out.splitlines()[0]) if out.strip() else {}
    return (first, json.loads((d / "job" / "launch.json").read_text()),
            json.loads((d / "job" / "exit.json").read_text()), (d / "err").read_text())


def test_a_warm_script_runs_as_its_cold_start_would(tmp_path: Path, server: Server) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    for name, sock in (("warm", server.socket), ("cold", None)):
        assert launch(tmp_path, name, [str(script), "3"], sock).returncode == 3
    warm, warm_launch, warm_exit, warm_err = result(tmp_path, "warm")
    cold, cold_launch, cold_exit, cold_err = result(tmp_path, "cold")
    assert warm_launch["warm"] is True and cold_launch["warm"] is False
    assert warm_exit["returncode"] == cold_exit["returncode"] == 3
    assert warm["ppid"] == server.proc.pid and warm["pid"] == warm_launch["child_pid"]
    assert warm["email_loaded"] and not cold["email_loaded"]  # it really was forked from the server
    for key in ("name", "path0"):
        assert warm[key] == cold[key]
    assert warm["argv"] == cold["argv"] == [str(script), "3"]
    assert (warm["cwd"], warm["env"]) == (str(tmp_path / "warm"), "warm")
    assert warm_err == cold_err == "to stderr\n"


def test_an_uncaught_exception_prints_what_a_cold_start_prints(tmp_path: Path, server: Server) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    for name, sock in (("warm", server.socket), ("cold", None)):
        assert launch(tmp_path, name, [str(script), "raise"], sock).returncode == 1
    assert result(tmp_path, "warm")[3] == result(tmp_path, "cold")[3]
    assert "ValueError: boom from the trial" in result(tmp_path, "warm")[3]


def test_a_module_runs_warm_with_the_trials_pythonpath(tmp_path: Path, server: Server) -> None:
    pkg = tmp_path / "code" / "probepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text(PROBE)
    env = {"PYTHONPATH": str(tmp_path / "code"), "PROBE_DIR": str(tmp_path / "code")}
    for name, sock in (("warm", server.socket), ("cold", None)):
        assert launch(tmp_path, name, ["-m", "probepkg.main", "0"], sock, env=env).returncode == 0
    warm, warm_launch, _, _ = result(tmp_path, "warm")
    cold = result(tmp_path, "cold")[0]
    assert warm_launch["warm"] is True
    assert warm["name"] == cold["name"] == "__main__"
    assert warm["argv"] == cold["argv"] == [str(pkg / "main.py"), "0"]
    assert warm["path0"] == str(tmp_path / "warm") and cold["path0"] == str(tmp_path / "cold")
    assert warm["extra_on_path"] and cold["extra_on_path"]


def test_a_preloaded_module_runs_warm_once_as_main_without_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the built-in trainer's default: the server imports the trial's own module too
    pkg = tmp_path / "code" / "probepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    # importable without side effects, as a trial module must be to be preloaded
    (pkg / "main.py").write_text("import sys\nRUNS = []\nif __name__ == '__main__':\n"
                                 + textwrap.indent(PROBE.replace("import json, os, sys", "import json, os"), "    "))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "code"))
    server = Server(tmp_path, preload="probepkg.main,email.mime.text")
    try:
        for name, sock in (("warm", server.socket), ("cold", None)):
            assert launch(tmp_path, name, ["-m", "probepkg.main", "0"], sock).returncode == 0
    finally:
        server.stop()
    preloaded = next(json.loads(line) for line in server.log.read_text().splitlines() if '"preloaded"' in line)
    assert "probepkg.main" in preloaded["modules"]  # the server did import it
    warm, warm_launch, _, warm_err = result(tmp_path, "warm")
    cold, _, _, cold_err = result(tmp_path, "cold")
    assert warm_launch["warm"] is True and warm["email_loaded"]
    assert warm["name"] == cold["name"] == "__main__"
    assert warm_err == cold_err == "to stderr\n"  # no runpy "found in sys.modules" warning


def test_forked_trials_draw_different_random_numbers(tmp_path: Path) -> None:
    # numpy imported by the server: without a reseed every fork would inherit one generator state
    server = Server(tmp_path, preload="numpy.random,email.mime.text")
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    try:
        for name in ("a", "b"):
            launch(tmp_path, name, [str(script)], server.socket)
    finally:
        server.stop()
    assert result(tmp_path, "a")[1]["warm"] and result(tmp_path, "b")[1]["warm"]
    assert result(tmp_path, "a")[0]["random"] != result(tmp_path, "b")[0]["random"]


def test_cancelling_the_launcher_ends_a_warm_trial(tmp_path: Path, server: Server) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    proc = launch(tmp_path, "t", [str(script)], server.socket, wait=False)
    launch_file = tmp_path / "t" / "job" / "launch.json"
    deadline = time.monotonic() + 30
    while not (launch_file.exists() and "child_pid" in launch_file.read_text()
               and (tmp_path / "t" / "out").read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = json.loads(launch_file.read_text())["child_pid"]
    (tmp_path / "t" / "job" / CANCEL_MARKER).write_text("{}")  # what LocalRunner.cancel does: the marker,
    os.killpg(proc.pid, signal.SIGTERM)  # then SIGTERM to the launcher's group
    assert proc.wait(30) == 128 + signal.SIGTERM
    done = json.loads((tmp_path / "t" / "job" / "exit.json").read_text())
    assert done["cancelled"] and done["returncode"] == -signal.SIGTERM
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_without_a_server_the_launcher_starts_cold(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    assert launch(tmp_path, "t", [str(script)], str(tmp_path / "missing" / "sock")).returncode == 0
    _, info, done, _ = result(tmp_path, "t")
    assert info["warm"] is False and "no warm server" in info["cold_because"] and done["returncode"] == 0


def test_a_stopped_server_finishes_its_trials_and_takes_no_new_ones(tmp_path: Path, server: Server) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time, sys\ntime.sleep(1.5)\nsys.exit(4)\n")
    proc = launch(tmp_path, "running", [str(script)], server.socket, wait=False)
    deadline = time.monotonic() + 30
    while not (tmp_path / "running" / "job" / "launch.json").exists() or "child_pid" not in (
            tmp_path / "running" / "job" / "launch.json").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    server.proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 4  # the exit status still arrives
    assert json.loads((tmp_path / "running" / "job" / "exit.json").read_text())["returncode"] == 4
    assert server.proc.wait(30) == 0
    assert not os.path.exists(server.socket) and not os.path.exists(server.dir)
    assert launch(tmp_path, "later", [str(script)], server.socket).returncode == 4
    assert result(tmp_path, "later")[1]["warm"] is False


def test_the_server_stops_when_its_orchestrator_is_gone(tmp_path: Path) -> None:
    sock = os.path.join(tempfile.mkdtemp(prefix="nasctl-warm-test-"), "sock")
    orchestrator = textwrap.dedent(f"""
        import os, subprocess, sys, time
        p = subprocess.Popen([sys.executable, "-m", "nasctl.runners.warm", "--socket", {sock!r},
                              "--parent", str(os.getpid()), "--preload", "json"], start_new_session=True,
                             stdout=subprocess.DEVNULL)
        while not os.path.exists({sock!r}):
            time.sleep(0.01)
        print(p.pid, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", orchestrator], capture_output=True, text=True, timeout=60)
    server = psutil.Process(int(out.stdout))
    try:
        server.wait(30)  # it noticed within a tick that nobody will send it trials
    finally:
        if server.is_running():
            server.kill()
    assert not os.path.exists(sock)


def test_only_python_commands_of_the_same_interpreter_run_warm() -> None:
    py = sys.executable
    assert warm_argv([py, "train.py", "--lr", "0.1"], py) == ["train.py", "--lr", "0.1"]
    assert warm_argv([py, "-m", "pkg.train", "--x", "1"], py) == ["-m", "pkg.train", "--x", "1"]
    assert warm_argv([py, "-u", "train.py"], py) is None  # interpreter options: start it as asked
    assert warm_argv([py, "-m"], py) is None
    assert warm_argv(["/usr/bin/env", "python", "train.py"], py) is None
    assert warm_argv(["/some/other/python", "train.py"], py) is None


def _spec(trial: dict) -> str:
    return json.dumps({"name": "w", "search_space": {"x": {"type": "float", "low": 0, "high": 1}},
                       "objectives": {"val_acc": {"goal": "maximize"}}, "budget": {"max_trials": 2},
                       "trial": trial})


def test_preload_defaults_and_validation(tmp_path: Path) -> None:
    builtin = parse_spec(_spec({"search_space": "mlp_digits"}), source="t")
    assert preload_modules(builtin) == (*TRAINER_PRELOAD, "nasctl.search_spaces.mlp")
    assert build_request(builtin, "w", str(tmp_path), 0, {"x": 0.5}).preload == preload_modules(builtin)
    assert preload_modules(parse_spec(_spec({"search_space": "mlp_digits", "preload": False}), source="t")) == ()
    assert preload_modules(parse_spec(_spec({"script": "train.py"}), source="t")) == ()
    assert preload_modules(parse_spec(_spec({"script": "train.py", "preload": ["torch", "my_pkg.models"]}),
                                      source="t")) == ("torch", "my_pkg.models")
    with pytest.raises(SpecError, match="is not a module name"):
        parse_spec(_spec({"script": "train.py", "preload": ["torch; rm -rf"]}), source="t")
    with pytest.raises(SpecError, match="preload applies to"):
        parse_spec(_spec({"function": "pkg.mod:fn", "preload": ["torch"]}), source="t")


def test_the_local_runner_starts_one_server_and_stops_it_on_close(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    runner = get_runner("local_cwd", {})
    jobs = []
    try:
        for i in range(3):
            request = JobRequest(name=f"warm-{i}", entrypoint=sys.executable, args=[str(script)],
                                 env={"PROBE_VALUE": str(i)}, trial_dir=str(tmp_path / "trials" / f"t{i}"),
                                 preload=("email.mime.text",))
            jobs.append(runner.submit(request))
            if i == 0:  # let the server come up: the first trial may start cold meanwhile
                server_log = tmp_path / "trials" / "warm-server.log"
                deadline = time.monotonic() + 60
                while '"preloaded"' not in (server_log.read_text() if server_log.exists() else ""):
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                time.sleep(0.2)
        deadline = time.monotonic() + 60
        while not all(s.state.is_terminal for s in runner.status(jobs).values()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert all(s.state == JobState.SUCCEEDED for s in runner.status(jobs).values())
        warm = [json.loads((tmp_path / "trials" / f"t{i}" / "job" / "launch.json").read_text())["warm"]
                for i in range(3)]
        assert warm[1:] == [True, True]
        server = runner._warm  # noqa: SLF001
        assert server is not None
    finally:
        runner.close()
    assert server.proc.wait(30) == 0


def test_a_warm_trial_outlives_a_killed_orchestrator_and_its_exit_status_is_recorded(tmp_path: Path) -> None:
    """What `nasctl resume` relies on: the trial goes on after the orchestrator
    dies (SIGKILL), and its launcher still records the exit status."""
    sock = os.path.join(tempfile.mkdtemp(prefix="nasctl-warm-test-"), "sock")
    hold = tmp_path / "hold"
    hold.touch()
    script = tmp_path / "held.py"
    script.write_text(f"import os, sys, time\nwhile os.path.exists({str(hold)!r}):\n    time.sleep(0.02)\n"
                      "sys.exit(7)\n")
    state = tmp_path / "job"
    orchestrator = textwrap.dedent(f"""
        import os, subprocess, sys, time
        server = subprocess.Popen([sys.executable, "-m", "nasctl.runners.warm", "--socket", {sock!r},
                                   "--parent", str(os.getpid()), "--preload", "json"],
                                  start_new_session=True, stdout=subprocess.DEVNULL)
        while not os.path.exists({sock!r}):
            time.sleep(0.01)
        launcher = subprocess.Popen([sys.executable, "-m", "nasctl.runners.launcher", "--state-dir", {str(state)!r},
                                     "--", sys.executable, {str(script)!r}],
                                    env={{**os.environ, "NASCTL_WARM_SOCKET": {sock!r}}}, start_new_session=True)
        print(server.pid, launcher.pid, flush=True)
        time.sleep(600)
    """)
    orch = subprocess.Popen([sys.executable, "-c", orchestrator], stdout=subprocess.PIPE, text=True)
    server_pid, launcher_pid = map(int, orch.stdout.readline().split())  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while '"child_pid"' not in ((state / "launch.json").read_text() if (state / "launch.json").exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert json.loads((state / "launch.json").read_text())["warm"] is True
    orch.kill()
    orch.wait()
    time.sleep(1.5)  # past the server's check for its orchestrator: it stops taking trials
    server, launcher = psutil.Process(server_pid), psutil.Process(launcher_pid)
    try:
        assert server.is_running() and launcher.is_running()  # still serving its running trial
        assert not os.path.exists(sock)  # but taking no new ones
        hold.unlink()
        launcher.wait(30)
        server.wait(30)
    finally:
        for p in (server, launcher):
            if p.is_running():
                p.kill()
    assert json.loads((state / "exit.json").read_text())["returncode"] == 7
