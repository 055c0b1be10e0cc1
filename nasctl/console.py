"""The terminal: rich consoles, number and status formatting, and the live progress
display of a running experiment (a `ProgressSink`) that `nasctl run` and
`nasctl.run(progress=True)` both draw.

Machine output (`--json`) goes through `print_json` only: clean JSON on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from nasctl.orchestration.progress import Progress

# Pipes and files get wide tables rather than rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

STATUS_STYLE = {
    "COMPLETED": "green",
    "RUNNING": "cyan",
    "CANDIDATE": "blue",
    "FAILED": "red",
    "EARLY_STOPPED": "cyan",
    "ABANDONED": "magenta",
    "STOPPED": "yellow",
    "QUEUED": "blue",
    "NOT_RUNNING": "yellow",  # `nasctl status`: recorded RUNNING, but no orchestrator drives it
}


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def fmt_cell(v: Any) -> str:
    """A table cell: whole floats as digits, others to 4 significant digits, text escaped for rich."""
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e12:
            return str(int(v))
        return f"{v:.4g}"
    return escape(str(v))


def fmt_counts(counts: dict[str, int]) -> str:
    """`completed 3, running 2` in each status's colour."""
    parts = [f"[{STATUS_STYLE.get(k, '')}]{k.lower()} {n}[/]" for k, n in counts.items() if n]
    return ", ".join(parts) or "no trials"


class ProgressDisplay:
    """Live view while an experiment runs: counts, hypervolume, best trade-offs,
    what the optimizer is doing. On a non-terminal it prints one line per event."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.live: Live | None = None
        self._seen: list[str] = []

    def __enter__(self) -> ProgressDisplay:
        if self.enabled and err_console.is_terminal:
            self.live = Live(console=err_console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, p: Progress) -> None:
        self.update(p)

    def update(self, p: Progress) -> None:
        if not self.enabled:
            return
        if self.live is None:
            for m in p.messages:
                if m not in self._seen:
                    err_console.print(escape(m), highlight=False)
                    self._seen.append(m)
            self._seen = self._seen[-50:]
            return
        self.live.update(self._render(p))

    def _render(self, p: Progress) -> Any:
        done = sum(p.counts.get(k, 0) for k in ("COMPLETED", "FAILED", "EARLY_STOPPED", "ABANDONED"))
        head = Table.grid(padding=(0, 2))
        head.add_row(
            f"[bold]{escape(p.experiment)}[/]",
            ProgressBar(total=p.max_trials, completed=done, width=30),
            f"{done}/{p.max_trials}",
            fmt_counts({k: v for k, v in p.counts.items() if v}),
            f"{p.elapsed:.0f}s",
        )
        if getattr(p, "queued", 0):
            head.add_row("", f"[yellow]{p.queued} of the running trials queued by {escape(p.scheduler)}[/]",
                         "", "", "")
        if getattr(p, "gpu_hours", 0) or getattr(p, "max_gpu_hours", None):
            limit = f" of {p.max_gpu_hours:g}" if p.max_gpu_hours else ""
            head.add_row("", f"{p.gpu_hours:.3g}{limit} GPU-hours", "", "", "")
        if getattr(p, "waiting_for_devices", 0):
            head.add_row("", f"[yellow]{p.waiting_for_devices} waiting for devices[/]", "", "", "")
        if getattr(p, "unreachable_since", None) is not None:
            since = time.strftime("%H:%M:%S", time.localtime(p.unreachable_since))
            head.add_row("", f"[yellow]{escape(p.scheduler)} unreachable since {since}: trials keep running, "
                             "candidates wait[/]", "", "", "")
        gen = (
            f"optimizer: proposing ({p.generating_seconds:.0f}s)"
            if p.generating
            else "optimizer: idle"
            + (f" (last proposal {p.last_generation_seconds:.1f}s)" if p.last_generation_seconds else "")
        )
        hv = f"hypervolume {p.hypervolume:.6g}, Pareto front {len(p.front)} trials"
        front = Table(box=None, show_header=True, header_style="dim")
        front.add_column("#", justify="right")
        names = list(p.front[0][1]) if p.front else []
        for n in names[:6]:
            front.add_column(escape(n), justify="right")
        for idx, vals in p.front[:8]:
            front.add_row(str(idx), *[fmt_cell(vals.get(n, "")) for n in names[:6]])
        msgs = Text("\n".join(p.messages[-4:]), style="dim")
        return Panel(Group(head, Text(gen + " | " + hv), front, msgs), title="nasctl run", expand=True)
