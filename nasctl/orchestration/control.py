"""Use cases the CLI, the Python API and the service call: check, dry-run, start,
resume and stop experiments. Read views are in `views`, exports in nasctl/exports/.

Everything returned is plain data (dicts, lists, records) ready for tables or JSON.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nasctl.errors import AlreadyExistsError, BadInputError, ConflictError, LeaseError, NotFoundError, SpecError
from nasctl.orchestration.views import early_stop_records, orchestrator_alive
from nasctl.runners import Runner, get_runner, runner_settings
from nasctl.runners.pool import StatusPool
from nasctl.optimizer.base import Optimizer
from nasctl.optimizer.methods import SAASBO_INSTALL_HINT, saasbo_available
from nasctl.orchestration.progress import ProgressSink, RunSummary
from nasctl.orchestration.usage import trial_usage
from nasctl.sources import source_of
from nasctl.spec import ExperimentSpec, spec_from_dict, spec_to_dict
from nasctl.store import Store, requests
from nasctl.types import ExperimentRecord, ExperimentStatus, TrialRecord, TrialStatus

if TYPE_CHECKING:
    from nasctl.orchestration.loop import Orchestrator


def prepare_orchestrator_process() -> None:
    """Process-wide settings for an orchestrator. Call before torch is imported.

    - One intra-op thread: on small machines a GP fit with 2 threads was 2-8x
      slower than with 1 (the trials need the cores).
    - A TORCH_EXTENSIONS_DIR per installation: BoTorch builds a C++ extension on
      first multi-objective use, cached by name only, so two environments must
      not share the directory.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    if "TORCH_EXTENSIONS_DIR" not in os.environ:
        tag = hashlib.sha1(sys.prefix.encode()).hexdigest()[:12]
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(base, "nasctl", "torch_extensions", tag)


def check_spec_runnable(spec: ExperimentSpec, cluster: bool = True) -> None:
    """Checks that need the registries, before anything is created: the trial
    source's own (`TrialSource.check_runnable`: a built-in search space takes
    the spec's parameters and logs its metrics, the dataset is known, a
    component takes the parameters), the optimizer method's dependencies, and
    the runner (it exists and has the GPUs the trials ask for) and, with `cluster`,
    the cluster (some node offers the CPUs, memory and GPUs a trial asks for)."""
    source = source_of(spec.trial)
    source.check_runnable(spec)
    if spec.optimizer.method == "saasbo" and not saasbo_available():
        raise BadInputError("optimizer.method saasbo needs JAX and NumPyro, which are not installed",
                            SAASBO_INSTALL_HINT)
    if spec.runner.scheduler in ("inprocess", "simulated") and not spec.trial.function:
        raise BadInputError(f"runner.scheduler {spec.runner.scheduler} runs only trial.function trials",
                            "set trial.function, or use runner.scheduler local_cwd")
    runner = get_runner(spec.runner.scheduler, spec.runner.cfg)
    runner.check_nodes(spec.trial.resources.nodes)
    if source.uses_trial_resources:  # a component's role says its own GPUs, checked when it is placed
        res = spec.trial.resources
        runner.check_gpu(res.gpu)
        if cluster:
            runner.check_resources(res.cpu, res.mem_mb, res.gpu, res.nodes)


def default_work_root() -> str:
    return os.environ.get("NASCTL_HOME") or "nasctl_runs"


def new_optimizer(spec: ExperimentSpec) -> Optimizer:
    """The optimizer for a spec: multi-fidelity with `optimizer.fidelity`, else the plain Ax adapter."""
    if spec.optimizer.fidelity is not None:
        from nasctl.optimizer.multifidelity import MultiFidelityOptimizer

        return MultiFidelityOptimizer(spec)
    from nasctl.optimizer.ax_optimizer import AxOptimizer

    return AxOptimizer(spec)


def dryrun(spec: ExperimentSpec, work_root: str) -> dict[str, Any]:
    """What `nasctl run` would launch first, without touching any database."""
    from nasctl.orchestration.jobs import build_request

    check_spec_runnable(spec, cluster=False)  # a dry run needs no cluster: what it would refuse is said below
    prepare_orchestrator_process()
    work_dir = str(Path(work_root, spec.name).resolve())
    cand = new_optimizer(spec).generate(1)[0]
    request = build_request(spec, spec.name, work_dir, cand.index, cand.parameters)
    runner = get_runner(spec.runner.scheduler, spec.runner.cfg)
    refused = None
    try:
        runner.check_resources(request.cpu, request.mem_mb, request.gpu, request.nodes)
    except SpecError as e:
        refused = f"{e.message} ({e.hint})" if e.hint else e.message
    return {
        "experiment": spec.name,
        "refused": refused,
        "scheduler": spec.runner.scheduler,
        "first_trial": {"index": cand.index, "parameters": cand.parameters, "method": cand.method},
        "command": [request.entrypoint, *request.args],
        "env": request.env,
        # local trials are forked from a warm server that imports these first (nasctl/runners/warm.py)
        "preload": list(request.preload) if spec.runner.scheduler == "local_cwd" else [],
        "request": runner.dryrun(request),
        "devices": _devices_plan(runner, request.gpu),
        "budget": spec.budget.model_dump(),
        "initial_trials": spec.initial_trials,
        "early_stopping": None if spec.early_stopping is None
        else spec.early_stopping.model_dump(),
    }


