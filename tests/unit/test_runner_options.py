"""Each TorchX runner's `runner.cfg` options: declared once (`OPTIONS`: TorchX's run
options plus nasctl's own), each key checked there with a one-line error, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nasctl.errors import SpecError
from nasctl.runners import get_runner, runner_settings
from nasctl.runners.kubernetes import OPTIONS as K8S_OPTIONS
from nasctl.runners.local import OPTIONS as LOCAL_OPTIONS
from nasctl.runners.options import torchx_run_opts
from nasctl.runners.slurm import OPTIONS as SLURM_OPTIONS
from nasctl.runners.distributed import single_node_command

K8S = {"queue": "research", "image": "ghcr.io/x/nasctl:1", "log_volume_claim": "runs", "log_mount_path": "/mnt/n"}


@pytest.mark.parametrize("options", [LOCAL_OPTIONS, SLURM_OPTIONS, K8S_OPTIONS], ids=lambda o: o.scheduler)
def test_declarations_name_torchx_run_options_and_describe_every_key(options: Any) -> None:
    torchx = {name for name, _ in torchx_run_opts(options.scheduler)}
    assert options.reserved <= torchx  # what nasctl sets per trial is TorchX's
    text = options.describe()
    for key in options.allowed():
        assert any(line.startswith(f"{key} (") for line in text.splitlines()), key
    assert not any(line.startswith(f"{key} (") for key in options.reserved for line in text.splitlines())


def _one_line(scheduler: str, cfg: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as ei:
        get_runner(scheduler, cfg)
    assert ei.value.exit_code == 2 and "\n" not in str(ei.value)
    return f"{ei.value} | {ei.value.hint}"


def test_a_torchx_option_of_the_wrong_type_is_refused_when_the_runner_is_built() -> None:
    text = _one_line("slurm", {"time": 15})
    assert "runner.cfg.time must be a str for slurm, got 15" in text and 'quote it: time: "15"' in text
    assert "runner.cfg.prepend_cwd must be a bool" in _one_line("local_cwd", {"prepend_cwd": "yes"})
    assert "runner.cfg.namespace must be a str" in _one_line("kubernetes", {**K8S, "namespace": 3})


def test_unknown_reserved_and_missing_keys() -> None:
    text = _one_line("local_cwd", {"workers": 2})
    assert "['workers'] that local_cwd does not take" in text
    assert "allowed: ['auto_set_cuda_visible_devices', 'devices', 'nproc_per_node', 'prepend_cwd', " \
           "'trials_per_device']" in text
    assert "sets ['log_dir'], which nasctl sets for each trial" in _one_line("local_cwd", {"log_dir": "/tmp/x"})
    assert "auto_set_cuda_visible_devices numbers devices" in _one_line("local_cwd",
                                                                        {"auto_set_cuda_visible_devices": True})
    local = get_runner("local_cwd", {"auto_set_cuda_visible_devices": False})
    assert "auto_set_cuda_visible_devices" not in local.cfg  # type: ignore[attr-defined]
    text = _one_line("kubernetes", {k: v for k, v in K8S.items() if k not in ("queue", "log_mount_path")})
    assert "lacks ['queue', 'log_mount_path']" in text
    assert "set queue, image, log_volume_claim and log_mount_path" in text


def test_own_options_get_their_defaults_and_never_reach_torchx(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .torchxconfig
    local = get_runner("local_cwd", {"devices": [0, 1], "trials_per_device": 2, "poll_interval": 1})
    own = {"devices": ("0", "1"), "trials_per_device": 2, "nproc_per_node": 1, "auto_set_cuda_visible_devices": False}
    assert local.own == own  # type: ignore[attr-defined]
    assert local.cfg == {"prepend_cwd": False}  # type: ignore[attr-defined]
    slurm = get_runner("slurm", {"signal": "usr1@60", "partition": "debug"})
    assert slurm.own == {"nproc_per_node": 1, "signal": "USR1@60"}  # type: ignore[attr-defined]
    assert slurm.cfg == {"partition": "debug"}  # type: ignore[attr-defined]
    k8s = get_runner("kubernetes", K8S)
    assert k8s.cfg["namespace"] == "default" and k8s.own["python"] == "python"  # type: ignore[attr-defined]


def test_a_null_value_means_the_default() -> None:
    assert runner_settings(get_runner("slurm", {}), {"lost_after": None}).lost_after == 600.0
    assert get_runner("local_cwd", {"nproc_per_node": None}).nproc_per_node == 1  # type: ignore[attr-defined]


def test_torchrun_runs_any_program_under_the_rank_wrapper() -> None:
    import sys

    assert single_node_command(["/bin/prog", "-x"], 1, "/t/job") == ["/bin/prog", "-x"]
    ddp = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", "2",
           "-m", "nasctl.runners.distributed", "--state-dir", "/t/job", "--"]
    assert single_node_command([sys.executable, "-m", "mod"], 2, "/t/job") == [*ddp, sys.executable, "-m", "mod"]
    assert single_node_command(["/bin/prog", "-x"], 2, "/t/job") == [*ddp, "/bin/prog", "-x"]
