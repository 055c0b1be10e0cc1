"""The Python API (`nasctl.run`, `load`, `list_experiments`, `Experiment`) on real
experiments: trial functions run in the orchestrator's process (`inprocess`) or
as trial processes through TorchX (`local_cwd`), on SQLite and PostgreSQL."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import nasctl
from nasctl.errors import AlreadyExistsError, BadInputError, NasctlError, NotFoundError, SpecError
from nasctl.spec import load_spec
from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli

FUNCS = '''
import time

def bc(p):
    """Two objectives of two floats and a choice (cheap, deterministic)."""
    return {"f1": (p["x"] - 0.3) ** 2 + 0.1 * len(p["act"]), "f2": (p["y"] - 0.7) ** 2 + p["x"] * 0.5,
            "g": p["x"] + p["y"]}

def slow(p):
    time.sleep(0.3)
    return bc(p)
'''

SPEC = """
name: {name}
search_space:
  x: {{type: float, low: 0, high: 1}}
  y: {{type: float, low: 0, high: 1}}
  act: {{type: choice, values: [a, bb]}}
objectives:
  f1: {{goal: minimize, threshold: 1.5}}
  f2: {{goal: minimize, threshold: 1.5}}
constraints: ["g <= 1.4"]
budget: {{max_trials: 4, parallelism: 1}}
trial: {{function: "{module}:{fn}"}}
runner: {{scheduler: {scheduler}}}
optimizer: {{method: sobol, seed: 1}}
"""


def _new_threads(before: set[threading.Thread]) -> set[threading.Thread]:
    """Threads alive now that were not in `before`: what a run left behind. (Threads of
    earlier tests in this worker that were still ending when `before` was taken may
    have ended meanwhile; they are no run's.)"""
    return set(threading.enumerate()) - before


@pytest.fixture
def funcs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of trial functions next to the specs, with a name unique to this test."""
    module = f"nasctl_api_funcs_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**6}"
    (tmp_path / f"{module}.py").write_text(FUNCS)
    monkeypatch.chdir(tmp_path)  # the default workdir ./nasctl_runs lands in the test's folder
    monkeypatch.delenv("NASCTL_DB", raising=False)
    monkeypatch.delenv("NASCTL_HOME", raising=False)
    return module


def _spec(tmp_path: Path, module: str, name: str = "api", fn: str = "bc", scheduler: str = "inprocess") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, module=module, fn=fn, scheduler=scheduler))
    return path


def _expected(p: dict[str, Any]) -> dict[str, float]:
    return {"f1": (p["x"] - 0.3) ** 2 + 0.1 * len(p["act"]), "f2": (p["y"] - 0.7) ** 2 + p["x"] * 0.5,
            "g": p["x"] + p["y"]}


def _children(zombies: bool = False) -> set[int]:
    """This process's descendants (with `zombies`, also those that exited but were never reaped)."""
    return {c.pid for c in psutil.Process().children(recursive=True)
            if zombies or c.status() != psutil.STATUS_ZOMBIE}


def _blas() -> dict[str, int]:
    from threadpoolctl import threadpool_info

    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}


