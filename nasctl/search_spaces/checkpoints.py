"""Checkpoints of the built-in trainer: when they are saved, how a trial resumes from one.

The contract with nasctl (docs/multifidelity.md, docs/trials.md):

- `NASCTL_CHECKPOINT_DIR` names a folder; the trainer keeps its latest
  checkpoint there as `last.ckpt` (CHECKPOINT_FILE), rewritten at the end of
  every epoch (after validation), at the next safe point after SIGUSR1,
  SIGUSR2 or SIGTERM, and once more when training ends. Without it nothing
  is saved.
- `NASCTL_RESUME_FROM` names a checkpoint to continue from: a promotion's
  source, or this trial's own `last.ckpt` when an attempt is retried.

Signals: a scheduler sends SIGUSR1 (or SIGUSR2, as `runner.cfg.signal` says)
as a warning before a time limit or a preemption, SIGTERM when it ends the
job. The handlers only set flags (`SignalFlags`); `CheckpointCallback` acts on
them between two training batches or at an epoch's end, where the model, the
optimizer and Lightning's loop counters agree. SIGUSR1, SIGUSR2: save and
train on. SIGTERM: save, stop, and end the process by SIGTERM itself
(`killed_exit_code`), so the attempt is recorded as killed rather than as a
failure of the trial's own code.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytorch_lightning as pl

CHECKPOINT_DIR_ENV = "NASCTL_CHECKPOINT_DIR"
RESUME_ENV = "NASCTL_RESUME_FROM"
CHECKPOINT_FILE = "last.ckpt"
SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)


def checkpoint_path() -> str | None:
    """Where this trial keeps its checkpoint (`$NASCTL_CHECKPOINT_DIR/last.ckpt`), None if nasctl asked for none."""
    folder = os.environ.get(CHECKPOINT_DIR_ENV)
    return os.path.join(folder, CHECKPOINT_FILE) if folder else None


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(trainer: pl.Trainer, path: str) -> None:
    """Write `trainer`'s checkpoint (weights, optimizer, loop counters) to `path` atomically.

    The checkpoint goes to a temporary file in the same folder, is fsynced and
    then renamed over `path` (and the folder fsynced), so whoever reads `path`,
    a retry after a kill at any moment included, finds the previous checkpoint
    or the new one, never part of one. In a data-parallel trial every rank calls it
    and only rank 0 writes (the checkpoint nasctl reads is rank 0's)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp"
    trainer.save_checkpoint(tmp)  # every rank of a data-parallel trial takes part; rank 0 writes
    if not trainer.is_global_zero:
        return
    _fsync(tmp)
    os.replace(tmp, path)
    _fsync(folder)


def check_checkpoint(path: str) -> None:
    """Load `path` as a Lightning checkpoint; raises ValueError, saying why, if it cannot be one.

    Reading it once before `fit` is what lets an unreadable checkpoint mean
    "train from scratch" instead of a crash inside Lightning (which reads it again)."""
    import torch

    if not os.path.isfile(path):
        raise ValueError("no such file")
    try:
        # the trial's own checkpoint (nasctl names only those): optimizer and loop states are not plain tensors
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - torch.load raises whatever its reader or the unpickler meets
        raise ValueError(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'unreadable'}") from e
    if not isinstance(ckpt, dict) or not {"state_dict", "loops", "epoch", "global_step"} <= ckpt.keys():
        raise ValueError("not a Lightning checkpoint (no state_dict, loops, epoch or global_step)")


def resume_point() -> tuple[str | None, str | None]:
    """The checkpoint `NASCTL_RESUME_FROM` names, or None with why not (None, None: none named).

    A missing or unreadable checkpoint is not the trial's fault (a node lost
    the file, a kill came mid-copy): the trial trains from scratch, which is
    correct, only slower."""
    path = os.environ.get(RESUME_ENV) or None
    if path is None:
        return None, None
    try:
        check_checkpoint(path)
    except ValueError as e:
        return None, f"{RESUME_ENV} names {path}, which cannot be resumed from ({e}); training from scratch"
    return path, None


class SignalFlags:
    """What the trial was asked by signal. The handler only sets flags: it runs
    between two bytecodes of whatever the trial was doing (half-way through an
    optimizer step, say), where a checkpoint would not be consistent."""

    def __init__(self) -> None:
        self.save = False  # save at the next safe point
        self.stop = False  # and then stop (SIGTERM)
        self.received: str | None = None  # the last signal's name

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        self.save = True
        self.stop = self.stop or signum == signal.SIGTERM
        self.received = signal.Signals(signum).name

    def install(self) -> None:
        """Make `handle` the handler of SIGNALS (main thread only, as Python allows)."""
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                signal.signal(sig, self.handle)

    @contextmanager
    def installed(self) -> Iterator[SignalFlags]:
        """`install` for the duration, then the previous handlers back (a trial run
        in-process, as tests do, leaves its caller's handlers as they were)."""
        main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.getsignal(sig) for sig in SIGNALS} if main else {}
        self.install()
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                if handler is not None:  # None: installed from outside Python, cannot be put back
                    signal.signal(sig, handler)


