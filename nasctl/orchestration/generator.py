"""Candidate generation off the loop's critical path.

`CandidateGenerator` owns the optimizer on one worker thread. The loop sends it
messages (a trial completed, failed, was abandoned or early-stopped; please propose n) and
collects proposals without blocking, so polling, metric collection and
dispatch go on while the model fits. Messages are applied in the order they
were sent, and every outcome sent before a request is applied before that
request is served, so each proposal uses all data the loop had at the time.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nasctl import failpoints
from nasctl.optimizer.base import Candidate, Optimizer


@dataclass(frozen=True)
class Proposal:
    candidates: list[Candidate]
    seconds: float
    cpu_seconds: float = 0.0  # CPU time of the generator thread: the cost without other load
    log_scale: tuple[str, ...] | None = None  # the optimizer's `log_scale` after this proposal


class GeneratorFailed(Exception):
    """The optimizer raised on the worker thread; `details` holds its traceback."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


class CandidateGenerator:
    """Runs an optimizer on a worker thread.

    Args:
        make_optimizer: builds the optimizer on the worker thread (so its
            imports and set-up also stay off the loop's path).
    """

    def __init__(self, make_optimizer: Callable[[], Optimizer]) -> None:
        self._make = make_optimizer
        self._inbox: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
        self._outbox: queue.Queue[Proposal | GeneratorFailed | tuple[str, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="nasctl-generator", daemon=True)
        self.pending_request: int | None = None
        self.request_started: float | None = None
        self.ready = False
        self.wake: Callable[[], None] | None = None  # called (on the worker thread) when an answer is ready

    def start(self) -> None:
        self._thread.start()

    # --- called by the loop -------------------------------------------------
    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        self._inbox.put(("complete", (index, dict(values), cost)))

    def fail(self, index: int, reason: str | None = None) -> None:
        self._inbox.put(("fail", (index, reason)))

    def abandon(self, index: int) -> None:
        self._inbox.put(("abandon", (index,)))

    def early_stop(self, index: int, values: Mapping[str, float] | None) -> None:
        self._inbox.put(("early_stop", (index, None if values is None else dict(values))))

    def attach(self, parameters: Mapping[str, Any]) -> None:
        self._inbox.put(("attach", (dict(parameters),)))

    def request(self, n: int) -> None:
        """Ask for `n` candidates; at most one request is outstanding."""
        assert self.pending_request is None, "a request is already outstanding"
        self.pending_request = n
        self.request_started = time.monotonic()
        self._inbox.put(("generate", (n,)))

    def poll(self) -> Proposal | None:
        """The answer to the outstanding request, if ready. Raises `GeneratorFailed`."""
        while True:
            try:
                item = self._outbox.get_nowait()
            except queue.Empty:
                return None
            if isinstance(item, tuple) and item[0] == "ready":
                self.ready = True
                continue
            self.pending_request = None
            self.request_started = None
            if isinstance(item, GeneratorFailed):
                raise item
            assert isinstance(item, Proposal)
            return item

    def wait(self, timeout: float) -> Proposal | None:
        """Block up to `timeout` seconds for the outstanding request."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.poll()
            if got is not None:
                return got
            time.sleep(0.02)
        return None

    def stop(self) -> None:
        self._inbox.put(("stop", ()))

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the worker thread to end after `stop`
        (True if it did). The thread is a daemon; one still tearing the optimizer
        down while the interpreter finalises can free torch tensors without the
        GIL and abort the process (`terminate called without an active
        exception`, exit code 134, seen after a completed run), so the loop
        waits for it before returning."""
        if self._thread.ident is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def busy_seconds(self) -> float:
        return 0.0 if self.request_started is None else time.monotonic() - self.request_started

    # --- worker thread --------------------------------------------------------
    def _answer(self, item: Proposal | GeneratorFailed | tuple[str, Any]) -> None:
        self._outbox.put(item)
        if self.wake is not None:
            self.wake()

    def _work(self) -> None:
        try:
            opt = self._make()
        except Exception as e:
            self._fail_forever(e)
            return
        self._answer(("ready", None))
        while True:
            kind, args = self._inbox.get()
            try:
                if kind == "stop":
                    return
                if kind == "complete":
                    opt.complete(*args)
                elif kind == "fail":
                    opt.fail(*args)
                elif kind == "abandon":
                    opt.abandon(*args)
                elif kind == "early_stop":
                    opt.early_stop(*args)
                elif kind == "attach":
                    opt.attach(*args)
                elif kind == "generate":
                    failpoints.hit("during_generation")
                    t0, c0 = time.perf_counter(), time.thread_time()
                    cands = opt.generate(*args)
                    self._answer(
                        Proposal(cands, time.perf_counter() - t0, time.thread_time() - c0, opt.log_scale)
                    )
            except Exception as e:
                self._answer(
                    GeneratorFailed(f"optimizer failed on {kind}: {type(e).__name__}: {e}", traceback.format_exc())
                )
                if kind != "generate":
                    return

    def _fail_forever(self, e: Exception) -> None:
        err = GeneratorFailed(f"optimizer could not start: {type(e).__name__}: {e}", traceback.format_exc())
        while True:
            kind, _ = self._inbox.get()
            if kind == "stop":
                return
            if kind == "generate":
                self._answer(err)
