"""`nasctl serve` as a real process on a free loopback port, and `nasctl submit` to it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import free_port, run_cli

TOKEN = "s3cret"


GPU_SPEC = """
name: {name}
search_space: {{x: {{type: float, low: 0.0, high: 1.0}}}}
objectives: {{f: {{goal: minimize}}}}
budget: {{max_trials: 2}}
trial: {{script: /bin/true, resources: {{gpu: {gpu}}}}}
runner: {{scheduler: local_cwd, cfg: {{devices: [0, 1], trials_per_device: {per}}}}}
"""
"""A spec whose trials ask for `gpu` of devices 0 and 1 (`per` trials may share one): for admission."""


class Service:
    """`nasctl serve --db <db>` with TOKEN, started in `cwd` with `env` added; `args` are more options."""

    def __init__(self, db: str, cwd: Path, env: dict[str, str], *args: str) -> None:
        self.db, self.cwd, self.env, self.args = db, cwd, env, args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None

    def start(self, wait: bool = True) -> subprocess.Popen[str]:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nasctl", "serve", "--db", self.db, "--port", str(self.port), "--token", TOKEN,
             "--workdir", str(self.cwd / "runs"), *self.args],
            cwd=self.cwd, env={**os.environ, **self.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if wait:
            deadline = time.monotonic() + 90
            while True:
                assert self.proc.poll() is None, self.proc.communicate()
                try:
                    if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                        return self.proc
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the service never became healthy"
                time.sleep(0.2)
        return self.proc

    def submit(self, spec: Path, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess[str]:
        extra = ["--token", token] if token else []
        return run_cli("submit", str(spec), "--server", self.url, *extra, *args, cwd=self.cwd)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
