"""The GPU inventory of a local runner: which devices nasctl may hand out on this host.

Where the list comes from, first match wins:

1. `runner.cfg.devices` in the spec: a list of device indices such as
   `[0, 1, 2, 3]` (or GPU/MIG UUID strings);
2. `NASCTL_DEVICES` in nasctl's environment, same syntax as
   `CUDA_VISIBLE_DEVICES` (`0,1,2,3`);
3. `CUDA_VISIBLE_DEVICES` of the nasctl process;
4. detection: NVML through `pynvml` when it is installed, else `nvidia-smi -L`.

CUDA is never initialised here: an orchestrator that initialised CUDA could
not fork warm trials, and it would hold memory on every GPU. The list may name
devices that do not exist on this machine; placement is then still done and
recorded, which is how placement is tested on machines without GPUs.

Standard library only at module level: `nasctl --help` and dry runs stay fast.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nasctl.errors import SpecError

DEVICES_ENV = "NASCTL_DEVICES"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-/]+$")


@dataclass(frozen=True)
class DeviceInventory:
    """The devices a local runner hands out and how many trials may share one.

    Attributes:
        devices: device ids as `CUDA_VISIBLE_DEVICES` takes them ("0", "3", "GPU-...").
        trials_per_device: at most this many `gpu: 1` trials share a device
            (`runner.cfg.trials_per_device`, default 1: exclusive).
        source: where the list came from (shown by `--dryrun` and `nasctl status`).
    """

    devices: tuple[str, ...]
    trials_per_device: int = 1
    source: str = "runner.cfg.devices"


def parse_device_list(value: Any, where: str) -> tuple[str, ...]:
    """Device ids from a spec list or a `CUDA_VISIBLE_DEVICES`-style string.

    Raises:
        SpecError: a negative or non-integer index, an empty entry, or a duplicate.
    """
    if isinstance(value, str):
        text = value.strip()
        items: list[Any] = [] if text == "" else [p.strip() for p in text.split(",")]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise SpecError(f"{where} must be a list of device indices such as [0, 1], got {value!r}",
                        "write e.g. devices: [0, 1, 2, 3]")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool):
            raise SpecError(f"{where} has {item!r}, not a device index", "use indices such as 0, 1, 2")
        if isinstance(item, int):
            text = str(item)
        elif isinstance(item, str) and item.strip():
            text = item.strip()
        else:
            raise SpecError(f"{where} has {item!r}, not a device index", "use indices such as 0, 1, 2")
        if text.lstrip("-").isdigit():
            if int(text) < 0:
                raise SpecError(f"{where} has a negative device index {text}",
                                "list only indices >= 0 (leave out devices nasctl must not use)")
            text = str(int(text))
        elif not _UUID.match(text):
            raise SpecError(f"{where} has {text!r}, neither a device index nor a GPU-/MIG- UUID",
                            "use indices such as 0, 1, 2 (as nvidia-smi -L numbers them)")
        if text in out:
            raise SpecError(f"{where} names device {text} twice", "list each device once")
        out.append(text)
    return tuple(out)


def detect_devices() -> tuple[str, ...]:
    """The NVIDIA GPUs of this machine by index, without initialising CUDA: NVML
    (`pynvml`, when installed), else `nvidia-smi -L`; () when neither finds any."""
    try:
        import pynvml
    except ImportError:
        pass
    else:
        try:
            pynvml.nvmlInit()
            try:
                return tuple(str(i) for i in range(pynvml.nvmlDeviceGetCount()))
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # pynvml.NVMLError: no driver; fall through to nvidia-smi
            pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(m.group(1) for m in re.finditer(r"^GPU (\d+):", out, re.MULTILINE))


def check_device_cfg(cfg: Mapping[str, Any]) -> int:
    """Validate `runner.cfg.devices` and `trials_per_device` as written in a spec;
    returns trials_per_device.

    Raises:
        SpecError: a bad device list or a `trials_per_device` below 1.
    """
    per = check_trials_per_device(cfg.get("trials_per_device", 1))
    if cfg.get("devices") is not None:
        check_devices(cfg["devices"])
    return per


def check_trials_per_device(value: Any) -> int:
    """`runner.cfg.trials_per_device`: how many `gpu: 1` trials may share a device.

    Raises:
        SpecError: not an integer >= 1.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"runner.cfg.trials_per_device must be an integer >= 1, got {value!r}",
                        "use 1 (one trial per device) or e.g. 2 to let two gpu: 1 trials share one")
    return value


def check_devices(value: Any) -> tuple[str, ...]:
    """`runner.cfg.devices` as device ids (see `parse_device_list`)."""
    return parse_device_list(value, "runner.cfg.devices")


def resolve_inventory(cfg: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> DeviceInventory:
    """The inventory for a local runner's cfg (see the module docstring for the order).

    Raises:
        SpecError: a bad device list (in the spec or in an environment variable)
            or a bad `trials_per_device`.
    """
    env = os.environ if environ is None else environ
    per = check_device_cfg(cfg)
    if cfg.get("devices") is not None:
        return DeviceInventory(check_devices(cfg["devices"]), per, "runner.cfg.devices")
    for name in (DEVICES_ENV, VISIBLE_ENV):
        if name in env:
            text = env[name]
            if name == VISIBLE_ENV and text.strip().startswith("-1"):
                return DeviceInventory((), per, name)  # CUDA's "no devices"
            return DeviceInventory(parse_device_list(text, name), per, name)
    return DeviceInventory(detect_devices(), per, "detected")


def check_gpu_request(gpu: int, inventory: DeviceInventory, nproc_per_node: int = 1) -> None:
    """Can a trial asking for `gpu` devices ever be placed from `inventory`?

    Raises:
        SpecError: no devices at all, more devices than the inventory has, or a
            count that does not split evenly over `nproc_per_node` processes.
    """
    if gpu <= 0:
        return
    have = len(inventory.devices)
    if have == 0:
        where = "NVML and nvidia-smi found none" if inventory.source == "detected" else f"{inventory.source} is empty"
        raise SpecError(
            f"trial.resources.gpu is {gpu} but this machine has no GPUs for local trials ({where})",
            f"set runner.cfg.devices (e.g. [0]) or {DEVICES_ENV}, or use gpu: 0",
        )
    if gpu > have:
        raise SpecError(
            f"trial.resources.gpu is {gpu} but the device inventory has only {have} "
            f"({','.join(inventory.devices)} from {inventory.source})",
            f"ask for at most {have}, or list more devices in runner.cfg.devices",
        )
    if nproc_per_node > 1 and gpu % nproc_per_node:
        raise SpecError(
            f"trial.resources.gpu {gpu} does not split evenly over runner.cfg.nproc_per_node {nproc_per_node}",
            "make gpu a multiple of nproc_per_node (each process gets gpu / nproc_per_node devices)",
        )


def visible_devices_env(devices: Sequence[str]) -> dict[str, str]:
    """The environment that hands a trial its devices: inside it, `cuda:0` is `devices[0]`."""
    return {VISIBLE_ENV: ",".join(devices), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
