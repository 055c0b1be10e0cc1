"""The loop with real local trials and scripted optimizers: trial scripts, optimizers, a loop run in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.loop import Orchestrator
from nasctl.optimizer.ax_optimizer import Candidate
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store

SCRIPT = """
import os, sys
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
x = float(sys.argv[sys.argv.index('--x') + 1])
w = EventFileWriter(os.environ['NASCTL_LOG_DIR'])
for tag, v in (('a', x), ('b', 1 - x)):
    w.add_event(Event(step=0, wall_time=0.0, summary=Summary(value=[Summary.Value(tag=tag, simple_value=v)])))
w.close()
"""
"""A trial script: writes a = x and b = 1 - x (x from --x) as TensorBoard scalars at step 0."""


class GatedOptimizer:
    """Proposes x = 0.1, 0.2, ...; from the second request on it blocks until `gate` opens."""

    log_scale: tuple[str, ...] | None = None  # no model

    def __init__(self, gate: threading.Event, log: list[str]) -> None:
        self.gate, self.log, self.n = gate, log, 0

    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        self.log.append(f"complete {index}")

    def fail(self, index: int, reason: str | None = None) -> None:
        self.log.append(f"fail {index}")

    def abandon(self, index: int) -> None:
        self.log.append(f"abandon {index}")

    def attach(self, parameters: Mapping[str, Any]) -> int:
        raise NotImplementedError

    def generate(self, n: int) -> list[Candidate]:
        if self.n > 0:
            self.gate.wait(120)
        self.log.append(f"generate {n} after {self.n} proposals")
        out = [Candidate(self.n + k, {"x": round(0.1 * (self.n + k + 1), 3)}, "gated") for k in range(n)]
        self.n += n
        return out


SLEEPY_SCRIPT = SCRIPT.replace("x = float(", "import time\nx = float(") + "time.sleep(float(sys.argv[sys.argv.index('--s') + 1]))\n"
"""SCRIPT, then a sleep of --s seconds."""


class ListOptimizer(GatedOptimizer):
    """Proposes the given points in order, each proposal after `delay` seconds."""

    def __init__(self, points: list[dict[str, float]], log: list[str], delay: float = 0.0) -> None:
        gate = threading.Event()
        gate.set()
        super().__init__(gate, log)
        self.points, self.delay = points, delay

    def generate(self, n: int) -> list[Candidate]:
        time.sleep(self.delay)
        self.log.append(f"generate {n} after {self.n} proposals")
        out = [Candidate(self.n + k, self.points[self.n + k], "list") for k in range(n)]
        self.n += n
        return out


def experiment(tmp_path: Path, name: str, sleeps: list[float], parallelism: int,
               extra: str = "") -> tuple[Store, Any, Any, CandidateGenerator]:
    """A stored experiment of len(sleeps) SLEEPY_SCRIPT trials (trial k: x = 0.1 (k + 1), s = sleeps[k]),
    its spec, and a generator proposing those points in order; `extra` adds keys to the trial section."""
    script = tmp_path / "t.py"
    script.write_text(SLEEPY_SCRIPT)
    spec = parse_spec(f"""
name: {name}
search_space: {{x: {{type: float, low: 0, high: 1}}, s: {{type: float, low: 0, high: 60}}}}
objectives: {{a: {{goal: maximize}}, b: {{goal: maximize}}}}
budget: {{max_trials: {len(sleeps)}, parallelism: {parallelism}, max_failures: 0}}
trial: {{script: {script}, preload: false{extra}}}
""")
    store = Store(f"sqlite:///{tmp_path}/{name}.db", create=True)
    exp = store.create_experiment(name, spec_to_dict(spec), str(tmp_path / name))
    points = [{"x": 0.1 * (k + 1), "s": s} for k, s in enumerate(sleeps)]
    return store, exp, spec, CandidateGenerator(lambda: ListOptimizer(points, []))


def in_thread(orch: Orchestrator) -> tuple[threading.Thread, dict[str, Any]]:
    """`orch.run()` started in a daemon thread; its summary lands in the dict under "summary"."""
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.setdefault("summary", orch.run()), daemon=True)
    t.start()
    return t, out
