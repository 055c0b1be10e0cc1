"""The device inventory, the placement rule, and bad device input through the real CLI."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from nasctl.errors import SpecError
from nasctl.orchestration.devices import choose_devices
from nasctl.runners.devices import DeviceInventory, check_gpu_request, detect_devices, parse_device_list, resolve_inventory
from nasctl.types import DeviceLease, TrialStatus
from tests.conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "digits_mlp.yaml"


def lease(device: str, slot: int = 0, capacity: int = 1) -> DeviceLease:
    return DeviceLease("h", device, slot, capacity, 1, 0, "h:1:0", datetime(2026, 1, 1), TrialStatus.RUNNING)


def test_device_lists_parse_like_cuda_visible_devices() -> None:
    assert parse_device_list([0, 1, "3"], "x") == ("0", "1", "3")
    assert parse_device_list(" 2, 0 ", "x") == ("2", "0")
    assert parse_device_list("", "x") == ()
    assert parse_device_list("GPU-1a2b,MIG-3c4d/1/0", "x") == ("GPU-1a2b", "MIG-3c4d/1/0")
    with pytest.raises(SpecError, match="names device 1 twice"):
        parse_device_list([1, 2, 1], "runner.cfg.devices")
    with pytest.raises(SpecError, match="negative device index -1"):
        parse_device_list([0, -1], "runner.cfg.devices")
    with pytest.raises(SpecError, match="neither a device index"):
        parse_device_list("0,gpu0", "NASCTL_DEVICES")
    with pytest.raises(SpecError, match="must be a list"):
        parse_device_list(3, "runner.cfg.devices")


def test_inventory_order_spec_then_nasctl_devices_then_cuda_visible_devices() -> None:
    env = {"NASCTL_DEVICES": "4,5", "CUDA_VISIBLE_DEVICES": "1"}
    assert resolve_inventory({"devices": [0, 1]}, env) == DeviceInventory(("0", "1"), 1, "runner.cfg.devices")
    assert resolve_inventory({"trials_per_device": 3}, env) == DeviceInventory(("4", "5"), 3, "NASCTL_DEVICES")
    assert resolve_inventory({}, {"CUDA_VISIBLE_DEVICES": "2,3"}).devices == ("2", "3")
    assert resolve_inventory({}, {"CUDA_VISIBLE_DEVICES": "-1"}).devices == ()
    with pytest.raises(SpecError, match="trials_per_device must be an integer >= 1"):
        resolve_inventory({"trials_per_device": 0}, {})


def test_detection_reads_nvidia_smi_without_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aa)'\n"
                   "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bb)'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert detect_devices() == ("0", "1")
    assert resolve_inventory({}, {}).source == "detected"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_devices() == ()


def test_exclusive_placement_takes_the_lowest_free_devices() -> None:
    inv = DeviceInventory(("0", "1", "2", "3"))
    assert choose_devices(inv, 1, []) == [("0", 0, 1)]
    assert choose_devices(inv, 2, [lease("0"), lease("2")]) == [("1", 0, 1), ("3", 0, 1)]
    assert choose_devices(inv, 2, [lease("0"), lease("1"), lease("2")]) is None
    # a device held by another experiment's trial is not free, whatever that trial's capacity
    assert choose_devices(inv, 1, [lease("0", 0, 2), lease("1"), lease("2"), lease("3")]) is None


def test_shared_placement_spreads_then_shares_up_to_the_limit() -> None:
    inv = DeviceInventory(("0", "1"), trials_per_device=2)
    assert choose_devices(inv, 1, [lease("0", 0, 2)]) == [("1", 0, 2)]
    assert choose_devices(inv, 1, [lease("0", 0, 2), lease("1", 0, 2)]) == [("0", 1, 2)]
    full = [lease("0", 0, 2), lease("1", 0, 2), lease("0", 1, 2), lease("1", 1, 2)]
    assert choose_devices(inv, 1, full) is None
    # an exclusive trial (capacity 1) keeps its device to itself
    assert choose_devices(inv, 1, [lease("0", 0, 1), lease("1", 0, 2), lease("1", 1, 2)]) is None
    # two devices are only ever taken whole
    assert choose_devices(inv, 2, [lease("0", 0, 2)]) is None


def test_gpu_requests_checked_against_the_inventory() -> None:
    with pytest.raises(SpecError, match="gpu is 3 but the device inventory has only 2") as e:
        check_gpu_request(3, DeviceInventory(("0", "1")))
    assert "at most 2" in (e.value.hint or "")
    with pytest.raises(SpecError, match="has no GPUs for local trials"):
        check_gpu_request(1, DeviceInventory((), 1, "detected"))
    with pytest.raises(SpecError, match="does not split evenly"):
        check_gpu_request(3, DeviceInventory(("0", "1", "2")), nproc_per_node=2)
    check_gpu_request(0, DeviceInventory(()))
    check_gpu_request(2, DeviceInventory(("0", "1")), nproc_per_node=2)


def _spec(tmp_path: Path, gpu: int, runner: str = "runner: {scheduler: local_cwd, cfg: {}}") -> Path:
    text = EXAMPLE.read_text().replace("gpu: 0", f"gpu: {gpu}")
    assert f"gpu: {gpu}" in text
    text = "\n".join(line for line in text.splitlines() if not line.startswith("runner:")) + f"\n{runner}\n"
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    return spec


def _error(proc) -> str:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert err.startswith("Error:") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("dryrun", [False, True])
def test_bad_device_input_is_one_line_and_exit_2(tmp_path: Path, dryrun: bool) -> None:
    db = tmp_path / "n.db"
    flags = ["--dryrun"] if dryrun else ["--db", f"sqlite:///{db}"]
    no_gpus = {"NASCTL_DEVICES": ""}
    err = _error(run_cli("run", str(_spec(tmp_path, 1)), *flags, cwd=tmp_path, env=no_gpus))
    assert "gpu is 1 but this machine has no GPUs for local trials (NASCTL_DEVICES is empty)" in err and "runner.cfg.devices" in err
    err = _error(run_cli("run", str(_spec(tmp_path, 3, "runner: {cfg: {devices: [0, 1]}}")), *flags, cwd=tmp_path))
    assert "gpu is 3 but the device inventory has only 2" in err
    err = _error(run_cli("run", str(_spec(tmp_path, 1, "runner: {cfg: {devices: [0, 0]}}")), *flags, cwd=tmp_path))
    assert "names device 0 twice" in err
    err = _error(run_cli("run", str(_spec(tmp_path, 1, "runner: {cfg: {devices: [-2]}}")), *flags, cwd=tmp_path))
    assert "negative device index -2" in err
    err = _error(run_cli("run", str(_spec(tmp_path, 1)), *flags, cwd=tmp_path, env={"NASCTL_DEVICES": "0,0"}))
    assert "NASCTL_DEVICES names device 0 twice" in err
    assert not db.exists()  # nothing written for bad input


def test_dryrun_shows_where_gpu_trials_go(tmp_path: Path) -> None:
    local = run_cli("run", str(_spec(tmp_path, 2)), "--dryrun", "--json", cwd=tmp_path,
                    env={"NASCTL_DEVICES": "3,4,5"})
    assert local.returncode == 0, local.stderr
    plan = json.loads(local.stdout)["devices"]
    assert plan == {"gpu_per_trial": 2, "placed_by": "nasctl", "inventory": ["3", "4", "5"],
                    "source": "NASCTL_DEVICES", "trials_per_device": 1, "first_trial": ["3", "4"]}
    text = run_cli("run", str(_spec(tmp_path, 2)), "--dryrun", cwd=tmp_path, env={"NASCTL_DEVICES": "3,4,5"})
    assert "CUDA_VISIBLE_DEVICES=3,4" in text.stdout


def test_cluster_dryruns_carry_the_gpu_request(tmp_path: Path) -> None:
    slurm = _spec(tmp_path, 2, "runner: {scheduler: slurm, cfg: {partition: debug}}")
    res = run_cli("run", str(slurm), "--dryrun", "--json", cwd=tmp_path, env={"NASCTL_DEVICES": ""})
    assert res.returncode == 0, res.stderr  # the cluster places GPUs: no local inventory needed
    plan = json.loads(res.stdout)
    assert "--gpus-per-task=2" in plan["request"] and plan["devices"]["placed_by"] == "slurm"
    k8s_text = (ROOT / "examples" / "digits_mlp_k8s.yaml").read_text().replace("gpu: 0", "gpu: 2")
    assert "gpu: 2" in k8s_text
    k8s = tmp_path / "k.yaml"
    k8s.write_text(k8s_text)
    res = run_cli("run", str(k8s), "--dryrun", "--json", "--workdir", "/mnt/nasctl/runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    job = yaml.safe_load(plan["request"])
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert plan["devices"]["placed_by"] == "kubernetes"


def test_live_display_shows_trials_waiting_for_devices() -> None:
    from rich.console import Console

    from nasctl.console import ProgressDisplay
    from nasctl.orchestration.progress import Progress

    p = Progress("e", 8, 4, {"RUNNING": 2, "CANDIDATE": 2}, 0.0, [], False, 0.0, 3.0, None, waiting_for_devices=2)
    console = Console(record=True, width=120)
    console.print(ProgressDisplay(enabled=False)._render(p))
    assert "2 waiting for devices" in console.export_text()
    console = Console(record=True, width=120)
    console.print(ProgressDisplay(enabled=False)._render(Progress("e", 8, 4, {}, 0.0, [], False, 0.0, 3.0, None)))
    assert "waiting" not in console.export_text()
