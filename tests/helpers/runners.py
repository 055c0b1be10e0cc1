"""Jobs for runner tests: requests for a Python one-liner or a trial function, and waiting for a job to end."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from nasctl.runners import JobRequest, JobState, Runner, SubmittedJob


def local_request(tmp_path: Path, name: str, code: str) -> JobRequest:
    """A job that runs `python -c <code>` as trial 0, in tmp_path/<name>."""
    return JobRequest(name, sys.executable, ["-c", code], {"NASCTL_TRIAL_ID": "0"}, str(tmp_path / name))


def wait_terminal(runner: Runner, job: SubmittedJob, timeout: float = 60) -> JobState:
    """The terminal state of `job`, polled every 0.1 s; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = runner.status([job])[job.handle]
        if st.state.is_terminal:
            return st.state
        time.sleep(0.1)
    raise AssertionError(f"{job.handle} did not finish in {timeout}s")


def function_request(tmp_path: Path, name: str, target: str, params: dict[str, object]) -> JobRequest:
    """A job that calls the trial function `target` ("module:function") with `params`, in tmp_path/<name>."""
    return JobRequest(
        name=name, entrypoint=sys.executable,
        args=["-m", "nasctl.search_spaces.function", target, "--parameters", json.dumps(params)],
        env={"NASCTL_TRIAL_ID": "0", "NASCTL_LOG_DIR": str(tmp_path / name / "tb")},
        trial_dir=str(tmp_path / name),
    )
