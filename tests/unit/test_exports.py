"""`nasctl export` to the tools people open: a TensorBoard HParams view (read back
with TensorBoard's own reader, and served by a real `tensorboard` process), CSV
with the Pareto flag, and MLflow runs (read back with MLflow's client from a
local store); bad input is one line, exit 2, and nothing is written."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from nasctl.store import Store
from nasctl.types import Observation, TrialStatus
from tests.conftest import run_cli
from tests.conftest import free_port
from tests.helpers.cli import one_line_error
from tests.helpers.synthetic import add_synthetic


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    """An experiment of 9 trials (one failed, one still running), and its trials as `nasctl export` JSON."""
    url = f"sqlite:///{tmp_path / 'e.db'}"
    store = Store(url, create=True)
    exp = add_synthetic(store, "exp", 8)
    t = store.add_trial(exp.id, 8, {"x": 0.5, "act": "gelu"}, "BoTorch", "exp-8", "")
    store.mark_trial_running(t.id, "local_cwd://synthetic/exp-8", "local_cwd", {})
    store.close()
    proc = run_cli("export", "exp", "--db", url)
    assert proc.returncode == 0, proc.stderr
    trials = json.loads(proc.stdout)["trials"]
    assert [t["status"] for t in trials].count("FAILED") == 1 and trials[-1]["status"] == "RUNNING"
    assert 0 < sum(t["pareto"] for t in trials) < 8
    return url, trials


def test_csv_has_the_pareto_flag(synthetic: tuple[str, list[dict[str, Any]]]) -> None:
    url, trials = synthetic
    rows = list(csv.DictReader(io.StringIO(run_cli("export", "exp", "--format", "csv", "--db", url).stdout)))
    assert [r["pareto"] for r in rows] == ["true" if t["pareto"] else "false" for t in trials]
    assert list(rows[0])[-11:] == ["pareto", "duration_s", "queued_s", "gpu_hours", "gpu_hours_lost", "restarts",
                                   "devices", "failure_reason", "failure_class", "attempts", "note"]


def _accumulator(path: Path) -> Any:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0})
    acc.Reload()
    return acc


def _hparams_value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("kind"))


def test_tensorboard_hparams_view(tmp_path: Path, synthetic: tuple[str, list[dict[str, Any]]]) -> None:
    """Read back with TensorBoard's EventAccumulator and the HParams plugin's parsers:
    the experiment config names every parameter with its domain and every metric;
    each trial is a run with its parameters, state, method, Pareto flag and its
    metric values."""
    import numpy as np
    from tensorboard.plugins.hparams import api_pb2, metadata

    url, trials = synthetic
    out = tmp_path / "tb" / "exp"
    proc = run_cli("export", "exp", "--format", "tensorboard", "--out", str(out), "--db", url)
    assert proc.returncode == 0 and f"wrote 9 runs (one per trial) to {out}" in proc.stdout, proc.stderr

    root = _accumulator(out)
    config = metadata.parse_experiment_plugin_data(root.PluginTagToContent(metadata.PLUGIN_NAME)[
        metadata.EXPERIMENT_TAG])
    infos = {h.name: h for h in config.hparam_infos}
    assert list(infos) == ["x", "act", "nasctl.status", "nasctl.method", "nasctl.pareto"]
    assert (infos["x"].domain_interval.min_value, infos["x"].domain_interval.max_value) == (0.0, 1.0)
    assert sorted(v.string_value for v in infos["act"].domain_discrete.values) == ["gelu", "relu"]
    assert [m.name.tag for m in config.metric_infos] == ["acc", "size", "lat"]
    assert "objective: maximize, threshold 0.05" in config.metric_infos[0].description
    assert "constraint: lat <= 8" in config.metric_infos[2].description

    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [f"trial_{i:04d}" for i in range(9)]
    for t in trials:
        acc = _accumulator(out / f"trial_{t['index']:04d}")
        content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
        start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
        got = {k: _hparams_value(v) for k, v in start.hparams.items()}
        assert got == {**t["parameters"], "nasctl.status": t["status"], "nasctl.method": t["generation_method"],
                       "nasctl.pareto": t["pareto"]}
        assert start.group_name == f"trial_{t['index']:04d}"
        values = {tag: acc.Scalars(tag)[-1].value for tag in ("acc", "size", "lat") if tag in acc.Tags()["scalars"]}
        assert values == {k: float(np.float32(v)) for k, v in t["values"].items()}  # TensorBoard's 32-bit scalars
        if t["status"] == "RUNNING":
            assert metadata.SESSION_END_INFO_TAG not in content
        else:
            end = metadata.parse_session_end_info_plugin_data(content[metadata.SESSION_END_INFO_TAG])
            assert end.status == (api_pb2.STATUS_SUCCESS if t["status"] == "COMPLETED" else api_pb2.STATUS_FAILURE)

    # a second export into the same folder would mix runs: refused, nothing changed
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    err = one_line_error(run_cli("export", "exp", "--format", "tensorboard", "--out", str(out), "--db", url))
    assert "already holds TensorBoard event files" in err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


@pytest.mark.e2e
def test_tensorboard_serves_the_export(tmp_path: Path, synthetic: tuple[str, list[dict[str, Any]]]) -> None:
    """A real `tensorboard` process lists every trial in its HParams dashboard's data."""
    url, trials = synthetic
    out = tmp_path / "tb"
    assert run_cli("export", "exp", "--format", "tensorboard", "--out", str(out), "--db", url).returncode == 0
    port = free_port()
    tb = Path(sys.executable).with_name("tensorboard")
    proc = subprocess.Popen([str(tb), "--logdir", str(out), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/data/plugin/hparams"
        request = {"experimentName": "", "startIndex": 0, "sliceSize": 100,
                   "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]}
        deadline = time.monotonic() + 120
        groups: list[dict[str, Any]] = []
        values = sum(len(t["values"]) for t in trials)
        # TensorBoard loads the runs in the background: wait until it shows every trial and value
        while len(groups) < len(trials) or sum(len(g["metricValues"]) for g in groups) < values:
            assert time.monotonic() < deadline and proc.poll() is None, groups
            time.sleep(0.5)
            try:
                r = httpx.post(f"{base}/session_groups", json=request, timeout=10)
            except httpx.TransportError:
                continue
            if r.status_code == 200:
                groups = r.json().get("sessionGroups", [])
        experiment = httpx.post(f"{base}/experiment", json={"experimentName": ""}, timeout=10).json()
    finally:
        proc.terminate()
        proc.wait(30)
    assert [m["name"]["tag"] for m in experiment["metricInfos"]] == ["acc", "size", "lat"]
    by_name = {g["name"]: g for g in groups}
    for t in trials:
        g = by_name[f"trial_{t['index']:04d}"]
        assert g["hparams"]["x"] == pytest.approx(t["parameters"]["x"]) and g["hparams"]["act"] == t["parameters"]["act"]
        assert g["hparams"]["nasctl.pareto"] is t["pareto"] and g["hparams"]["nasctl.status"] == t["status"]
        shown = {m["name"]["tag"]: m["value"] for m in g["metricValues"]}
        assert shown == pytest.approx(t["values"])


def _mlflow_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return {**env, **extra}


def _runs(uri: str, name: str) -> dict[int, Any]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    assert exp is not None
    return {int(r.data.tags["nasctl.trial_index"]): r for r in client.search_runs([exp.experiment_id])}


def test_mlflow_runs_in_a_file_store(tmp_path: Path, synthetic: tuple[str, list[dict[str, Any]]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url, trials = synthetic
    uri = f"file://{tmp_path / 'mlruns'}"
    # without the opt-out MLflow 3 refuses file stores: said in one line, with both ways out
    err = one_line_error(run_cli("export", "exp", "--format", "mlflow", "--tracking-uri", uri, "--db", url,
                                 env=_mlflow_env()))
    assert "MLFLOW_ALLOW_FILE_STORE=true" in err and "sqlite:///mlflow.db" in err
    env = _mlflow_env(MLFLOW_ALLOW_FILE_STORE="true")
    proc = run_cli("export", "exp", "--format", "mlflow", "--tracking-uri", uri, "--db", url, env=env)
    assert proc.returncode == 0 and "9 runs created, 0 updated, 0 unchanged" in proc.stdout, proc.stderr

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    runs = _runs(uri, "exp")
    assert sorted(runs) == list(range(9))
    expected_status = {"COMPLETED": "FINISHED", "FAILED": "FAILED", "RUNNING": "RUNNING"}
    for t in trials:
        run = runs[t["index"]]
        assert run.info.run_name == f"trial_{t['index']:04d}"
        assert run.info.status == expected_status[t["status"]]
        assert run.data.params == {k: str(v) for k, v in t["parameters"].items()}
        assert run.data.metrics == t["values"]
        tags = run.data.tags
        assert (tags["nasctl.status"], tags["nasctl.method"], tags["nasctl.pareto"], tags["nasctl.experiment"]) == (
            t["status"], t["generation_method"], "true" if t["pareto"] else "false", "exp")
        assert tags.get("nasctl.failure_reason") == t["failure_reason"]

    # exporting again changes nothing; after the running trial ends, only its run is updated
    proc = run_cli("export", "exp", "--format", "mlflow", "--tracking-uri", uri, "--db", url, env=env)
    assert "0 runs created, 0 updated, 9 unchanged" in proc.stdout, proc.stderr
    store = Store(url)
    exp = store.get_experiment("exp")
    running = store.get_trial(exp.id, 8)
    store.add_observations(running.id, [Observation("acc", 1, 0.5)])
    store.finish_trial(running.id, TrialStatus.COMPLETED, {"acc": 0.5, "size": 30.0, "lat": 1.0})
    store.close()
    now = json.loads(run_cli("export", "exp", "--db", url).stdout)["trials"]
    changed = {8} | {t["index"] for t, old in zip(now, trials) if t["pareto"] != old["pareto"]}
    proc = run_cli("export", "exp", "--format", "mlflow", "--tracking-uri", uri, "--db", url, env=env)
    assert f"0 runs created, {len(changed)} updated, {9 - len(changed)} unchanged" in proc.stdout, proc.stderr
    runs = _runs(uri, "exp")
    assert {i: r.data.tags["nasctl.pareto"] for i, r in runs.items()} == {
        t["index"]: "true" if t["pareto"] else "false" for t in now}
    assert len(runs) == 9 and runs[8].info.status == "FINISHED"
    assert runs[8].data.metrics == {"acc": 0.5, "size": 30.0, "lat": 1.0}
    assert runs[8].data.tags["nasctl.status"] == "COMPLETED"


def test_mlflow_runs_in_a_database_store(tmp_path: Path, synthetic: tuple[str, list[dict[str, Any]]]) -> None:
    url, trials = synthetic
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli("export", "exp", "--format", "mlflow", "--tracking-uri", uri, "--db", url, env=_mlflow_env())
    assert proc.returncode == 0 and "9 runs created" in proc.stdout, proc.stderr
    runs = _runs(uri, "exp")
    assert {i: r.data.metrics for i, r in runs.items()} == {t["index"]: t["values"] for t in trials}


def test_mlflow_not_installed(tmp_path: Path, synthetic: tuple[str, list[dict[str, Any]]]) -> None:
    """Without MLflow importable (a `None` entry in sys.modules makes `import mlflow` fail)."""
    url, _ = synthetic
    code = ("import sys; sys.modules['mlflow'] = None; sys.argv[0] = 'nasctl'\n"
            "from nasctl.cli.main import main; main()")
    proc = subprocess.run(
        [sys.executable, "-c", code, "export", "exp", "--format", "mlflow", "--tracking-uri",
         f"sqlite:///{tmp_path / 'm.db'}", "--db", url],
        capture_output=True, text=True, timeout=120, env=_mlflow_env())
    err = one_line_error(proc)
    assert "needs MLflow, which is not installed" in err and "pip install 'nasctl[mlflow]'" in err
    assert not (tmp_path / "m.db").exists()


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path,
                                                  synthetic: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = synthetic
    env = _mlflow_env()
    for fmt, extra in (("json", []), ("csv", []), ("tensorboard", ["--out", str(tmp_path / "o")]),
                       ("mlflow", ["--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])):
        err = one_line_error(run_cli("export", "nope", "--format", fmt, *extra, "--db", url, env=env))
        assert "'nope'" in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "m.db").exists()

    a_file = tmp_path / "file.txt"
    a_file.write_text("keep")
    err = one_line_error(run_cli("export", "exp", "--format", "tensorboard", "--out", str(a_file / "tb"),
                                 "--db", url))
    assert f"cannot write --out {a_file / 'tb'}: Not a directory" in err
    err = one_line_error(run_cli("export", "exp", "--format", "tensorboard", "--out", str(a_file), "--db", url))
    assert "is a file; --format tensorboard writes a folder" in err and a_file.read_text() == "keep"
    err = one_line_error(run_cli("export", "exp", "--format", "tensorboard", "--db", url))
    assert "--format tensorboard needs --out DIR" in err
    err = one_line_error(run_cli("export", "exp", "--format", "mlflow", "--db", url, env=env))
    assert "--format mlflow needs --tracking-uri" in err
    err = one_line_error(run_cli("export", "exp", "--format", "csv", "--tracking-uri", "sqlite:///x.db",
                                 "--db", url, env=env))
    assert "--tracking-uri applies to --format mlflow" in err
    # $MLFLOW_TRACKING_URI is the default tracking URI, and does not get in the way of other formats
    mlflow_env = _mlflow_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'env.db'}")
    assert run_cli("export", "exp", "--format", "csv", "--db", url, env=mlflow_env).returncode == 0
    proc = run_cli("export", "exp", "--format", "mlflow", "--db", url, env=mlflow_env)
    assert proc.returncode == 0 and "9 runs created" in proc.stdout, proc.stderr
