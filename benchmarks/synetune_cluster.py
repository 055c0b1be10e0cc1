"""Syne Tune's MO-ASHA on the simulated cluster (run by benchmarks/time_to_front.py).

Runs in Syne Tune's own virtual environment (its pins conflict with nasctl's):

    /work/venv-synetune/bin/python benchmarks/synetune_cluster.py JOB.json OUT.json

JOB.json (written by time_to_front.py) holds the grid's search space, every
configuration's learning curve of each objective and its seconds per epoch
(already scaled to the cluster), the rungs, the cluster (devices, preemption
hazard, requeue delay, seed) and the budget in device-seconds. The cluster is
nasctl's own event engine (nasctl/runners/simcluster.py, standard library
only), so durations, preemption draws and device time are the same as for every
other method.

MO-ASHA here is Syne Tune's stopping variant, as a Syne Tune user runs it: each
configuration it suggests trains on one device from epoch 1, its objectives are
reported at every rung, and a trial MO-ASHA stops frees its device. A preempted
trial is reported to the scheduler as an error and is not run again (Syne Tune's
tuner does not restart failed trials). The script imports syne_tune, the
standard library and that one module.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nasctl.runners.simcluster import SimCluster, SimJob, preemption_after, preemption_key  # noqa: E402


def config_space(space: dict[str, Any]) -> dict[str, Any]:
    from syne_tune.config_space import choice, ordinal

    return {name: (ordinal(p["values"], kind="equal") if p.get("ordered") else choice(p["values"]))
            for name, p in space.items()}


def config_id(space: dict[str, Any], config: dict[str, Any]) -> str:
    return json.dumps({k: config[k] for k in space}, sort_keys=True)


def main() -> int:
    from syne_tune.backend.trial_status import Trial
    from syne_tune.optimizer.scheduler import SchedulerDecision
    from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA

    job = json.loads(Path(sys.argv[1]).read_text())
    space, table, objectives = job["space"], job["table"], job["objectives"]
    epochs, rungs = job["epochs"], job["rungs"]
    scheduler = MOASHA(config_space(space), metrics=objectives, do_minimize=True, time_attr="epoch",
                       max_t=epochs, grace_period=rungs[0], reduction_factor=job["eta"], random_seed=job["seed"])
    cluster = SimCluster()
    free = [str(d) for d in range(job["gpus"])]
    running: dict[str, tuple[Trial, dict[str, Any], str]] = {}
    rows: list[dict[str, Any]] = []
    now, next_id, stopped = 0.0, 0, False

    def row(sim: SimJob, config: dict[str, Any], values: dict[str, float] | None) -> dict[str, Any]:
        acct = sim.accounting()
        return {"parameters": {**config, "epochs": epochs}, "attempt": 1, **{k: acct[k] for k in (
            "submitted", "running_since", "ended", "end", "first_epoch", "epochs_done", "last_epoch", "gpus",
            "gpu_seconds", "lost_seconds")}, "values": values}

    while True:
        while not stopped and free:
            suggestion = scheduler.suggest()
            if suggestion is None:
                break
            trial = Trial(trial_id=next_id, config=dict(suggestion.config), creation_time=None)
            next_id += 1
            scheduler.on_trial_add(trial)
            entry = table[config_id(space, trial.config)]
            device = free.pop(0)
            full = {**{k: trial.config[k] for k in space}, "epochs": epochs}
            key = f"{trial.trial_id}"
            cluster.add(SimJob(key, now, 0, epochs, lambda k, s=entry["seconds_per_epoch"]: s,
                               devices=(device,), gpus=1,
                               preempt_after=preemption_after(preemption_key(full, 1), job["seed"], job["hazard"], 1)))
            running[key] = (trial, entry, device)
        t = cluster.next_time()
        if t is None:
            break
        now = t
        for ev in cluster.step(now):
            trial, entry, device = running[ev.job.key]
            config = {k: trial.config[k] for k in space}
            if ev.kind == "preempt":
                scheduler.on_trial_error(trial)
                rows.append(row(ev.job, config, None))
                del running[ev.job.key]
                free.append(device)
                continue
            if ev.kind != "epoch":
                continue
            values = {o: entry["curves"][o][ev.epoch - 1] for o in objectives}
            result = {"epoch": ev.epoch, **values}
            if ev.final:
                scheduler.on_trial_complete(trial, result)
                rows.append(row(ev.job, config, values))
                del running[ev.job.key]
                free.append(device)
            elif ev.epoch in rungs:
                if scheduler.on_trial_result(trial, result) == SchedulerDecision.STOP:
                    cluster.cancel(ev.job.key, now)
                    if trial.trial_id in scheduler.trial_info:
                        scheduler.on_trial_remove(trial)
                    rows.append(row(ev.job, config, None))
                    del running[ev.job.key]
                    free.append(device)
        spent = sum(r["gpu_seconds"] for r in rows) + sum(
            max(0.0, now - j.running_since) for j in cluster.active() if j.running_since is not None)
        if not stopped and spent >= job["budget_seconds"]:
            stopped = True
            for key in list(running):
                cluster.cancel(key, now)
                trial, _, _ = running.pop(key)
                rows.append(row(cluster.jobs[key], {k: trial.config[k] for k in space}, None))
    Path(sys.argv[2]).write_text(json.dumps({"jobs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
