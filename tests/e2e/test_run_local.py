"""A real NAS run through TorchX local_cwd: the built-in digits MLP, quasi-random
then model-based proposals, metrics from real TensorBoard files, everything
read back through the CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from nasctl.metrics.tensorboard import read_scalars
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e


def test_digits_run_and_read_back(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        (ROOT / "examples" / "digits_mlp.yaml").read_text()
        .replace("epochs:        {type: int, low: 1, high: 4}", "epochs:        {type: fixed, value: 1}")
        .replace("initial_trials: 8", "initial_trials: 2")
        .replace("threshold: 0.80", "threshold: 0.2")  # one-epoch models: a low bar
    )
    db = f"sqlite:///{tmp_path}/nas.db"
    proc = run_cli("run", str(spec), "--name", "demo", "--max-trials", "4", "--db", db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "experiment demo completed" in proc.stdout
    assert "Pareto front of demo" in proc.stdout and "hypervolume" in proc.stdout
    assert f"database: sqlite:///{tmp_path}/nas.db" in proc.stdout

    status = json.loads(run_cli("status", "demo", "--db", db, "--json").stdout)
    assert status["status"] == "COMPLETED"
    assert status["trials"]["COMPLETED"] == 4
    assert status["hypervolume"] > 0

    trials = json.loads(run_cli("trials", "demo", "--db", db, "--json").stdout)
    assert [t["index"] for t in trials] == [0, 1, 2, 3]
    methods = [t["generation_method"] for t in trials]
    assert methods[2:] == ["MBM", "MBM"], methods  # the model took over after 2 initial trials
    params = [json.dumps(t["parameters"], sort_keys=True) for t in trials]
    assert len(set(params)) == 4  # no repeats
    for t in trials:
        assert t["parameters"]["epochs"] == 1
        assert 16 <= t["parameters"]["hidden_size_1"] <= 128
        assert t["parameters"]["batch_size"] in (32, 64, 128, 256)
        assert set(t["values"]) >= {"val_acc", "num_params", "latency_ms", "model_bytes"}
        assert 0 <= t["values"]["val_acc"] <= 1 and t["values"]["latency_ms"] > 0
        h1, h2 = t["parameters"]["hidden_size_1"], t["parameters"]["hidden_size_2"]
        assert t["values"]["num_params"] == 64 * h1 + h1 + h1 * h2 + h2 + h2 * 10 + 10
        assert t["job_handle"].startswith("local_cwd://")
        # real TensorBoard files in the trial's own directory; the stored value is the logged one
        scalars = read_scalars(Path(t["log_dir"]) / "tb")
        logged = {o.metric: o.value for o in scalars}
        assert logged["val_acc"] == pytest.approx(t["values"]["val_acc"])
        # costs are known before training (step 0) and logged with val_acc at the final step
        last = max(o.step for o in scalars if o.metric == "val_acc")
        for m in ("num_params", "latency_ms", "mflops", "model_bytes"):
            assert sorted(o.step for o in scalars if o.metric == m) == [0, last]
        # how the trial ran is stored with it
        info = t["info"]
        assert info["precision"] == "fp32" and info["device"] == "cpu" and info["dataset"] == "digits"
        assert info["latency"]["batch_size"] == 1 and info["latency"]["repeats"] >= 50 and info["latency"]["blocks"] == 5
        assert info["latency"]["median_ms"] == pytest.approx(t["values"]["latency_ms"], rel=1e-6)
        assert Path(t["log_dir"]).is_relative_to(tmp_path / "nasctl_runs" / "demo")

    pareto = json.loads(run_cli("pareto", "demo", "--db", db, "--json").stdout)
    assert pareto["hypervolume"] == pytest.approx(status["hypervolume"])
    assert pareto["reference_point"] == {"val_acc": 0.2, "num_params": 80000.0}
    front = pareto["front"]
    feasible = [t for t in trials if t["values"]["val_acc"] > 0.2]
    assert 1 <= len(front) <= max(1, len(feasible))
    for f in front:  # nothing feasible dominates a front member
        for t in feasible:
            assert not (t["values"]["val_acc"] >= f["values"]["val_acc"]
                        and t["values"]["num_params"] <= f["values"]["num_params"]
                        and t["values"] != f["values"])

    detail = json.loads(run_cli("trials", "demo", "--trial", "0", "--db", db, "--json").stdout)
    assert len(detail["curves"]["train_loss"]) >= 1 and "val_acc" in detail["curves"]

    exported = json.loads(run_cli("export", "demo", "--db", db).stdout)
    assert len(exported["trials"]) == 4 and exported["spec"]["name"] == "demo"
    assert sum(t["pareto"] for t in exported["trials"]) == len(front)
    rows = list(csv.DictReader(io.StringIO(run_cli("export", "demo", "--format", "csv", "--db", db).stdout)))
    assert len(rows) == 4 and {"hidden_size_1", "val_acc", "num_params"} <= set(rows[0])

    listing = json.loads(run_cli("ls", "--db", db, "--json").stdout)
    assert listing[0]["name"] == "demo" and listing[0]["trials"] == {"COMPLETED": 4}

    again = run_cli("run", str(spec), "--name", "demo", "--db", db, cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