def _devices_plan(runner: Runner, gpu: int) -> dict[str, Any] | None:
    """Where GPU trials would go: the inventory nasctl places them on (local runs),
    or the request the cluster scheduler receives."""
    if gpu <= 0:
        return None
    inventory = runner.device_inventory()
    if inventory is None:
        return {"gpu_per_trial": gpu, "placed_by": runner.scheduler}
    return {"gpu_per_trial": gpu, "placed_by": "nasctl", "inventory": list(inventory.devices),
            "source": inventory.source, "trials_per_device": inventory.trials_per_device,
            "first_trial": list(inventory.devices[:gpu])}


def start_experiment(
    store: Store,
    spec: ExperimentSpec,
    work_root: str,
    on_progress: ProgressSink | None = None,
    poll_interval: float | None = None,
    lookahead: int | None = None,
) -> RunSummary:
    """Create the experiment in the store and drive it to the end. Returns a `RunSummary`.
    `lookahead` fixes how many candidates are kept ahead of the free slots (None: the
    adaptive rule of nasctl/orchestration/proposals.py; benchmarks compare the two).

    Raises:
        AlreadyExistsError: an experiment of that name exists (resume it instead).
    """
    check_spec_runnable(spec)
    prepare_orchestrator_process()
    exp = create_experiment(store, spec, work_root, f"continue it with `nasctl resume {spec.name}`, or pass --name "
                            "to start a new one")
    return _drive(store, exp, spec, on_progress, poll_interval, lookahead=lookahead)


def create_experiment(store: Store, spec: ExperimentSpec, work_root: str, exists_hint: str, *,
                      queued: bool = False, elsewhere: str | None = None) -> ExperimentRecord:
    """Record a new experiment: the one way every entry point creates one.

    Its name must be free in the store and its folder (`work_root/NAME`) hold no
    other run's trials. A run started here is recorded RUNNING, leased to this
    process, with its folder made; one submitted to the service is recorded
    QUEUED ("submitted to the service"), for the service's admission to start.

    Args:
        exists_hint: what to do when the name is taken.
        queued: record it QUEUED for the service instead of running it here.
        elsewhere: how the caller's user puts the files in another folder.

    Raises:
        AlreadyExistsError: the name is taken, or the folder holds another run's trials.
    """
    from nasctl.leases import owner_id

    try:
        store.get_experiment(spec.name)
    except NotFoundError:
        pass
    else:
        raise AlreadyExistsError(f"experiment {spec.name!r} already exists in {store.display_url}",
                                 exists_hint)
    work_dir = str(Path(work_root, spec.name).resolve())
    check_work_dir_free(store, work_dir, spec.name, elsewhere)
    if queued:
        exp = store.create_experiment(spec.name, spec_to_dict(spec), work_dir)
        store.set_experiment_status(exp.id, ExperimentStatus.QUEUED, "submitted to the service")
        return store.get_experiment(spec.name)
    exp = store.create_experiment(spec.name, spec_to_dict(spec), work_dir, owner=owner_id())
    os.makedirs(work_dir, exist_ok=True)
    return exp


def check_work_dir_free(store: Store, work_dir: str, name: str, elsewhere: str | None = None) -> None:
    """A new experiment's folder must hold no trials but its own.

    A renamed experiment keeps its folder: a new experiment under its old name must
    not share it. Trial folders left by a run that is not in this database (its
    database deleted, or `nasctl rm` without --files) would be taken for the new
    run's own: their launch and exit records and TensorBoard files sit where the
    new trials' go, so the new trials would end at once with the old results.
    `elsewhere`: how the caller's user puts the new experiment's files in another
    folder (by default `nasctl run`'s flags).

    Raises:
        AlreadyExistsError: either case, naming the folder and the way out.
    """
    from nasctl.store.manage import work_dir_users

    elsewhere = elsewhere or f"pass --workdir DIR, or start {name} under another --name"
    users = work_dir_users(store, work_dir)
    if users:
        raise AlreadyExistsError(f"the trial directory {work_dir} belongs to experiment {users[0]!r}", elsewhere)
    trials = Path(work_dir, "trials")
    if trials.is_dir() and any(trials.iterdir()):
        raise AlreadyExistsError(
            f"the trial directory {work_dir} holds trials of an earlier run that is not in {store.display_url}"
            " (a new run would take their results for its own)",
            f"delete that folder, or {elsewhere}",
        )


