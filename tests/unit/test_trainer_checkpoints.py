"""The built-in trainer's checkpoints as an attempt's retry needs them: real trial
processes (Lightning on CPU, digits, 512-sample batches so an epoch is a few
steps), stopped at a known batch by tests.unit.held_model, then killed or
signalled; and a retry resumed from what they left."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from nasctl.metrics.tensorboard import read_scalars
from nasctl.search_spaces.checkpoints import CheckpointCallback, SignalFlags, check_checkpoint, save_checkpoint
from tests.conftest import ROOT
from tests.unit.held_model import HOLD_ENV

BATCH = 512
TRIAL = [sys.executable, "-m", "nasctl.search_spaces.model", "--model", "tests.unit.held_model:build",
         "--dataset", "digits", "--batch_size", str(BATCH), "--latency_repeats", "1", "--latency_warmup", "0",
         "--latency_min_seconds", "0"]
CONTRACT_ENV = ("NASCTL_CHECKPOINT_DIR", "NASCTL_RESUME_FROM", "NASCTL_LOG_DIR", HOLD_ENV)


def steps_per_epoch() -> int:
    from nasctl.search_spaces.data import load_dataset

    return math.ceil(len(load_dataset("digits").y_train) / BATCH)


class Trial:
    """One trial process; `hold` makes its training wait at that batch (see held_model)."""

    def __init__(self, log_dir: Path, epochs: int, env: dict[str, str], hold: int | None = None) -> None:
        self.log_dir = log_dir
        self.marker = log_dir.parent / f"{log_dir.name}.held"
        full = {k: v for k, v in os.environ.items() if k not in CONTRACT_ENV} | env
        if hold is not None:
            full[HOLD_ENV] = f"{hold}:{self.marker}"
        self.proc = subprocess.Popen([*TRIAL, "--epochs", str(epochs), "--log_dir", str(log_dir)], env=full,
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_held(self) -> None:
        deadline = time.monotonic() + 120
        while not self.marker.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out, err = self.proc.communicate(timeout=60)
                pytest.fail(f"the trial never reached its hold (exit {self.proc.returncode}):\n{out}\n{err}")
            time.sleep(0.02)

    def signal_and_release(self, sig: int) -> None:
        """Deliver `sig` while training waits, then let it go on."""
        self.wait_held()
        os.kill(self.proc.pid, sig)
        self.marker.unlink()

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=300)
        return self.proc.returncode, out, err

    def info(self) -> dict[str, Any]:
        return json.loads((self.log_dir / "trial_info.json").read_text())  # type: ignore[no-any-return]


def run(log_dir: Path, epochs: int, env: dict[str, str]) -> tuple[Trial, str, str]:
    trial = Trial(log_dir, epochs, env)
    rc, out, err = trial.finish()
    assert rc == 0, err[-3000:]
    return trial, out, err


def load(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)  # type: ignore[no-any-return]


def steps_of(log_dir: Path, metric: str) -> list[int]:
    return sorted(o.step for o in read_scalars(log_dir) if o.metric == metric)


def test_an_epochs_checkpoint_outlives_sigkill_and_the_retry_trains_only_the_rest(tmp_path: Path) -> None:
    n = steps_per_epoch()
    ckpt_dir = tmp_path / "checkpoints"
    first = Trial(tmp_path / "a1", 3, {"NASCTL_CHECKPOINT_DIR": str(ckpt_dir)}, hold=n + 2)
    first.wait_held()  # in epoch 2: epoch 1 has ended
    first.proc.kill()
    assert first.finish()[0] == -signal.SIGKILL
    saved = load(ckpt_dir / "last.ckpt")
    assert saved["global_step"] == n and saved["epoch"] == 0  # Lightning's index of the epoch that ended
    assert saved["loops"]["fit_loop"]["epoch_progress"]["total"]["processed"] == 1  # its validation included
    assert sorted(os.listdir(ckpt_dir)) == ["last.ckpt"]

    env = {"NASCTL_CHECKPOINT_DIR": str(ckpt_dir), "NASCTL_RESUME_FROM": str(ckpt_dir / "last.ckpt")}
    retry, _, _ = run(tmp_path / "a2", 3, env)
    info = retry.info()
    assert info["resumed_from"] == str(ckpt_dir / "last.ckpt") and "resume_error" not in info
    assert info["resumed_at_epoch"] == 1 and info["resumed_at_step"] == n
    assert info["final_step"] == 3 * n  # what a straight 3-epoch run ends at
    # the retry logged epochs 2 and 3 only, at the steps a straight run logs them, then the final step
    assert steps_of(retry.log_dir, "train_loss") == [2 * n - 1, 3 * n - 1]
    assert steps_of(retry.log_dir, "val_acc") == [2 * n - 1, 3 * n - 1, 3 * n]
    assert sorted(o.value for o in read_scalars(retry.log_dir) if o.metric == "epoch") == [1, 1, 2, 2]
    assert steps_of(retry.log_dir, "latency_ms") == [0, 3 * n]
    assert load(ckpt_dir / "last.ckpt")["global_step"] == 3 * n


def test_sigterm_saves_at_the_next_batch_stops_and_ends_the_trial_by_sigterm(tmp_path: Path) -> None:
    n = steps_per_epoch()
    ckpt_dir, log_dir = tmp_path / "checkpoints", tmp_path / "tb"
    env = {"NASCTL_CHECKPOINT_DIR": str(ckpt_dir)}
    first = Trial(log_dir, 3, env, hold=n + 2)
    first.signal_and_release(signal.SIGTERM)  # during batch 2 of epoch 2
    rc, out, _ = first.finish()
    assert rc == -signal.SIGTERM  # as if killed outright: the attempt ended from outside
    assert f"SIGTERM at step {n + 2}: checkpoint saved to {ckpt_dir / 'last.ckpt'}; stopping" in out
    assert load(ckpt_dir / "last.ckpt")["global_step"] == n + 2  # past the epoch boundary (n), not back at it
    assert first.info()["stopped_by"] == "SIGTERM"
    assert steps_of(log_dir, "latency_ms") == [0]  # no result: no final step

    # the retry, in the same log folder as an attempt's retry is, finishes the run
    retry, _, _ = run(log_dir, 3, {**env, "NASCTL_RESUME_FROM": str(ckpt_dir / "last.ckpt")})
    info = retry.info()
    assert info["resumed_at_step"] == n + 2 and info["resumed_at_epoch"] == 1
    assert info["final_step"] == 3 * n and "stopped_by" not in info
    assert {2 * n - 1, 3 * n - 1} <= set(steps_of(log_dir, "train_loss"))
    assert max(steps_of(log_dir, "val_acc")) == 3 * n and steps_of(log_dir, "latency_ms") == [0, 0, 3 * n]


def test_sigusr1_saves_and_training_goes_on_to_a_normal_end(tmp_path: Path) -> None:
    n = steps_per_epoch()
    ckpt_dir = tmp_path / "checkpoints"
    trial = Trial(tmp_path / "tb", 2, {"NASCTL_CHECKPOINT_DIR": str(ckpt_dir)}, hold=2)
    trial.signal_and_release(signal.SIGUSR1)
    rc, out, err = trial.finish()
    assert rc == 0, err[-3000:]
    assert f"SIGUSR1 at step 2: checkpoint saved to {ckpt_dir / 'last.ckpt'}; training on" in out
    assert trial.info()["final_step"] == 2 * n
    assert steps_of(trial.log_dir, "val_acc") == [n - 1, 2 * n - 1, 2 * n]
    saved = load(ckpt_dir / "last.ckpt")  # rewritten since: the finished state
    assert saved["global_step"] == 2 * n and saved["epoch"] == 2


@pytest.mark.parametrize("content", [b"not a checkpoint", None], ids=["unreadable", "missing"])
def test_a_checkpoint_that_cannot_be_read_means_training_from_scratch(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "gone" / "last.ckpt"
    if content is not None:
        path.parent.mkdir()
        path.write_bytes(content)
    trial, _, err = run(tmp_path / "tb", 1, {"NASCTL_RESUME_FROM": str(path)})
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"NASCTL_RESUME_FROM names {path}, which cannot be resumed from")
    info = trial.info()
    assert info["resumed_from"] is None and info["resume_error"] == lines[0] and "resumed_at_epoch" not in info
    assert info["final_step"] == steps_per_epoch()
    assert sorted(tmp_path.rglob("*.ckpt*")) == ([path] if content is not None else [])  # saved nothing


def test_check_checkpoint_says_why_a_file_is_no_checkpoint(tmp_path: Path) -> None:
    torch.save({"model": {}}, tmp_path / "plain.pt")
    with pytest.raises(ValueError, match="not a Lightning checkpoint"):
        check_checkpoint(str(tmp_path / "plain.pt"))
    with pytest.raises(ValueError, match="no such file"):
        check_checkpoint(str(tmp_path / "none.ckpt"))


def test_a_save_that_fails_halfway_leaves_the_earlier_checkpoint_intact(tmp_path: Path) -> None:
    """A save that dies after writing part of the file (disk full, a kill inside
    Lightning's writer) leaves the last good checkpoint whole and loadable."""
    path = tmp_path / "ckpt" / "last.ckpt"
    path.parent.mkdir()
    torch.save({"state_dict": {"w": torch.ones(3)}, "loops": {}, "epoch": 4, "global_step": 40}, path)
    before = path.read_bytes()

    def half_then_fail(target: str) -> None:
        with open(target, "wb") as f:
            f.write(before[: len(before) // 2])
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(SimpleNamespace(save_checkpoint=half_then_fail), str(path))  # type: ignore[arg-type]
    assert path.read_bytes() == before
    check_checkpoint(str(path))  # still a whole checkpoint
    assert torch.load(path, weights_only=False)["epoch"] == 4


def test_signal_flags_and_a_sigterm_before_training() -> None:
    flags = SignalFlags()
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)}
    with flags.installed():
        assert signal.getsignal(signal.SIGTERM) == flags.handle
        os.kill(os.getpid(), signal.SIGUSR2)  # Slurm's --signal may send either warning
        assert flags.save and not flags.stop and flags.received == "SIGUSR2"
        os.kill(os.getpid(), signal.SIGUSR1)
        assert flags.save and not flags.stop and flags.received == "SIGUSR1"
        os.kill(os.getpid(), signal.SIGTERM)
        assert flags.stop and flags.received == "SIGTERM"
        # SIGTERM before training: stop at once, and save nothing (nothing new was trained)
        trainer = SimpleNamespace(current_epoch=3, global_step=7, should_stop=False, loggers=[], world_size=1)
        saver = CheckpointCallback("/nonexistent/last.ckpt", flags)
        saver.on_train_start(trainer, None)  # type: ignore[arg-type]
        assert trainer.should_stop and saver.stopped and (saver.start_epoch, saver.start_step) == (3, 7)
        saver.on_train_epoch_end(trainer, None)  # type: ignore[arg-type]  # Lightning ends the epoch: no save
    assert {s: signal.getsignal(s) for s in before} == before


def test_exit_process_ends_a_stopped_trial_by_its_signal() -> None:
    code = "from nasctl.search_spaces.trainer import exit_process; exit_process(-15)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == -signal.SIGTERM
