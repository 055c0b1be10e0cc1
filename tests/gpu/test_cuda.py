"""The CUDA path on a real GPU: skipped, with the reason shown, on machines without
one. `make gpu-check` runs these first, then a small real NAS (scripts/gpu_check.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="no CUDA GPU here: run `make gpu-check` on a machine with one"),
]


def test_latency_is_timed_with_cuda_events_for_every_precision() -> None:
    from nasctl.metrics.latency import measure_latency

    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
    x = torch.randn(32, 64, device="cuda")
    for precision in ("fp32", "bf16", "fp16"):
        lat = measure_latency(net, x, warmup=3, repeats=20, precision=precision)
        assert lat.device.startswith("cuda") and lat.repeats >= 20
        assert 0 < lat.min_ms <= lat.median_ms < 1000


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_builtin_trainer_trains_on_the_gpu(tmp_path: Path, precision: str) -> None:
    """One CNN trial through the trial contract, as a trial process, on CUDA."""
    log_dir = tmp_path / "tb"
    proc = subprocess.run(
        [sys.executable, "-m", "nasctl.search_spaces.cnn", "--dataset", "mnist1d", "--epochs", "1",
         "--precision", precision, "--log_dir", str(log_dir)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "NASCTL_LOG_DIR": str(log_dir), "CUDA_VISIBLE_DEVICES": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads((log_dir / "trial_info.json").read_text())
    assert info["device"].startswith("cuda:0") and info["precision"] == precision
    assert info["peak_memory_mb"] > 0 and info["latency"]["device"].startswith("cuda")


def test_a_trial_sees_only_the_device_it_was_given() -> None:
    """CUDA_VISIBLE_DEVICES=k: the trial's cuda:0 is physical device k (by UUID)."""
    from nasctl.runners.devices import detect_devices

    devices = detect_devices()
    assert devices, "nvidia-smi/NVML found no GPU although CUDA is available"
    uuids = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                           text=True, check=True).stdout.split()
    for k in devices[:2]:
        code = "import torch; print(torch.cuda.device_count(), torch.cuda.get_device_properties(0).uuid)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": k,
                                  "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).stdout.split()
        assert out[0] == "1" and uuids[int(k)].endswith(out[1]), (out, uuids)


def test_a_promotion_resumes_a_gpu_checkpoint(tmp_path: Path) -> None:
    """Multi-fidelity on CUDA: a trial saves its Lightning checkpoint at 1 epoch and
    its promotion loads it (weights, optimizer, epoch counter) and trains on to 2."""
    ckpt = tmp_path / "ckpt"

    def trial(epochs: int, log_dir: Path, resume: Path | None) -> dict:
        env = {**os.environ, "NASCTL_LOG_DIR": str(log_dir), "CUDA_VISIBLE_DEVICES": "0",
               "NASCTL_CHECKPOINT_DIR": str(ckpt)}
        if resume is not None:
            env["NASCTL_RESUME_FROM"] = str(resume)
        proc = subprocess.run(
            [sys.executable, "-m", "nasctl.search_spaces.cnn", "--dataset", "mnist1d", "--epochs", str(epochs),
             "--precision", "bf16", "--log_dir", str(log_dir)],
            capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads((log_dir / "trial_info.json").read_text())  # type: ignore[no-any-return]

    first = trial(1, tmp_path / "rung0", None)
    saved = torch.load(ckpt / "last.ckpt", map_location="cpu", weights_only=False)
    assert saved["epoch"] == 1 and first["device"].startswith("cuda:0")
    second = trial(2, tmp_path / "rung1", ckpt / "last.ckpt")
    assert second["resumed_from"] == str(ckpt / "last.ckpt") and second["device"].startswith("cuda:0")
    assert second["final_step"] == 2 * first["final_step"]  # one more epoch on top of the first, not two
    assert torch.load(ckpt / "last.ckpt", map_location="cpu", weights_only=False)["epoch"] == 2


def test_two_processes_of_one_trial_train_data_parallel_on_the_gpu(tmp_path: Path) -> None:
    """One node x 2 processes of the built-in trainer under torch.distributed.run (as
    runner.cfg.nproc_per_node: 2 starts them): nccl between GPUs of their own, gloo when
    the machine has one GPU and the two share it. Rank 0 alone writes the trial's files."""
    from nasctl.metrics.tensorboard import read_scalars
    from nasctl.runners.distributed import rank_records, single_node_command

    log_dir, state = tmp_path / "tb", tmp_path / "job"
    cmd = single_node_command([sys.executable, "-m", "nasctl.search_spaces.cnn", "--dataset", "mnist1d",
                               "--epochs", "1"], 2, str(state))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "NASCTL_LOG_DIR": str(log_dir), "OMP_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [(r["rank"], r["returncode"], r["world_size"]) for r in rank_records(str(state))] == [(0, 0, 2), (1, 0, 2)]
    info = json.loads((log_dir / "trial_info.json").read_text())
    assert info["device"].startswith("cuda") and info["peak_memory_mb"] > 0
    assert "val_acc" in {o.metric for o in read_scalars(log_dir)}
    assert not list((log_dir / "ranks").rglob("*tfevents*"))  # rank 1 wrote nothing nasctl reads