def resume_experiment(
    store: Store,
    name: str,
    on_progress: ProgressSink | None = None,
    poll_interval: float | None = None,
    work_root: str | None = None,
    on_orchestrator: Callable[[Orchestrator], None] | None = None,
    status_pool: StatusPool | None = None,
) -> RunSummary:
    """Continue an experiment from the store alone (after a stop, Ctrl-C or a crash).
    `on_orchestrator` is handed the Orchestrator before it runs (the service
    keeps it to stop it); with `status_pool`, the runner's status queries are
    shared with the other experiments of the pool (the service's).

    Finished trials are kept, running ones re-attached, recorded candidates
    submitted once; the optimizer is rebuilt from the stored trials.

    Raises:
        NotFoundError: no such experiment.
        LeaseError: another orchestrator is driving it.
    """
    exp = store.get_experiment(name)
    spec = spec_from_dict(exp.spec)
    check_spec_runnable(spec)
    prepare_orchestrator_process()
    if work_root is not None:
        store.set_work_dir(exp.id, str(Path(work_root, name).resolve()))
        exp = store.get_experiment(name)
    try:
        os.makedirs(exp.work_dir, exist_ok=True)
    except OSError as e:
        raise BadInputError(
            f"the experiment's trial directory {exp.work_dir} cannot be created: {e.strerror}",
            f"pass `nasctl resume {name} --workdir DIR` to put new trial files elsewhere",
        ) from None
    return _drive(store, exp, spec, on_progress, poll_interval, on_orchestrator, status_pool)


def _drive(store: Store, exp: ExperimentRecord, spec: ExperimentSpec,
           on_progress: ProgressSink | None, poll_interval: float | None,
           on_orchestrator: Callable[[Orchestrator], None] | None = None, status_pool: StatusPool | None = None,
           lookahead: int | None = None) -> RunSummary:
    from nasctl.orchestration.generator import CandidateGenerator
    from nasctl.orchestration.loop import Orchestrator, install_signal_handlers
    from nasctl.optimizer.methods import resolve_method
    from nasctl.optimizer.base import RestoredTrial
    from nasctl.optimizer.fused_kernel import prebuild_extension

    runner = get_runner(spec.runner.scheduler, spec.runner.cfg)
    settings = runner_settings(runner, spec.runner.cfg)
    if status_pool is not None:
        runner = status_pool.share(runner, spec.runner.cfg, poll_interval or settings.poll_interval)
    existing = store.list_trials(exp.id)
    stopped = early_stop_records(store, exp, existing)
    choice = resolve_method(spec)
    store.add_event(exp.id, "optimizer", f"optimizer: {choice}",
                    data={"method": choice.method, "reason": choice.reason, "initial_trials": spec.initial_trials})
    if (len(spec.objectives) > 1 and choice.method != "sobol"
            and spec.budget.max_trials > spec.initial_trials):
        prebuild_extension()

    def make_optimizer() -> Optimizer:
        opt = new_optimizer(spec)
        # The loop may re-attach CANDIDATE trials as RUNNING; for the optimizer
        # both are pending, so the stored statuses are all it needs.
        now = time.time()
        opt.restore([RestoredTrial(t.index, t.parameters, t.status.value, t.generation_method, t.values,
                                   _projected(stopped.get(t.index)), t.promoted_from,
                                   trial_usage(t, now).cost if t.status == TrialStatus.COMPLETED else None)
                     for t in existing])
        return opt

    gen = CandidateGenerator(make_optimizer)
    orch = Orchestrator(store, exp, spec, runner, gen, on_progress=on_progress, poll_interval=poll_interval,
                        settings=settings, lookahead=lookahead)
    if on_orchestrator is not None:
        on_orchestrator(orch)
    if threading.current_thread() is threading.main_thread():  # the service drives from its own threads
        install_signal_handlers(orch)
    return orch.run()


def _projected(record: dict[str, Any] | None) -> dict[str, float] | None:
    """The optimistic values an early-stopped trial was judged by (what the optimizer learns)."""
    projected = (record or {}).get("projected")
    if not isinstance(projected, dict):
        return None
    return {str(k): float(v) for k, v in projected.items() if isinstance(v, (int, float))}


def submit_experiment(store: Store, spec: ExperimentSpec, work_root: str) -> ExperimentRecord:
    """Check `spec` as `nasctl run` does and queue it for the service (QUEUED)."""
    check_spec_runnable(spec)
    return create_experiment(store, spec, work_root, "pick another name (--name), or resume it from the dashboard",
                             queued=True, elsewhere="submit it under another name (its files go to a folder of that name)")


