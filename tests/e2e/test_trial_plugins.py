"""Real runs through TorchX local_cwd of the new trial sources and the cnn space:
a user model (`trial.model`), the plain-PyTorch user-script example, and the
conditional cnn space. Each trial's own record (trial_info.json) is stored in
`trials.info` and shown by `nasctl trials --json`, export and the web API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nasctl.store import Store
from nasctl.web.app import create_app
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e


def _run(spec: Path, name: str, tmp_path: Path, max_trials: int = 2) -> list[dict[str, Any]]:
    db = f"sqlite:///{tmp_path}/nas.db"
    proc = run_cli("run", str(spec), "--name", name, "--max-trials", str(max_trials), "--db", db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    trials: list[dict[str, Any]] = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
    assert len(trials) == max_trials and all(t["status"] == "COMPLETED" for t in trials), trials
    return trials


def test_user_model_trained_by_the_builtin_trainer(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        (ROOT / "examples" / "user_model.yaml").read_text()
        .replace("model_path: user_model", f"model_path: {ROOT / 'examples' / 'user_model'}")
        .replace("epochs:        {type: fixed, value: 3}", "epochs:        {type: fixed, value: 1}")
        .replace("initial_trials: 4", "initial_trials: 2")
        .replace("threshold: 0.5", "threshold: 0.05")
    )
    trials = _run(spec, "um", tmp_path)
    for t in trials:
        info = t["info"]
        assert info["model"] == "my_models.tiny_cnn:build" and info["dataset"] == "digits"
        assert info["argv"][:4] == ["--model", "my_models.tiny_cnn:build", "--dataset", "digits"]
        assert f"--width {t['parameters']['width']}" in " ".join(info["argv"])
        assert info["architecture"].count("Conv2d") == t["parameters"]["depth"]
        assert info["precision"] == "fp32" and info["latency"]["threads"] == 1
        assert t["values"]["mflops"] > 0 and 0 <= t["values"]["val_acc"] <= 1
    exported = json.loads(run_cli("export", "um", "--db", f"sqlite:///{tmp_path}/nas.db").stdout)
    assert exported["trials"][0]["info"]["torch"] == trials[0]["info"]["torch"]
    with TestClient(create_app(Store(f"sqlite:///{tmp_path}/nas.db"))) as client:
        detail = client.get("/api/experiments/um/trials/0").json()
        assert detail["info"]["latency"]["median_ms"] == pytest.approx(trials[0]["info"]["latency"]["median_ms"])
        table = client.get("/api/experiments/um/trials").json()
        assert all("info" not in row for row in table["trials"])  # tables stay light


def test_user_script_example(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        (ROOT / "examples" / "user_script.yaml").read_text()
        .replace("script: user_script/train.py", f"script: {ROOT / 'examples' / 'user_script' / 'train.py'}")
        .replace("initial_trials: 4", "initial_trials: 2")
    )
    trials = _run(spec, "us", tmp_path, max_trials=4)
    for t in trials:
        assert t["values"]["num_params"] == 64 * t["parameters"]["hidden"] + t["parameters"]["hidden"] * 11 + 10
        assert 0.0 < t["values"]["val_acc"] <= 1.0
        assert t["info"]["script"] == "examples/user_script/train.py"
    # 5 epochs of digits learn; a model-based trial may try the smallest net at a low
    # learning rate (hidden 8, learning_rate 0.0017: 0.37 seen), so only the best trial is held to it
    assert max(t["values"]["val_acc"] for t in trials) > 0.5
    # `trial.preload` in the example: once the warm server is up, trials are forked from it
    launches = [json.loads(p.read_text()) for p in tmp_path.rglob("launch.json")]
    assert len(launches) == len(trials) and any(info["warm"] for info in launches), launches


def test_conditional_cnn_space(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        """
name: cnn
search_space:
  num_blocks: {type: choice, values: [1, 2], ordered: true}
  channels_1: {type: int, low: 4, high: 8}
  channels_2: {type: int, low: 4, high: 8, when: {num_blocks: [2]}}
  kernel_size_2: {type: choice, values: [3, 5], when: {num_blocks: [2]}}
  precision: {type: choice, values: [fp32, bf16]}
  channels_last: {type: choice, values: [false, true]}
  epochs: {type: fixed, value: 1}
objectives:
  val_acc: {goal: maximize}
  latency_ms: {goal: minimize}
  num_params: {goal: minimize}
budget: {max_trials: 2, parallelism: 2}
trial: {search_space: cnn, dataset: digits, args: {latency_repeats: 10}}
optimizer: {method: sobol, seed: 3}
"""
    )
    trials = _run(spec, "cnn", tmp_path)
    for t in trials:
        p, info = t["parameters"], t["info"]
        argv = " ".join(info["argv"])
        assert ("--channels_2" in argv) == ("--kernel_size_2" in argv) == (p["num_blocks"] == 2)
        assert set(p) == ({"num_blocks", "channels_1", "precision", "channels_last", "epochs"}
                          | ({"channels_2", "kernel_size_2"} if p["num_blocks"] == 2 else set()))
        assert info["architecture"].count("Conv2d(") == p["num_blocks"]
        assert info["precision"] == p["precision"] and info["latency"]["precision"] == p["precision"]
        assert info["channels_last"] == p["channels_last"] and info["latency"]["repeats"] >= 10