def killed_exit_code() -> int:
    """What a trial stopped by SIGTERM returns: minus the signal, as `subprocess` reports
    a process it ended; `exit_process` ends the process by that signal."""
    return -int(signal.SIGTERM)


class CheckpointCallback(pl.Callback):
    """Saves the checkpoint at every epoch's end and when a signal asks, and stops on SIGTERM.

    Args:
        path: where to save (`checkpoint_path()`); None saves nothing, but
            SIGTERM still stops training at the next safe point.
        flags: the signal flags the trial installed.

    Attributes:
        stopped: training was stopped by SIGTERM (the trial must not report a result).
        start_epoch, start_step: `trainer.current_epoch` and `global_step` as training
            began, after any checkpoint was restored.
    """

    def __init__(self, path: str | None, flags: SignalFlags) -> None:
        self.path = path
        self.flags = flags
        self.stopped = False
        self.start_epoch = 0
        self.start_step = 0

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning replaces the SIGTERM handler as `fit` begins (restoring ours when it ends);
        # its own raises an exception at the next batch, before anything is saved
        self.flags.install()
        self.start_epoch, self.start_step = trainer.current_epoch, trainer.global_step
        self._agree(trainer)
        if self.flags.stop:  # nothing trained yet in this attempt: nothing new to save
            self._stop(trainer, saved=False)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        _flush_loggers(trainer)  # the previous epoch's train_loss, logged after its checkpoint

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        self._agree(trainer)
        if self.flags.save and not self.stopped:
            self._save(trainer, on_request=True)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # after a stop mid-epoch Lightning still ends the epoch (and counts it as done):
        # the checkpoint saved at the stop, which does not, stays
        if not self.stopped:
            self._save(trainer, on_request=self.flags.save)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        _flush_loggers(trainer)

    def _agree(self, trainer: pl.Trainer) -> None:
        """In a data-parallel trial, a signal one rank got is every rank's: they save
        (a collective step) and stop at the same batch."""
        if trainer.world_size > 1:
            self.flags.save = trainer.strategy.reduce_boolean_decision(self.flags.save, all=False)
            self.flags.stop = trainer.strategy.reduce_boolean_decision(self.flags.stop, all=False)

    def _save(self, trainer: pl.Trainer, *, on_request: bool) -> None:
        self.flags.save = False  # before saving: a signal during the save asks for another
        if self.path is not None:
            _flush_loggers(trainer)  # what the checkpoint has trained is on disk before the checkpoint
            save_checkpoint(trainer, self.path)
        if on_request and not self.flags.stop:
            what = f"checkpoint saved to {self.path}" if self.path else f"no {CHECKPOINT_DIR_ENV}, nothing saved"
            print(f"{self.flags.received} at step {trainer.global_step}: {what}; training on", flush=True)
        if self.flags.stop:
            self._stop(trainer, saved=self.path is not None)

    def _stop(self, trainer: pl.Trainer, *, saved: bool) -> None:
        trainer.should_stop = True
        self.stopped = True
        what = f"checkpoint saved to {self.path}" if saved else "nothing saved"
        print(f"SIGTERM at step {trainer.global_step}: {what}; stopping", flush=True)


def _flush_loggers(trainer: pl.Trainer) -> None:
    for logger in trainer.loggers:
        logger.save()