def test_run_blocks_returns_data_and_leaves_the_process_as_it_was(tmp_path: Path, funcs: str) -> None:
    """A model-based run in this process: its results through every read method,
    and afterwards no thread, no child process, the same signal handler, thread
    counts and environment as before."""
    import torch

    def handler(signum: int, frame: object) -> None:  # a notebook's own SIGINT handler
        raise KeyboardInterrupt

    old_handler = signal.signal(signal.SIGINT, handler)
    try:
        torch_threads, blas, env = torch.get_num_threads(), _blas(), os.environ.get("OMP_NUM_THREADS")
        threads, children = set(threading.enumerate()), _children()
        seen: list[Any] = []
        exp = nasctl.run(_spec(tmp_path, funcs), max_trials=6, parallelism=2,
                         optimizer={"method": "auto", "initial_trials": 4}, progress=seen.append)
        assert not _new_threads(threads)
        assert _children() == children
        assert signal.getsignal(signal.SIGINT) is handler
        assert torch.get_num_threads() == torch_threads and os.environ.get("OMP_NUM_THREADS") == env
        assert {path: n for path, n in _blas().items() if path in blas} == blas
    finally:
        signal.signal(signal.SIGINT, old_handler)

    assert exp.summary is not None and exp.summary.status.value == "COMPLETED"
    assert seen and seen[-1].done and seen[-1].counts["COMPLETED"] == 6
    assert (tmp_path / "nasctl.db").exists() and (tmp_path / "nasctl_runs" / "api").is_dir()  # the CLI's defaults
    trials = exp.trials()
    assert [t.index for t in trials] == list(range(6))
    assert {t.method for t in trials[4:]} != {"Sobol"}  # the overrides reached the optimizer: a model proposed these
    for t in trials:
        assert t.status == TrialStatus.COMPLETED and t.status == "COMPLETED"
        assert t.values == pytest.approx(_expected(t.parameters), rel=1e-6)
        assert t.started_at is not None and t.ended_at is not None and t.started_at.tzinfo is not None
        assert t.duration_s is not None and t.duration_s >= 0
    front = exp.pareto()
    assert front and {t.index for t in front} == {t.index for t in trials if t.pareto}
    assert [t.values["f1"] for t in front] == sorted(t.values["f1"] for t in front)
    for t in trials:  # nothing on the front is dominated by a feasible trial; nothing infeasible is on it
        if t.pareto:
            assert t.values["g"] <= 1.4
            assert not any(o.values["f1"] <= t.values["f1"] and o.values["f2"] <= t.values["f2"]
                           and o.values != t.values and o.values["g"] <= 1.4 for o in trials)

    frame = exp.trials_dataframe()
    assert list(frame.index) == list(range(6)) and frame.index.name == "trial"
    assert list(frame.columns) == ["status", "method", "params.x", "params.y", "params.act", "metrics.f1",
                                   "metrics.f2", "metrics.g", "pareto", "started_at", "ended_at", "duration_s",
                                   "queued_s", "gpu_hours", "gpu_hours_lost", "restarts", "failure_reason",
                                   "failure_class", "attempts", "note"]
    assert (frame["attempts"] == 1).all()  # every trial ran once
    for t in trials:
        row = frame.loc[t.index]
        assert row["params.act"] == t.parameters["act"] and row["metrics.f2"] == t.values["f2"]
        assert bool(row["pareto"]) == t.pareto and row["method"] == t.method and row["status"] == "COMPLETED"
        assert row["duration_s"] == pytest.approx(t.duration_s)
    assert str(frame["started_at"].dtype) == "datetime64[us, UTC]"

    status = exp.status()
    assert status["status"] == "COMPLETED" and status["trials"]["COMPLETED"] == 6
    assert status["budget"]["max_trials"] == 6 and status["budget"]["parallelism"] == 2
    assert status["pareto_size"] == len(front)
    assert nasctl.list_experiments() == [
        {"name": "api", "status": "COMPLETED", "trials": {"COMPLETED": 6}, "max_trials": 6,
         "objectives": ["f1", "f2"], "created_at": status["created_at"]}
    ]
    from nasctl.store.manage import set_note

    store = Store("sqlite:///nasctl.db")
    set_note(store, store.get_experiment("api").id, "**best** so far", 2)  # as the dashboard does
    store.close()
    again = nasctl.load("api")
    assert [t.values for t in again.trials("completed")] == [t.values for t in trials]
    assert [t.note for t in again.trials()] == [None, None, "**best** so far", None, None, None]
    notes = again.trials_dataframe()["note"]
    assert notes.isna().tolist() == [True, True, False, True, True, True] and notes[2] == "**best** so far"
    assert again.trials(TrialStatus.FAILED) == [] and again.summary is None


def test_spec_as_a_dict_or_an_object_with_overrides(tmp_path: Path, funcs: str) -> None:
    spec = load_spec(_spec(tmp_path, funcs))
    db = f"sqlite:///{tmp_path / 'other.db'}"
    exp = nasctl.run(spec, db=db, name="from-object", max_trials=2, workdir=tmp_path / "w")
    assert exp.status()["work_dir"] == str(tmp_path / "w" / "from-object")
    data = {
        "name": "from-dict",
        "search_space": {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1},
                         "act": {"type": "fixed", "value": "abc"}},
        "objectives": {"f1": {"goal": "minimize"}, "f2": {"goal": "minimize"}},
        "budget": {"max_trials": 5},
        "trial": {"function": f"{funcs}:bc"},  # found next to the current folder, as for a spec file there
        "runner": {"scheduler": "inprocess"},
        "optimizer": {"method": "sobol"},
    }
    exp = nasctl.run(data, db=db, max_trials=3, runner={"cfg": {"workers": 2}})
    assert exp.spec.runner.cfg == {"workers": 2} and exp.spec.budget.max_trials == 3
    frame = exp.trials_dataframe()
    assert len(frame) == 3 and set(frame["params.act"]) == {"abc"}
    assert sorted(e["name"] for e in nasctl.list_experiments(db)) == ["from-dict", "from-object"]
    assert data["budget"] == {"max_trials": 5}  # the caller's dict is left as it was


