"""Experiments whose trials are jobs on the local Slurm cluster: spec, trials and jobs, and waiting on them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from nasctl.runners.slurm import job_id_of, query_jobs
from nasctl.store import Store
from nasctl.types import TrialRecord, TrialStatus

SCRIPTS = Path(__file__).parent.parent / "e2e" / "scripts"


def write_spec(directory: Path, name: str, script: str, cfg: dict[str, Any], max_trials: int = 4,
               parallelism: int = 2, max_failures: int = 0) -> Path:
    """A two-objective Sobol spec over x, y in [0, 1] whose trials run tests/e2e/scripts/<script>
    as Slurm jobs (`cfg` is the runner's cfg; polled every second unless it says otherwise)."""
    spec = directory / f"{name}.yaml"
    cfg = {"poll_interval": 1, **cfg}  # tests wait less than the default 5 s between polls
    spec.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        f"budget: {{max_trials: {max_trials}, parallelism: {parallelism}, max_failures: {max_failures}}}\n"
        f"trial: {{script: {SCRIPTS / script}, resources: {{cpu: 1, mem_mb: 500, gpu: 0}}}}\n"
        f"runner: {{scheduler: slurm, cfg: {json.dumps(cfg)}}}\n"
        f"optimizer: {{method: sobol, initial_trials: {max_trials}, seed: 3}}\n"
    )
    return spec


def trials(db: str, name: str, statuses: list[TrialStatus] | None = None) -> list[TrialRecord]:
    """The trials of experiment `name` (those in `statuses`, else all), read from the store."""
    store = Store(db)
    try:
        return store.list_trials(store.get_experiment(name).id, statuses)
    finally:
        store.close()


def slurm_states(records: list[TrialRecord]) -> dict[int, str]:
    """trial index -> the state Slurm reports for its job ("?" if Slurm does not know it)."""
    ids = {t.index: str(job_id_of(t.job_handle or "")) for t in records}
    found = query_jobs(list(ids.values()))
    return {i: found[j].state if j in found else "?" for i, j in ids.items()}


def wait_until(what: str, check: Any, timeout: float, proc: subprocess.Popen[str] | None = None) -> Any:
    """The first true value of `check()` (an exception counts as not yet), polled every 0.25 s;
    fails after `timeout` s, or at once if `proc` (the orchestrator) ends first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the orchestrator ended while waiting for {what}: {out}\n{err}")
        try:
            value = check()
        except Exception:  # the experiment may not exist yet
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.25)


def scancel_experiment(db: str, name: str) -> None:
    """Cancel every Slurm job a test's experiment left behind."""
    try:
        ids = [job_id_of(t.job_handle or "") for t in trials(db, name)]
    except Exception:
        return
    ids = [i for i in ids if i]
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True)
