"""Spec overrides take one path (`nasctl.spec.apply_overrides`) from the three entry
points: `nasctl run --name/--max-trials/--parallelism`, `nasctl.run(**overrides)`
and a submission to `nasctl serve`; the same overrides give the same spec."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from nasctl.api import _resolve_spec
from nasctl.server.routes import router
from nasctl.spec import ExperimentSpec
from tests.conftest import run_cli

SPEC = """
name: base
search_space:
  x: {type: float, low: 0, high: 1}
objectives:
  val_acc: {goal: maximize}
budget: {max_trials: 4, parallelism: 1, max_failures: 2}
trial: {script: train.py}
optimizer: {method: sobol}
"""


class _Supervisor:
    """Keeps what is submitted instead of running it."""

    def __init__(self) -> None:
        self.specs: list[ExperimentSpec] = []

    def submit(self, spec: ExperimentSpec) -> Any:
        self.specs.append(spec)
        return SimpleNamespace(name=spec.name, status=SimpleNamespace(value="QUEUED"), work_dir="w")


def _submitted(path: Path, **body: Any) -> ExperimentSpec:
    app = FastAPI()
    app.include_router(router)
    app.state.supervisor = _Supervisor()
    app.state.nasctl = SimpleNamespace(token="t")
    answer = TestClient(app).post("/api/experiments", headers={"Authorization": "Bearer t"},
                                  json={"spec": path.read_text(), "spec_dir": str(path.parent),
                                        "source": str(path), **body})
    assert answer.status_code == 201, answer.text
    (spec,) = app.state.supervisor.specs
    return spec


def test_the_entry_points_apply_overrides_alike(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    path = tmp_path / "s.yaml"
    path.write_text(SPEC)
    api = _resolve_spec(str(path), "renamed", {"max_trials": 9, "parallelism": 2})
    assert (api.name, api.budget.max_trials, api.budget.parallelism, api.budget.max_failures) == ("renamed", 9, 2, 2)
    assert api.trial.script == str((tmp_path / "train.py").resolve())

    cli = run_cli("run", str(path), "--name", "renamed", "--max-trials", "9", "--parallelism", "2", "--dryrun",
                  "--json", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    plan = json.loads(cli.stdout)
    assert plan["experiment"] == api.name and plan["budget"] == api.budget.model_dump()

    served = _submitted(path, name="renamed", max_trials=9)
    assert served == _resolve_spec(str(path), "renamed", {"max_trials": 9})
    assert _submitted(path) == _resolve_spec(str(path), None, {})