def test_errors_are_typed_and_say_what_the_cli_says(tmp_path: Path, funcs: str) -> None:
    """The API raises the CLI's error with its line: `str(e)` is what `nasctl` prints after "Error: "."""
    path = _spec(tmp_path, funcs)
    db = f"sqlite:///{tmp_path / 'e.db'}"

    def cli_line(*args: str) -> str:
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        return proc.stderr.strip().removeprefix("Error: ")

    with pytest.raises(NotFoundError) as missing:
        nasctl.load("nope", db=db)
    assert str(missing.value) == cli_line("status", "nope", "--db", db)
    with pytest.raises(SpecError) as invalid:
        nasctl.run(path, db=db, max_trials=0)
    assert str(invalid.value) == cli_line("run", str(path), "--max-trials", "0", "--db", db)
    assert "budget.max_trials" in str(invalid.value) and not (tmp_path / "e.db").exists()  # nothing written

    nasctl.run(path, db=db, max_trials=1)
    with pytest.raises(AlreadyExistsError) as exists:
        nasctl.run(path, db=db)
    assert str(exists.value) == cli_line("run", str(path), "--db", db)
    with pytest.raises(NotFoundError):
        nasctl.load("nope", db=db)
    with pytest.raises(BadInputError, match="unknown override max_trail=3"):
        nasctl.run(path, db=db, name="other", max_trail=3)
    with pytest.raises(BadInputError, match="not a trial status"):
        nasctl.load("api", db=db).trials("DONE")
    with pytest.raises(BadInputError, match="spec must be a path"):
        nasctl.run(42, db=db)  # type: ignore[arg-type]
    assert issubclass(NotFoundError, nasctl.NasctlError) and nasctl.NasctlError is NasctlError


def test_background_run_stop_and_wait(tmp_path: Path, funcs: str) -> None:
    """`wait=False` returns while the loop runs on a thread; `stop()` ends it like
    `nasctl stop`, and after `wait()` nothing of it is left."""
    threads = set(threading.enumerate())
    exp = nasctl.run(_spec(tmp_path, funcs, fn="slow"), max_trials=500, parallelism=2, wait=False)
    try:
        assert exp.running and exp.summary is None
        deadline = time.monotonic() + 60
        while exp.status()["trials"]["COMPLETED"] < 2:  # it is running, and its results are visible here
            assert time.monotonic() < deadline, exp.status()
            time.sleep(0.2)
        with pytest.raises(TimeoutError):
            exp.wait(timeout=0.01)
        assert exp.stop()["requested"] is True
    finally:
        exp.wait(timeout=120)
    assert not exp.running and exp.summary is not None
    assert exp.summary.status.value == "STOPPED" and exp.status()["status"] == "STOPPED"
    assert 2 <= sum(exp.status()["trials"].values()) < 500
    assert not _new_threads(threads)
    # an error before the loop starts is raised by run() itself, not left for wait()
    with pytest.raises(AlreadyExistsError):
        nasctl.run(_spec(tmp_path, funcs, fn="slow"), wait=False)
    assert not _new_threads(threads)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_a_background_run_refuses_an_in_memory_database(tmp_path: Path, funcs: str, url: str) -> None:
    """The loop's thread would open its own, empty in-memory database: `wait=False`
    is refused on one line naming the fix, and a blocking run on it works."""
    threads = set(threading.enumerate())
    with pytest.raises(BadInputError) as e:
        nasctl.run(_spec(tmp_path, funcs), db=url, wait=False)
    assert "in-memory" in e.value.message and "\n" not in str(e.value)
    assert e.value.hint is not None and "sqlite:///" in e.value.hint and "wait=True" in e.value.hint
    assert not _new_threads(threads) and not (tmp_path / "nasctl_runs").exists()
    exp = nasctl.run(_spec(tmp_path, funcs), db=url)
    assert exp.status()["trials"]["COMPLETED"] == 4 and len(exp.trials()) == 4


