"""Syne Tune's MO-ASHA on nasctl's built-in trainer (run by benchmarks/multifidelity.py).

Runs in its own virtual environment (syne-tune's pins conflict with nasctl's):

    /work/venv-synetune/bin/python benchmarks/synetune_moasha.py JOB.json OUT.json

JOB.json (written by benchmarks/multifidelity.py) holds the search space, the
objectives, the rungs, the trial command (nasctl's Python and the built-in
space's module), the budget in epochs, the seed and the parallelism. Each
configuration MO-ASHA starts is trained to the first rung by the same trainer
process nasctl launches, with NASCTL_CHECKPOINT_DIR; when MO-ASHA lets it go
on past a rung, the next process continues from that checkpoint
(NASCTL_RESUME_FROM) to the next rung, so both systems pay the same epochs for
the same work. Syne Tune's scheduler only decides at rung levels, so results
are reported there. The script imports syne_tune and the standard library only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

FINAL_RE = re.compile(r"final step \d+: (?P<values>[^(]*)")


def config_space(space: dict[str, Any]) -> dict[str, Any]:
    from syne_tune.config_space import choice, loguniform, lograndint, randint, uniform

    out: dict[str, Any] = {}
    for name, p in space.items():
        kind = p["type"]
        if kind == "fixed":
            out[name] = p["value"]
        elif kind == "choice":
            out[name] = choice(list(p["values"]))
        elif kind == "int":
            out[name] = (lograndint if p.get("log") else randint)(p["low"], p["high"])
        elif kind == "float":
            out[name] = (loguniform if p.get("log") else uniform)(p["low"], p["high"])
    return out


def active(space: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Drop conditional parameters whose parent does not activate them (as nasctl does)."""
    out = {}
    for name, p in space.items():
        when = p.get("when")
        if when:
            (parent, values), = when.items()
            if config.get(parent) not in values:
                continue
        out[name] = config[name]
    return out


def train(job: dict[str, Any], workdir: str, key: str, config: dict[str, Any], epochs: int,
          resume: str | None) -> tuple[dict[str, float], float, str]:
    """Run the trainer to `epochs`; returns (final values, training seconds, checkpoint path)."""
    tdir = os.path.join(workdir, key)
    tb = os.path.join(tdir, "tb")
    os.makedirs(tb, exist_ok=True)
    argv: list[str] = []
    for k, v in {**job["args"], **active(job["space"], config), job["fidelity_parameter"]: epochs}.items():
        argv += [f"--{k}", repr(v) if isinstance(v, float) else str(v)]
    env = {**os.environ, "NASCTL_LOG_DIR": tb, "NASCTL_CHECKPOINT_DIR": os.path.join(tdir, "checkpoints"),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": job["pythonpath"]}
    env.pop("NASCTL_RESUME_FROM", None)
    if resume:
        env["NASCTL_RESUME_FROM"] = resume
    r = subprocess.run([job["python"], *job["command"], *argv], env=env, capture_output=True, text=True,
                       cwd=tdir, check=False)
    m = FINAL_RE.search(r.stdout)
    if r.returncode != 0 or m is None:
        raise RuntimeError(f"trial {key} failed ({r.returncode}): {r.stderr[-2000:]}")
    values = {}
    for part in m.group("values").split(","):
        k, _, v = part.strip().partition("=")
        if k:
            values[k] = float(v)
    with open(os.path.join(tb, "trial_info.json")) as f:
        seconds = float(json.load(f).get("train_seconds", 0.0))
    return values, seconds, os.path.join(tdir, "checkpoints", "last.ckpt")


def main() -> int:
    from syne_tune.backend.trial_status import Trial
    from syne_tune.optimizer.scheduler import SchedulerDecision
    from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA

    job = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    rungs: list[int] = job["rungs"]
    objectives: dict[str, bool] = job["objectives"]  # name -> maximize
    names = list(objectives)
    scheduler = MOASHA(config_space(job["space"]), metrics=names, do_minimize=True, time_attr="epoch",
                       max_t=rungs[-1], grace_period=rungs[0], reduction_factor=job["eta"],
                       random_seed=job["seed"])
    workdir = tempfile.mkdtemp(prefix="moasha-")
    lock = threading.Lock()
    records: list[dict[str, Any]] = []
    spent = 0.0
    next_id = 0
    t0 = time.monotonic()

    def run_rung(trial: Trial, rung: int, resume: str | None, done_epochs: int) -> tuple[Trial, int, Any]:
        values, secs, ckpt = train(job, workdir, f"t{trial.trial_id}_r{rung}", trial.config, rungs[rung], resume)
        return trial, rung, (values, secs, ckpt, rungs[rung] - done_epochs)

    pending: set[Future[Any]] = set()
    with ThreadPoolExecutor(job["parallelism"]) as pool:
        def start_new() -> None:
            nonlocal next_id
            sugg = scheduler.suggest()
            trial = Trial(trial_id=next_id, config=sugg.config, creation_time=None)
            next_id += 1
            scheduler.on_trial_add(trial)
            pending.add(pool.submit(run_rung, trial, 0, None, 0))

        while spent < job["budget_epochs"] or pending:
            while spent < job["budget_epochs"] and len(pending) < job["parallelism"]:
                start_new()
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                pending.discard(fut)
                trial, rung, (values, secs, ckpt, cost) = fut.result()
                with lock:
                    spent += cost
                minimized = {n: (-values[n] if objectives[n] else values[n]) for n in names}
                result = {"epoch": rungs[rung], **minimized}
                records.append({"trial": trial.trial_id, "epochs": rungs[rung], "cost_epochs": cost,
                                "train_seconds": secs, "values": values, "config": trial.config,
                                "elapsed": time.monotonic() - t0})
                if rung + 1 == len(rungs):
                    scheduler.on_trial_complete(trial, result)
                    continue
                decision = scheduler.on_trial_result(trial, result)
                if decision == SchedulerDecision.CONTINUE and spent < job["budget_epochs"]:
                    pending.add(pool.submit(run_rung, trial, rung + 1, ckpt, rungs[rung]))
                elif trial.trial_id in scheduler.trial_info:
                    scheduler.on_trial_remove(trial)
    with open(out_path, "w") as f:
        json.dump({"records": records, "spent_epochs": spent}, f, indent=1, default=str)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