def requeue_experiment(store: Store, name: str) -> ExperimentRecord:
    """Queue a STOPPED or FAILED experiment again for the service (the dashboard's resume).

    Raises:
        LeaseError: it is running or already queued.
    """
    exp = store.get_experiment(name)
    if exp.status in (ExperimentStatus.RUNNING, ExperimentStatus.QUEUED):
        raise LeaseError(f"experiment {name!r} is {exp.status.value}", "nothing to resume")
    store.set_experiment_status(exp.id, ExperimentStatus.QUEUED, "resume requested")
    return store.get_experiment(name)


def admits(store: Store, spec: ExperimentSpec, host: str) -> bool:
    """Admission: could the experiment's first trial be placed on `host`'s devices now?

    Decided by the rule that places trials (`choose_devices`, `trials_per_device`
    included) over the leases live trials hold on the host, so that the service
    starts an experiment exactly when its first trial would find devices."""
    from nasctl.orchestration.devices import choose_devices

    gpu = spec.trial.resources.gpu
    if gpu <= 0 or not source_of(spec.trial).uses_trial_resources:  # a component's role says its GPUs
        return True
    inventory = get_runner(spec.runner.scheduler, spec.runner.cfg).device_inventory()
    if inventory is None:  # the cluster's scheduler places them
        return True
    held = [lease for lease in store.device_leases(host=host)
            if lease.trial_status is not None and not lease.trial_status.is_terminal]
    return choose_devices(inventory, gpu, held) is not None


def _driven(exp: ExperimentRecord) -> bool:
    """Does a live orchestrator drive the experiment (so a request recorded for it is read)?"""
    return orchestrator_alive(exp) and exp.status == ExperimentStatus.RUNNING


def _abandon_here(store: Store, exp: ExperimentRecord, trials: list[TrialRecord], reason: str,
                  failure_class: str | None = None) -> list[int]:
    """End `trials` ABANDONED with no orchestrator to do it: a running one's job is
    cancelled first. Returns their indices."""
    from nasctl.runners.base import SubmittedJob

    spec = spec_from_dict(exp.spec)
    runner = get_runner(spec.runner.scheduler, spec.runner.cfg)
    for t in trials:
        if t.status == TrialStatus.RUNNING:
            runner.cancel(SubmittedJob(t.job_handle or "", t.runner_metadata))
        store.finish_trial(t.id, TrialStatus.ABANDONED, failure_reason=reason, failure_class=failure_class)
    return [t.index for t in trials]


def request_stop(store: Store, name: str, cancel: bool, reason: str | None = None) -> dict[str, Any]:
    """Stop an experiment (`nasctl stop`, the Python API, the dashboard). With a live
    orchestrator, record a request it acts on within a second; without one (QUEUED
    for the service, or its orchestrator is gone), stop it here: with `cancel`,
    running trials are cancelled and ABANDONED, else they are left for `nasctl resume`.
    `reason`: who asked (default: `nasctl stop`)."""
    exp = store.get_experiment(name)
    who = reason or ("by `nasctl stop" + (" --cancel`" if cancel else "`"))
    if _driven(exp):
        event_id = requests.request_stop(store, exp.id, who, cancel=cancel)
        return {"experiment": name, "orchestrator": exp.lease_owner, "requested": True, "cancel": cancel,
                "event_id": event_id}
    cancelled = []
    if cancel:
        cancelled = _abandon_here(store, exp, store.list_trials(exp.id, [TrialStatus.RUNNING, TrialStatus.CANDIDATE]),
                                  f"cancelled ({who})")
    if exp.status in (ExperimentStatus.RUNNING, ExperimentStatus.QUEUED) or cancelled:
        store.set_experiment_status(exp.id, ExperimentStatus.STOPPED,
                                    f"stopped {who}" + (" (no orchestrator was running)"
                                                        if exp.status == ExperimentStatus.RUNNING else ""))
    return {"experiment": name, "orchestrator": None, "requested": False, "cancel": cancel, "cancelled": cancelled}


def request_cancel(store: Store, name: str, index: int, reason: str) -> dict[str, Any]:
    """Cancel one trial (the dashboard, the Python API). With a live orchestrator,
    record a request it acts on within a second; without one, cancel its job here
    and end it ABANDONED.

    Raises:
        NotFoundError: no such experiment or trial.
        ConflictError: the trial has already ended.
    """
    exp = store.get_experiment(name)
    t = store.get_trial(exp.id, index)
    if t.status.is_terminal:
        raise ConflictError(f"trial {index} is {t.status.value}", "only candidate or running trials can be cancelled")
    if _driven(exp):
        event_id = requests.request_cancel(store, exp.id, index, reason)
        return {"experiment": name, "trial_index": index, "requested": True, "event_id": event_id}
    _abandon_here(store, exp, [t], f"cancelled on request ({reason})", "cancelled")
    return {"experiment": name, "trial_index": index, "requested": False, "event_id": None}
