"""The reference for the end-to-end benchmark: the stock Ax path.

    python benchmarks/ax_reference.py SPEC.yaml WORK_DIR

Runs the experiment of SPEC.yaml the way the "Multi-objective NAS with Ax"
tutorial does, on today's Ax: `ax.orchestration.orchestrator.Orchestrator`
with Ax's own `TorchXRunner` on TorchX's `local_cwd` scheduler and Ax's
`TensorboardMetric` reading each trial's TensorBoard logs. The search space,
objectives, thresholds, generation strategy (quasi-random start, then
BoTorch) and seed are configured exactly as nasctl configures its own Ax
client (through `AxOptimizer`, so both are identical by construction); the
budget and parallelism become `OrchestratorOptions(total_trials,
max_pending_trials)`, everything else is Ax's default (poll every 1 s with
1.5x back-off, generation on the orchestrator's thread).

Two workarounds for known defects of the stock runner, neither of which
changes when anything is scheduled: it is given the scheduler name
`local_cwd` (its default "local" does not exist in TorchX 0.7), and a
subclass adds `tb_log_dir` to the run metadata (the stock `run` never sets
it, and `TensorboardMetric` reads nothing without it).

Each trial runs `benchmarks/trial_clock.py` (the digits trainer with a clock
file) with the same arguments and environment nasctl gives its trials.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

from nasctl.orchestration.control import prepare_orchestrator_process

TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trial_clock.py")


def trial_dir(work_dir: str, index: int) -> str:
    return os.path.join(work_dir, "trials", f"trial_{index:04d}")


def main(spec_path: str, work_dir: str) -> dict[str, Any]:
    prepare_orchestrator_process()  # same thread count and extension cache as nasctl
    t0 = time.time()
    from ax.core.base_trial import BaseTrial
    from ax.metrics.tensorboard import TensorboardMetric
    from ax.orchestration.orchestrator import Orchestrator
    from ax.orchestration.orchestrator_options import OrchestratorOptions
    from ax.runners.torchx import TorchXRunner
    from torchx import specs

    from nasctl.optimizer.ax_optimizer import AxOptimizer
    from nasctl.spec import load_spec

    spec = load_spec(spec_path)
    os.makedirs(work_dir, exist_ok=True)
    cpu = spec.trial.resources.cpu

    def component(trial_idx: int, tracker_base: str, **params: Any) -> specs.AppDef:
        tdir = trial_dir(work_dir, trial_idx)
        os.makedirs(tdir, exist_ok=True)
        argv: list[str] = []
        for k, v in {**spec.trial.args, **params}.items():
            argv += [f"--{k}", repr(v) if isinstance(v, float) else str(v)]
        env = {"NASCTL_LOG_DIR": os.path.join(tdir, "tb"), "NASCTL_TRIAL_ID": str(trial_idx),
               "OMP_NUM_THREADS": str(cpu), "MKL_NUM_THREADS": str(cpu), "PYTHONUNBUFFERED": "1"}
        r = spec.trial.resources
        return specs.AppDef(
            name=f"ref-{trial_idx}",
            roles=[specs.Role(name="trial", image=os.getcwd(), entrypoint=sys.executable, args=[TRAINER, *argv],
                              env=env, resource=specs.Resource(cpu=r.cpu, gpu=r.gpu, memMB=r.mem_mb))],
        )

    class LogDirTorchXRunner(TorchXRunner):
        """The stock runner plus the `tb_log_dir` key that `TensorboardMetric` needs."""

        def run(self, trial: BaseTrial) -> dict[str, Any]:
            metadata = super().run(trial)
            metadata["tb_log_dir"] = os.path.join(trial_dir(work_dir, trial.index), "tb")
            return metadata

    opt = AxOptimizer(spec)  # the same Client configuration nasctl uses
    client = opt.client
    client.configure_runner(LogDirTorchXRunner(
        tracker_base=work_dir, component=component, orchestrator="local_cwd",
        cfg={"log_dir": os.path.join(work_dir, "torchx")},
    ))
    client.configure_metrics([
        TensorboardMetric(name=opt.names[name], tag=name, lower_is_better=not obj.maximize)
        for name, obj in spec.objectives.items()
    ])
    orchestrator = Orchestrator(
        experiment=client._experiment,  # noqa: SLF001 - Client.run_trials does the same
        generation_strategy=client._generation_strategy,  # noqa: SLF001
        options=OrchestratorOptions(
            max_pending_trials=spec.budget.parallelism,
            total_trials=spec.budget.max_trials,
            logging_level=logging.WARNING,
        ),
    )
    t_start = time.time()
    orchestrator.run_n_trials(max_trials=spec.budget.max_trials)
    t_end = time.time()
    trials = client._experiment.trials  # noqa: SLF001
    statuses: dict[str, int] = {}
    for t in trials.values():
        statuses[t.status.name] = statuses.get(t.status.name, 0) + 1
    return {"setup_seconds": t_start - t0, "loop_seconds": t_end - t_start, "statuses": statuses,
            "trial_dirs": [trial_dir(work_dir, i) for i in sorted(trials)]}


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2])
    with open(os.path.join(sys.argv[2], "reference.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
