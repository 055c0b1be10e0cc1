"""The Python API: run, resume and read experiments from Python or a notebook.

    import nasctl

    exp = nasctl.run("examples/digits_mlp.yaml", name="digits-1", max_trials=12)
    exp.trials_dataframe()      # one row per trial (pandas)
    exp.pareto()                # the observed Pareto front, as `Trial`s

The functions are the CLI's commands without the terminal: `run` takes the
code path of `nasctl run` (the spec checks, the store, `start_experiment` and
its orchestrator loop), `resume` that of `nasctl resume`, and the read methods
return what `nasctl status/trials/pareto --json` print. Errors are the typed
exceptions of `nasctl.errors`; `str(error)` is the line the CLI prints after
"Error: ".

In a notebook: nothing is drawn unless `progress=` asks for it; `run` returns
after the orchestrator has ended, its generator thread joined and its runner
closed (with `wait=False` it returns once the loop runs, and `wait()` joins
it); the process-wide settings a run needs (one torch and BLAS thread for the
optimizer, its Ctrl-C handler) are put back as they were when it ends.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypedDict, Union, cast

from nasctl.errors import BadInputError, NasctlError
from nasctl.types import TrialStatus

if TYPE_CHECKING:
    import pandas as pd

    from nasctl.orchestration.progress import Progress, RunSummary
    from nasctl.spec import ExperimentSpec
    from nasctl.store import Store
    from nasctl.types import TrialRecord

SpecLike = Union[str, "os.PathLike[str]", Mapping[str, Any], "ExperimentSpec"]
"""A spec file's path, a mapping with the spec's keys, or a parsed `ExperimentSpec`."""

ProgressOption = Union[bool, Callable[["Progress"], None]]
"""`progress=`: False (default) draws nothing; True draws what `nasctl run` draws
(a live panel on a terminal, one line per event elsewhere, on standard error);
a callable receives every `nasctl.orchestration.progress.Progress` snapshot."""


class ExperimentInfo(TypedDict):
    """One row of `list_experiments()` (what `nasctl ls --json` prints)."""

    name: str
    status: str
    trials: dict[str, int]
    max_trials: int | None
    objectives: list[str]
    created_at: str


@dataclass(frozen=True)
class Trial:
    """One trial as stored.

    Attributes:
        index: the trial's number in its experiment (0, 1, ...).
        status: CANDIDATE, RUNNING, COMPLETED, FAILED, EARLY_STOPPED or ABANDONED
            (a `str` enum: `trial.status == "COMPLETED"` works).
        method: how it was proposed (e.g. Sobol, BoTorch).
        parameters: its active parameters (inactive conditional ones left out).
        values: its metric values (empty unless it completed or stopped early).
        pareto: on the observed Pareto front (completed, feasible, non-dominated).
        started_at, ended_at: UTC times (None before it started / while it runs).
        duration_s: seconds from start to end.
        failure_reason: why it failed or was stopped, if it was.
        log_dir: where its TensorBoard logs are.
        devices: the GPUs nasctl placed it on, if any.
        note: its note (markdown, from the dashboard), if it has one.
        fidelity: with `optimizer.fidelity`, the value it trained to (else None).
        promoted_from: with `optimizer.fidelity`, the trial it continued, if promoted.
        failure_class: why it ended without a result (user, infrastructure, timeout,
            cancelled), if it did.
        attempts: every attempt it ran, oldest first: {number, started_at, ended_at,
            failure_class, reason, node, job} (ISO 8601 UTC times); more than one when
            an attempt was retried (`trial.retry_on`).
    """

    index: int
    status: TrialStatus
    method: str
    parameters: dict[str, Any]
    values: dict[str, float]
    pareto: bool
    started_at: datetime | None
    ended_at: datetime | None
    duration_s: float | None
    failure_reason: str | None
    log_dir: str | None
    devices: list[str] | None
    note: str | None = None
    fidelity: float | None = None
    promoted_from: int | None = None
    failure_class: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)


class Experiment:
    """A handle on one experiment in a nasctl database.

    Get one from `run`, `resume` or `load`. Every read goes to the database, so
    it shows the current state, also while another process (or a background
    `run`) drives the experiment.
    """

    def __init__(self, name: str, db: str | None = None) -> None:
        """The experiment `name` in database `db` (as `load`).

        Raises:
            NotFoundError: no such experiment, or no database at that URL.
        """
        from nasctl.store import Store

        self._attach(name, Store(db))

    @classmethod
    def _driven(cls, name: str, store: Store, summary: RunSummary | None = None,
                thread: threading.Thread | None = None, outcome: dict[str, Any] | None = None) -> Experiment:
        """The handle `run` and `resume` return: on their store, with how the run ended or its thread."""
        exp = cls.__new__(cls)
        exp._attach(name, store)
        exp._summary, exp._thread, exp._outcome = summary, thread, outcome if outcome is not None else {}
        return exp

    def _attach(self, name: str, store: Store) -> None:
        store.get_experiment(name)  # NotFoundError now rather than at the first read
        self.name = name
        self.db = store.url
        self._store = store
        self._summary: RunSummary | None = None
        self._thread: threading.Thread | None = None
        self._outcome: dict[str, Any] = {}

    def __repr__(self) -> str:
        state = "running in the background" if self.running else self._store.get_experiment(self.name).status.value
        return f"<nasctl.Experiment {self.name!r} ({state}) in {self._store.display_url}>"

    # --- life cycle ----------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether this process drives it on a background thread now (`run(..., wait=False)`)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def summary(self) -> RunSummary | None:
        """How the run or resume of this process ended (status, reason, counts,
        hypervolume, front, elapsed seconds); None for a loaded experiment or
        while a background run goes on."""
        return self._summary

    def wait(self, timeout: float | None = None) -> Experiment:
        """Block until a background run (`wait=False`) has ended; at once otherwise.

        Interrupting the wait (Ctrl-C, a notebook's interrupt) stops the
        experiment like `stop()`, waits for its loop to end, and re-raises.

        Raises:
            TimeoutError: `timeout` seconds passed and the run goes on.
            NasctlError: the error that ended the run (raised once).
        """
        if self._thread is None:
            return self
        try:
            self._thread.join(timeout)
        except KeyboardInterrupt:
            self.stop()
            self._thread.join()
            raise
        if self._thread.is_alive():
            raise TimeoutError(f"experiment {self.name} still runs after {timeout} s")
        self._thread = None
        self._summary = self._outcome.get("summary")
        error = self._outcome.pop("error", None)
        if error is not None:
            raise error
        return self

    def stop(self, cancel: bool = False) -> dict[str, Any]:
        """Stop the experiment, as `nasctl stop` does: the orchestrator driving it
        (here or in another process) ends at its next step, within about a
        second; running trials are left for `resume` unless `cancel`. Returns
        at once with what was done (`nasctl stop --json`); `wait()` blocks
        until a background run here has ended."""
        from nasctl.orchestration.control import request_stop

        return request_stop(self._store, self.name, cancel)

    def close(self) -> None:
        """Close the database connections (after a background run has ended)."""
        self._store.close()

    def __enter__(self) -> Experiment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------
    @property
    def spec(self) -> ExperimentSpec:
        """The experiment's spec, as stored."""
        from nasctl.spec import spec_from_dict

        return spec_from_dict(self._store.get_experiment(self.name).spec)

    def status(self) -> dict[str, Any]:
        """State, trial counts, hypervolume, optimizer, budget, where files are
        (the keys of `nasctl status NAME --json`)."""
        from nasctl.orchestration.views import status_view

        return status_view(self._store, self.name)

    def trials(self, status: str | TrialStatus | None = None) -> list[Trial]:
        """Every trial by index, or those in one state (e.g. "FAILED")."""
        from nasctl.exports import load_export

        wanted = _trial_status(status) if status is not None else None
        data = load_export(self._store, self.name)
        return [_trial(t, data.spec, data.front, data.notes) for t in data.trials
                if wanted is None or t.status == wanted]

    def pareto(self) -> list[Trial]:
        """The observed Pareto front (completed, feasible, non-dominated trials),
        sorted by the first objective, best first (as `nasctl pareto`)."""
        from nasctl.orchestration.views import pareto_view

        by_index = {t.index: t for t in self.trials()}
        return [by_index[row["index"]] for row in pareto_view(self._store, self.name)["front"]]

    def trials_dataframe(self) -> pd.DataFrame:
        """One row per trial, indexed by trial number (`trial`), with columns
        `status`, `method`, `params.<name>` for every parameter, `metrics.<name>`
        for every metric (objectives and constrained metrics first), `pareto`,
        `started_at`, `ended_at` (UTC), `duration_s`, `failure_reason` and `note`;
        with `optimizer.fidelity`, also `fidelity` and `promoted_from`.
        A value a trial does not have (an inactive conditional parameter, a
        metric of a failed trial, no note) is missing (NaN/None)."""
        from nasctl.exports import load_export
        from nasctl.exports.table import trials_frame

        return trials_frame(load_export(self._store, self.name))

    # --- exports -------------------------------------------------------------------
    def export_tensorboard(self, out: str | os.PathLike[str]) -> dict[str, Any]:
        """Write a TensorBoard HParams view into folder `out` (`nasctl export
        --format tensorboard`): one run per trial. Returns what was written."""
        from nasctl.exports.tensorboard import export_tensorboard

        return export_tensorboard(self._store, self.name, out)

    def export_mlflow(self, tracking_uri: str) -> dict[str, Any]:
        """Log one MLflow run per trial at `tracking_uri` (`nasctl export
        --format mlflow`; needs `pip install 'nasctl[mlflow]'`). Returns the run counts."""
        from nasctl.exports.mlflow import export_mlflow

        return export_mlflow(self._store, self.name, tracking_uri)


# --- functions ------------------------------------------------------------------------
def run(
    spec: SpecLike,
    *,
    db: str | None = None,
    name: str | None = None,
    workdir: str | os.PathLike[str] | None = None,
    wait: bool = True,
    progress: ProgressOption = False,
    **overrides: Any,
) -> Experiment:
    """Start a new experiment and drive it until its budget is spent (`nasctl run`).

    Args:
        spec: a spec file's path, a mapping with the spec's keys (relative
            paths in it resolve against the current folder), or an
            `ExperimentSpec` (`nasctl.spec.load_spec`).
        db: database URL; default `$NASCTL_DB`, else `sqlite:///nasctl.db` in
            the current folder (created if missing).
        name: the experiment's name, instead of the spec's `name`.
        workdir: where trial folders go (default `$NASCTL_HOME`, else ./nasctl_runs).
        wait: True (default) returns once the experiment has ended; False
            returns as soon as its loop runs on a background thread of this
            process, and `Experiment.wait()` joins it (not on an in-memory
            SQLite database, which that thread cannot share).
        progress: False (default) draws nothing; True draws what `nasctl run`
            draws, on standard error; a callable receives every `Progress`.
        **overrides: `max_trials`, `parallelism`, `trial_timeout`,
            `max_failures` set `budget.<key>`; a top-level spec key
            (`optimizer`, `runner`, `trial`, `budget`, `objectives`,
            `constraints`, `search_space`, `early_stopping`) sets that key,
            merging a mapping into the spec's: `optimizer={"seed": 3}`,
            `runner={"cfg": {"workers": 2}}`.

    Returns:
        The `Experiment`. A run that ended FAILED or STOPPED still returns:
        see `Experiment.summary` (or `status()`) for how it ended.

    Raises:
        SpecError: the spec (after the overrides) is invalid.
        AlreadyExistsError: the database holds an experiment of that name
            (continue it with `nasctl.resume(name)`).
        NasctlError: anything else the CLI reports as an error (same message).
    """
    from nasctl.orchestration import control
    from nasctl.store import Store

    parsed = _resolve_spec(spec, name, overrides)
    control.check_spec_runnable(parsed)  # before the database is created: bad input writes nothing
    store = Store(db, create=True)
    work_root = os.fspath(workdir) if workdir is not None else control.default_work_root()
    return _drive(store, parsed.name, wait, progress,
                  lambda on_progress: control.start_experiment(store, parsed, work_root, on_progress=on_progress))


def resume(
    name: str,
    *,
    db: str | None = None,
    workdir: str | os.PathLike[str] | None = None,
    wait: bool = True,
    progress: ProgressOption = False,
) -> Experiment:
    """Continue an experiment after a stop, an interrupt or a crash (`nasctl resume`):
    finished trials are kept, running ones re-attached, the budget completed.
    `workdir`, `wait` and `progress` are those of `run`.

    Raises:
        NotFoundError: no such experiment (or no database).
        LeaseError: another orchestrator drives it.
    """
    from nasctl.orchestration import control
    from nasctl.store import Store

    store = Store(db)
    store.get_experiment(name)
    work_root = os.fspath(workdir) if workdir is not None else None
    return _drive(store, name, wait, progress,
                  lambda on_progress: control.resume_experiment(store, name, on_progress=on_progress,
                                                                work_root=work_root))


def load(name: str, db: str | None = None) -> Experiment:
    """The experiment called `name` in the database (`db` as in `run`).

    Raises:
        NotFoundError: no such experiment, or no database at that URL.
    """
    return Experiment(name, db)


def list_experiments(db: str | None = None) -> list[ExperimentInfo]:
    """Every experiment in the database, newest first (`nasctl ls --json`)."""
    from nasctl.orchestration.views import list_view
    from nasctl.store import Store

    store = Store(db)
    try:
        return [cast(ExperimentInfo, row) for row in list_view(store)]
    finally:
        store.close()


# --- helpers --------------------------------------------------------------------------
def _drive(store: Store, name: str, wait: bool, progress: ProgressOption,
           start: Callable[[Callable[[Progress], None] | None], RunSummary]) -> Experiment:
    """Run `start` (start_experiment or resume_experiment) here, or on a background thread.

    Raises:
        BadInputError: `wait=False` on an in-memory SQLite database, which lives in
            one connection: the loop's thread would open a new, empty one.
    """
    from nasctl.store import Store

    if not wait and store.is_sqlite and store.path is None:
        store.close()
        raise BadInputError(
            f"wait=False cannot drive an experiment in the in-memory database {store.display_url}: "
            "its background thread would see a new, empty database",
            "pass a database file, e.g. db='sqlite:///nasctl.db', or run with wait=True",
        )
    display, on_progress = _progress(progress)
    if wait:
        with _ProcessSettings(), display:
            summary = start(on_progress)
        return Experiment._driven(name, store, summary)

    started = threading.Event()
    outcome: dict[str, Any] = {}

    def relay(p: Progress) -> None:
        started.set()
        if on_progress is not None:
            on_progress(p)

    def work() -> None:
        try:
            with _ProcessSettings(), display:
                outcome["summary"] = start(relay)
        except BaseException as e:  # handed to the caller: raised by run() or by wait()
            outcome["error"] = e
        finally:
            store.close()
            started.set()

    thread = threading.Thread(target=work, name=f"nasctl-run-{name}")
    thread.start()
    started.wait()
    if "error" in outcome:  # it failed before its loop ran: the caller gets the error now
        thread.join()
        raise outcome["error"]
    return Experiment._driven(name, Store(store.url), thread=thread, outcome=outcome)  # its own connections


def _progress(progress: ProgressOption) -> tuple[Any, Callable[[Progress], None] | None]:
    """A context manager around the run (the display, if any) and the progress callback."""
    import contextlib

    if progress is True:
        from nasctl.console import ProgressDisplay

        display = ProgressDisplay(enabled=True)
        return display, display.update
    if progress is False or progress is None:
        return contextlib.nullcontext(), None
    if not callable(progress):
        raise BadInputError(f"progress={progress!r} is neither a bool nor a callable",
                            "pass progress=True to see what `nasctl run` shows, or a function of one Progress")
    return contextlib.nullcontext(), progress


class _ProcessSettings:
    """Puts back what a run changes in its process: the thread-count environment
    and TORCH_EXTENSIONS_DIR (`prepare_orchestrator_process`), torch's and the
    BLAS libraries' thread counts (the optimizer sets one thread), and the
    SIGINT/SIGTERM handlers (the loop's Ctrl-C handling, main thread only)."""

    ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCH_EXTENSIONS_DIR")

    def __enter__(self) -> _ProcessSettings:
        import torch
        from threadpoolctl import ThreadpoolController

        self.env = {k: os.environ.get(k) for k in self.ENV}
        self.torch_threads = torch.get_num_threads()
        self.blas = {lib["filepath"]: lib for lib in ThreadpoolController().info()}
        main = threading.current_thread() is threading.main_thread()
        self.signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
        return self

    def __exit__(self, *exc: object) -> None:
        import torch
        from threadpoolctl import ThreadpoolController

        for key, value in self.env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        torch.set_num_threads(self.torch_threads)
        # a library loaded during the run (scipy's BLAS, say) gets what those of its kind had
        by_api: dict[str, int] = {}
        for lib in self.blas.values():
            by_api[lib["user_api"]] = max(by_api.get(lib["user_api"], 0), lib["num_threads"])
        controller = ThreadpoolController()
        for lib in controller.info():
            known = self.blas.get(lib["filepath"])
            before = known["num_threads"] if known is not None else by_api.get(lib["user_api"])
            if before is not None and lib["num_threads"] != before:
                controller.select(filepath=lib["filepath"]).limit(limits=before)
        for sig, handler in self.signals.items():
            if handler is not None:
                signal.signal(sig, handler)


def _resolve_spec(spec: SpecLike, name: str | None, overrides: Mapping[str, Any]) -> ExperimentSpec:
    """The spec to run: `spec` with `name` and the overrides applied, validated
    as `nasctl run` validates a file (one-line `SpecError`s)."""
    from nasctl.spec import ExperimentSpec, apply_overrides, load_spec, spec_changes

    changes = spec_changes(name, **overrides)
    if isinstance(spec, ExperimentSpec):
        return apply_overrides(spec, changes, source="<ExperimentSpec>")
    if isinstance(spec, Mapping):
        return apply_overrides(spec, changes, folder=os.getcwd(), source="<dict>")
    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        return apply_overrides(load_spec(path), changes, folder=os.path.dirname(path) or ".", source=path)
    raise BadInputError(f"spec must be a path, a mapping or an ExperimentSpec, not {type(spec).__name__}",
                        "pass the spec file's path, e.g. nasctl.run('examples/digits_mlp.yaml')")


def _trial_status(status: str | TrialStatus) -> TrialStatus:
    try:
        return TrialStatus(str(getattr(status, "value", status)).upper())
    except ValueError:
        raise BadInputError(f"status {status!r} is not a trial status",
                            f"use one of: {', '.join(s.value for s in TrialStatus)}") from None


def _utc(ts: datetime | None) -> datetime | None:
    return None if ts is None else ts.replace(tzinfo=timezone.utc)


def _trial(t: TrialRecord, spec: ExperimentSpec, front: set[int], notes: dict[int, str]) -> Trial:
    from nasctl.orchestration.views import trial_row

    row = trial_row(t, spec)
    return Trial(
        index=t.index,
        status=t.status,
        method=t.generation_method,
        parameters=dict(row["parameters"]),
        values=dict(t.values),
        pareto=t.index in front,
        started_at=_utc(t.started_at),
        ended_at=_utc(t.ended_at),
        duration_s=row["duration_s"],
        failure_reason=t.failure_reason,
        log_dir=t.log_dir,
        devices=list(t.devices) if t.devices else None,
        note=notes.get(t.index),
        fidelity=t.fidelity,
        promoted_from=t.promoted_from,
        failure_class=t.failure_class,
        attempts=list(row["attempts"]),
    )


__all__ = [
    "Experiment",
    "ExperimentInfo",
    "NasctlError",
    "Trial",
    "list_experiments",
    "load",
    "resume",
    "run",
]