def test_progress_is_drawn_only_when_asked(tmp_path: Path, funcs: str, capfd: pytest.CaptureFixture[str]) -> None:
    nasctl.run(_spec(tmp_path, funcs), name="quiet", max_trials=2)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    nasctl.run(_spec(tmp_path, funcs), name="shown", max_trials=2, progress=True)
    out, err = capfd.readouterr()
    assert out == "" and "trial 1" in err and "\x1b[" not in err  # plain lines: stderr is not a terminal here


@pytest.mark.e2e
def test_trial_processes_are_gone_when_run_returns(tmp_path: Path, funcs: str) -> None:
    """Trials as processes launched through TorchX: none of them (nor anything
    else the run started) is left once `run` returns."""
    threads, children = set(threading.enumerate()), _children()
    exp = nasctl.run(_spec(tmp_path, funcs, name="procs", scheduler="local_cwd"), max_trials=2, parallelism=2)
    assert _children() == children and not _new_threads(threads)
    trials = exp.trials()
    assert [t.status for t in trials] == [TrialStatus.COMPLETED] * 2
    assert all(t.values == pytest.approx(_expected(t.parameters)) for t in trials)


SCRIPT = """
import argparse, os
from nasctl.metrics.tensorboard import write_scalars
p = argparse.ArgumentParser()
for name in ("x", "y"):
    p.add_argument("--" + name, type=float)
p.add_argument("--act")
a = p.parse_args()
write_scalars(os.environ["NASCTL_LOG_DIR"], {"f1": a.x, "f2": a.y, "g": 0.0}, step=0)
"""


@pytest.mark.e2e
def test_warm_server_is_gone_when_run_returns(tmp_path: Path, funcs: str) -> None:
    """A script trial with `trial.preload` is forked by a warm server (nasctl/runners/warm.py):
    that server, a child of this process, has exited and been reaped when `run` returns."""
    (tmp_path / "trial.py").write_text(SCRIPT)
    spec = _spec(tmp_path, funcs, name="warm", scheduler="local_cwd").read_text().replace(
        f'trial: {{function: "{funcs}:bc"}}', "trial: {script: trial.py, preload: [json]}")
    (tmp_path / "warm.yaml").write_text(spec)
    threads, children = set(threading.enumerate()), _children(zombies=True)
    exp = nasctl.run(tmp_path / "warm.yaml", max_trials=2, parallelism=2)
    assert _children(zombies=True) == children and not _new_threads(threads)  # exited and reaped
    assert (tmp_path / "nasctl_runs" / "warm" / "trials" / "warm-server.log").exists()  # the trials were forked warm
    assert [t.values["f1"] for t in exp.trials()] == [t.parameters["x"] for t in exp.trials()]


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'n.db'}"
    else:
        yield request.getfixturevalue("db_url_pg")


def test_load_and_list_on_each_database(tmp_path: Path, funcs: str, any_db: str) -> None:
    nasctl.run(_spec(tmp_path, funcs, name="first"), db=any_db, max_trials=2)
    nasctl.run(_spec(tmp_path, funcs, name="second"), db=any_db, max_trials=3)
    listed = nasctl.list_experiments(any_db)
    assert [(e["name"], e["trials"]) for e in listed] == [("second", {"COMPLETED": 3}), ("first", {"COMPLETED": 2})]
    with nasctl.load("second", db=any_db) as exp:
        frame = exp.trials_dataframe()
        assert len(frame) == 3 and frame["status"].eq("COMPLETED").all()
        assert all(math.isfinite(v) for v in frame["metrics.f1"])
        assert "second" in repr(exp) and "COMPLETED" in repr(exp)
    # NASCTL_DB is the default, as for the CLI
    env = {**os.environ, "NASCTL_DB": any_db, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = "import nasctl; print(sorted(e['name'] for e in nasctl.list_experiments()))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "['first', 'second']", proc.stderr


def test_import_nasctl_stays_light() -> None:
    """`import nasctl` loads no dependency; the API's names load `nasctl.api`,
    still without torch, SQLAlchemy or pandas (they come with the first call)."""
    code = (
        "import sys, nasctl\n"
        "heavy = ('nasctl.api', 'torch', 'sqlalchemy', 'pandas', 'pydantic', 'typing')\n"
        "print([m for m in heavy if m in sys.modules])\n"
        "nasctl.run, nasctl.load, nasctl.Experiment\n"
        "print([m for m in heavy[1:5] if m in sys.modules], 'nasctl.api' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout.split("\n")[:2] == ["[]", "[] True"], proc.stdout + proc.stderr
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nasctl.nope  # type: ignore[attr-defined]  # noqa: B018
