"""Terminal output with rich: the CLI's tables and panels (the consoles and the
live progress display are in nasctl/console.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from nasctl.console import STATUS_STYLE, fmt_cell, fmt_counts
from nasctl.console import console as console, print_json as print_json  # re-exported for the commands


@dataclass(frozen=True)
class Col:
    """A table column. `fold`: free text (a failure reason) folded onto more lines, at most 50 wide."""

    header: str
    justify: Literal["left", "right"] = "left"
    style: str | None = None
    fold: bool = False


FOLD_WIDTH = 50


def print_table(title: str, cols: list[Col], rows: list[list[str]], keep: int = 1) -> None:
    """A table that never cuts a header or a value: when its columns are wider than
    the terminal, those that do not fit go to a second table (and a third...), each
    repeating the first `keep` columns, as pandas splits a wide frame.

    Cells are rich markup (escape user strings first)."""
    def width(i: int) -> int:
        w = max([Text.from_markup(cols[i].header).cell_len]
                + [max((len(x) for x in Text.from_markup(r[i]).plain.splitlines()), default=0) for r in rows])
        return min(w, FOLD_WIDTH) if cols[i].fold else w

    widths = [width(i) for i in range(len(cols))]
    room = console.width - 1  # the table's left border
    groups: list[list[int]] = []
    used = room + 1
    for i in range(keep, len(cols)):
        if used + widths[i] + 3 > room and (not groups or len(groups[-1]) > keep):
            groups.append(list(range(keep)))
            used = sum(widths[k] + 3 for k in range(keep))
        groups[-1].append(i)
        used += widths[i] + 3
    for n, group in enumerate(groups or [list(range(len(cols)))]):
        shown = title if len(groups) < 2 else f"{title} ({n + 1}/{len(groups)})"
        t = Table(title=shown)
        for i in group:
            c = cols[i]
            t.add_column(c.header, justify=c.justify, style=c.style, overflow="fold", no_wrap=not c.fold,
                         min_width=None if c.fold else widths[i], max_width=FOLD_WIDTH if c.fold else None)
        for r in rows:
            t.add_row(*[r[i] for i in group])
        console.print(t)

def _duration(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def experiments_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        console.print("No experiments yet. Start one with `nasctl run SPEC.yaml`.")
        return
    cells = []
    for r in rows:
        done = sum(r["trials"].values())
        cells.append([
            escape(r["name"]),
            f"[{STATUS_STYLE.get(r['status'], '')}]{r['status']}[/]",
            f"{done}/{r['max_trials']}  " + fmt_counts(r["trials"]),
            escape(", ".join(r["objectives"])),
            r["created_at"][:19].replace("T", " "),
        ])
    cols = [Col("name"), Col("status"), Col("trials"), Col("objectives", fold=True), Col("created")]
    print_table("Experiments", cols, cells)


def status_panel(v: dict[str, Any]) -> None:
    lines = [
        f"status       [{STATUS_STYLE.get(v['status'], '')}]{v['status']}[/]"
        + (f"  ({escape(v['status_reason'])})" if v["status_reason"] else "")
        + ("" if v["status"] != "NOT_RUNNING"
           else f"  [yellow]recorded RUNNING, but no orchestrator is running it: `nasctl resume {escape(v['name'])}`[/]"),
        *([f"[yellow]scheduler    {escape(str(v['scheduler_unreachable']['scheduler']))} unreachable since "
            f"{v['scheduler_unreachable']['since'][:19].replace('T', ' ')} UTC: trials keep running, candidates "
            f"wait ({escape(str(v['scheduler_unreachable']['error']))})[/]"] if v.get("scheduler_unreachable") else []),
        f"trials       {sum(v['trials'].values())}/{v['budget']['max_trials']}: {fmt_counts(v['trials'])}"
        + (f"  [yellow]{v['waiting_for_devices']} waiting for devices[/]" if v.get("waiting_for_devices") else "")
        + (f"  [yellow]{v['queued']} of them queued by the scheduler, {v['running']} running[/]"
           if v.get("queued") else ""),
        *([_gpu_line(v)] if v["usage"]["gpu_hours"] or v["budget"].get("max_gpu_hours") else []),
        *([f"devices      " + ", ".join(f"trial {i}: {','.join(d)}" for i, d in v["devices"].items())]
          if v.get("devices") else []),
        "objectives   " + ", ".join(
            f"{escape(k)} ({o['goal']}{', threshold ' + fmt_cell(o['threshold']) if o['threshold'] is not None else ''})"
            for k, o in v["objectives"].items()
        ),
        f"constraints  {escape(', '.join(v['constraints'])) or '-'}",
        f"hypervolume  {v['hypervolume']:.6g}  (Pareto front: {v['pareto_size']} trials)",
        (f"mean trial   {v['mean_trial_seconds']}s running" if v["mean_trial_seconds"] else "mean trial   -")
        + (f"; {_duration(v['usage']['queued_s'])} queued in all" if v["usage"]["queued_s"] >= 1 else ""),
        *([f"early stop   {v['early_stopping']['trials_stopped']} trials stopped on "
           f"{escape(str(v['early_stopping']['metric'] or 'the first objective with a curve'))}, ~{_duration(v['early_stopping']['seconds_saved'])} "
           "of trial time saved"] if v.get("early_stopping") else []),
        f"scheduler    {escape(v['scheduler'])}",
        f"optimizer    {escape(v['optimizer'])}"
        + (f"; on the log scale: {escape(', '.join(v['log_scale']))}" if v.get("log_scale") else ""),
        f"trial files  {escape(v['work_dir'])}",
        f"database     {escape(v['database'])}",
    ]
    console.print(Panel("\n".join(lines), title=f"experiment {escape(v['name'])}", expand=False))


def _hours(h: float) -> str:
    """GPU-hours for a person: 3 significant digits below 100 (0.00269, 3.25), whole hours above."""
    return f"{h:.3g}" if h < 100 else f"{h:.0f}"


def _gpu_line(v: dict[str, Any]) -> str:
    """`GPU-hours    3.25 (0.40 lost to failed or redone attempts), budget 10`."""
    u, limit = v["usage"], v["budget"].get("max_gpu_hours")
    return (f"GPU-hours    {_hours(u['gpu_hours'])}"
            + (f" ({_hours(u['gpu_hours_lost'])} lost to failed or redone attempts)" if u["gpu_hours_lost"] else "")
            + (f", budget {limit:g} (budget.max_gpu_hours)" if limit else ""))


def _status_cell(r: dict[str, Any]) -> str:
    """A trial's state: QUEUED for a RUNNING trial whose job waits in the scheduler's queue."""
    if r.get("queued"):
        return "[yellow]QUEUED[/]"
    return f"[{STATUS_STYLE.get(r['status'], '')}]{r['status']}[/]"


def trials_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        console.print("No trials match.")
        return
    pnames: list[str] = []
    mnames: list[str] = []
    for r in rows:
        pnames += [p for p in r["parameters"] if p not in pnames]
        mnames += [m for m in r["values"] if m not in mnames]
    cols = [Col("#", "right"), Col("status"), Col("method"), *[Col(escape(p), "right") for p in pnames],
            *[Col(escape(m), "right", "bold") for m in mnames]]
    promoted = any(r.get("promoted_from") is not None for r in rows)
    if promoted:  # multi-fidelity: the trial a promotion continued (its fidelity is a parameter)
        cols.append(Col("from", "right"))
    placed = any(r.get("devices") for r in rows)
    if placed:
        cols.append(Col("devices"))
    retried = any(len(r.get("attempts") or []) > 1 for r in rows)
    if retried:  # attempts: a trial retried after an infrastructure failure ran more than once
        cols.append(Col("att.", "right"))
    cols.append(Col("time", "right"))
    waited = any((r.get("queued_s") or 0) >= 1 or r.get("queued") for r in rows)
    if waited:  # a cluster's queue: the wait beside the running time
        cols.append(Col("queued", "right"))
    gpu = any(r.get("gpu_hours") for r in rows)
    if gpu:
        cols.append(Col("GPU-h", "right"))
    reasons = any(r["failure_reason"] or r.get("pending_reason") for r in rows)
    if reasons:
        cols.append(Col("reason", fold=True))
    cells = []
    for r in rows:
        devices = [("waiting" if r.get("waiting_for_devices") else ",".join(r.get("devices") or []))] if placed else []
        attempts = [str(len(r.get("attempts") or []) or "")] if retried else []
        cls = f"{r['failure_class']}: " if r.get("failure_class") and r["failure_reason"] else ""
        why = r["failure_reason"] or (f"waits: {r['pending_reason']}" if r.get("pending_reason") else "")
        cells.append([
            str(r["index"]),
            _status_cell(r),
            escape(r["generation_method"]),
            *[fmt_cell(r["parameters"].get(p, "")) for p in pnames],
            *[fmt_cell(r["values"].get(m, "")) for m in mnames],
            *([f"#{r['promoted_from']}" if r.get("promoted_from") is not None else ""] if promoted else []),
            *devices,
            *attempts,
            f"{r['duration_s']:.1f}s" if r["duration_s"] is not None else "",
            *([_duration(r.get("queued_s") or 0)] if waited else []),
            *([_hours(r.get("gpu_hours") or 0)] if gpu else []),
            *([escape(cls + why)] if reasons else []),
        ])
    print_table("Trials", cols, cells)


def trial_panel(d: dict[str, Any]) -> None:
    lines = [
        f"status      {_status_cell(d)}"
        + (f"  ({escape(d['failure_class'] + ': ' if d.get('failure_class') else '')}"
           f"{escape(d['failure_reason'])})" if d["failure_reason"] else "")
        + (f"  (the scheduler says: {escape(str(d['pending_reason']))})" if d.get("pending_reason") else ""),
        "parameters  " + ", ".join(f"{escape(k)}={fmt_cell(v)}" for k, v in d["parameters"].items()),
        "values      " + (", ".join(f"{escape(k)}={fmt_cell(v)}" for k, v in d["values"].items()) or "-"),
        f"method      {escape(d['generation_method'])}",
        f"job         {escape(d['job_handle'] or '-')}",
        f"log dir     {escape(d['log_dir'] or '-')}",
        *([f"devices     {','.join(d['devices'])} (CUDA_VISIBLE_DEVICES)"] if d.get("devices") else []),
        *(["devices     waiting for free devices"] if d.get("waiting_for_devices") else []),
        (f"duration    {d['duration_s']}s running" if d["duration_s"] is not None else "duration    -")
        + (f", {_duration(d['queued_s'])} queued" if (d.get("queued_s") or 0) >= 1 else "")
        + (f", since {d['running_since'][:19].replace('T', ' ')} UTC" if d.get("running_since") else ""),
        *([f"GPU-hours   {_hours(d['gpu_hours'])}" + (f" ({_hours(d['gpu_hours_lost'])} lost)" if d.get("gpu_hours_lost") else "")]
          if d.get("gpu_hours") else []),
        "curves      " + (", ".join(f"{escape(k)} ({len(v)} points)" for k, v in d["curves"].items()) or "-"),
    ]
    info = d.get("info") or {}
    shown = {k: info[k] for k in ("device", "precision", "channels_last", "dataset", "torch") if k in info}
    lat = info.get("latency")
    if isinstance(lat, dict):
        shown["latency"] = (f"batch {lat.get('batch_size')}, {lat.get('threads')} thread, "
                            f"{lat.get('repeats')} timed runs in {lat.get('blocks', 1)} blocks "
                            f"after {lat.get('warmup')} warm-up")
    if info:
        lines.append("info        " + (", ".join(f"{escape(k)}={escape(str(v))}" for k, v in shown.items())
                                       or f"{len(info)} keys (see --json)"))
    attempts = d.get("attempts") or []
    if len(attempts) > 1 or d.get("restarts"):
        lines.append("attempts    " + "; ".join(_attempt_text(a) for a in attempts))
    for a in attempts:
        for r in a.get("restarts") or []:
            how = f"resumed from {escape(str(r['resumed_from']))}" if r.get("resumed_from") else "started over"
            lines.append(f"restart     attempt {a['number']} at {str(r['at'])[:19].replace('T', ' ')} UTC"
                         + (f" on {escape(str(r['node']))}" if r.get("node") else "")
                         + (f" ({escape(str(r['reason']))})" if r.get("reason") else "") + f": {how}")
    console.print(Panel("\n".join(lines), title=f"trial {d['index']}", expand=False))
    if d.get("log_tail"):
        console.print(Panel(escape(d["log_tail"]), title="log tail", expand=False))


def _attempt_text(a: dict[str, Any]) -> str:
    """`#1 node1 infrastructure: Slurm job 12 NODE_FAIL: ...` (`#2 running` while it runs)."""
    where = f" {escape(str(a['node']))}" if a.get("node") else ""
    if a.get("ended_at") is None:
        if "running_since" in a and a["running_since"] is None:
            return f"#{a['number']} queued" + (f" ({escape(str(a['pending_reason']))})" if a.get("pending_reason") else "")
        return f"#{a['number']}{where} running"
    how = f" {escape(str(a['failure_class']))}: {escape(str(a.get('reason') or ''))}" if a.get("failure_class") else " ok"
    return f"#{a['number']}{where}{how}"


def pareto_table(v: dict[str, Any]) -> None:
    objs = list(v["objectives"])
    cols = [Col("#", "right")]
    for o in objs:
        goal = v["objectives"][o]["goal"]
        cols.append(Col(f"{escape(o)} ({'max' if goal == 'maximize' else 'min'})", "right", "bold"))
    pnames: list[str] = []
    for r in v["front"]:
        pnames += [p for p in r["parameters"] if p not in pnames]
    cols += [Col(escape(p), "right") for p in pnames]
    cells = [[str(r["index"]), *[fmt_cell(r["values"].get(o, "")) for o in objs],
              *[fmt_cell(r["parameters"].get(p, "")) for p in pnames]] for r in v["front"]]
    print_table(f"Pareto front of {escape(v['experiment'])}: {len(v['front'])} trials", cols, cells)
    ref = ", ".join(f"{escape(k)}={fmt_cell(x)}" for k, x in v["reference_point"].items())
    note = ""
    if v["inferred_reference"]:
        note = f" ({', '.join(v['inferred_reference'])} has no threshold: worst feasible value used)"
    console.print(f"hypervolume {v['hypervolume']:.6g} w.r.t. reference point {ref}{escape(note)}")
    console.print(_eligibility_line(v))


def _eligibility_line(v: dict[str, Any]) -> str:
    """How many completed trials met the thresholds and constraints, and what left out the others."""
    line = f"{v['feasible']} of {v['completed']} completed trials met every threshold and constraint"
    excluded = v.get("excluded") or {}
    if not excluded:
        return line
    parts = []
    for why, indices in excluded.items():
        shown = ", ".join(f"#{i}" for i in indices[:6]) + (", ..." if len(indices) > 6 else "")
        parts.append(f"{len(indices)} failed {escape(why)} ({shown})")
    return line + "; left out: " + "; ".join(parts)


def _early_stopping_line(es: dict[str, Any]) -> str:
    unit = "epochs" if es["progress"] == "points" else "steps"
    return (f"early stop  on {escape(str(es['metric'] or 'the first objective with a curve'))} once {es['min_completed']} trials completed, "
            f"from {es['min_progress']} {unit} and {es['min_fraction']:g} of a trial "
            f"(x{es['reduced_precision_grace']:g} for bf16/fp16)")


def _devices_line(d: dict[str, Any]) -> str:
    if d["placed_by"] != "nasctl":
        return f"devices     {d['gpu_per_trial']} GPU per trial, requested from {escape(d['placed_by'])}"
    share = f", up to {d['trials_per_device']} trials per device" if d["trials_per_device"] > 1 else ""
    return (f"devices     {d['gpu_per_trial']} per trial from {escape(','.join(d['inventory']))} "
            f"({escape(d['source'])}{share}); the first trial gets CUDA_VISIBLE_DEVICES={escape(','.join(d['first_trial']))}")


def dryrun_panel(plan: dict[str, Any]) -> None:
    first = plan["first_trial"]
    console.print(
        Panel(
            "\n".join(
                [
                    f"experiment  {escape(plan['experiment'])} on {escape(plan['scheduler'])}",
                    f"budget      {plan['budget']['max_trials']} trials, {plan['budget']['parallelism']} in parallel, "
                    f"{plan['initial_trials']} quasi-random first",
                    f"trial {first['index']}     ({first['method']}) "
                    + ", ".join(f"{escape(k)}={fmt_cell(x)}" for k, x in first["parameters"].items()),
                    "command     " + escape(" ".join(plan["command"])),
                    "env         " + escape(" ".join(f"{k}={x}" for k, x in plan["env"].items())),
                    "warm start  " + (f"forked from a server that has imported {escape(', '.join(plan['preload']))}"
                                      if plan.get("preload") else "no (every trial starts a new Python process)"),
                    *([_early_stopping_line(plan["early_stopping"])] if plan.get("early_stopping") else []),
                    *([_devices_line(plan["devices"])] if plan.get("devices") else []),
                ]
            ),
            title="dry run: nothing was started",
            expand=False,
        )
    )
    if plan.get("refused"):
        console.print(f"[yellow]`nasctl run` would refuse this spec: {escape(plan['refused'])}[/]")
    console.print(Text("TorchX request for the first trial:", style="bold"))
    console.print(Text(plan["request"]), soft_wrap=True)  # the exact request: never re-wrapped


def resume_plan(plan: dict[str, Any]) -> None:
    console.print(
        Panel(
            "\n".join([
                f"status              {plan['status']}",
                f"re-attach running   {plan['reattach_running'] or '-'}",
                f"submit recorded     {plan['recorded_candidates'] or '-'}",
                f"finished            {plan['finished']}",
                f"new trials          {plan['new_trials_to_propose']} (budget {plan['max_trials']})",
            ]),
            title=f"resume {escape(plan['experiment'])}: dry run, nothing was started",
            expand=False,
        )
    )


def summary_dict(s: Any) -> dict[str, Any]:
    gen = sorted(s.generation_seconds)
    return {
        "experiment": s.experiment,
        "status": s.status.value,
        "reason": s.reason,
        "trials": s.counts,
        "hypervolume": s.hypervolume,
        "pareto_front": s.front,
        "elapsed_s": round(s.elapsed, 2),
        "generation_s_median": gen[len(gen) // 2] if gen else None,
        "generation_s_max": gen[-1] if gen else None,
        "reattached": s.reattached,
        "left_running": s.left_running,
        "early_stopped": s.counts.get("EARLY_STOPPED", 0),
        "seconds_saved": round(s.seconds_saved, 1),
    }


def run_report(s: Any, view: dict[str, Any], db: str, since_created: float | None = None) -> None:
    """How a run ended; after a resume (`since_created` well above this run's time) both times."""
    style = STATUS_STYLE.get(s.status.value, "green") if s.status.value != "COMPLETED" else "green"
    total = (f"; {_duration(since_created)} since it was created"
             if since_created is not None and since_created > s.elapsed + 60 else "")
    console.print(
        f"[{style}]experiment {escape(s.experiment)} {s.status.value.lower()}[/]"
        + (f": {escape(s.reason)}" if s.reason else "")
        + f" in {s.elapsed:.0f}s{' this run' if total else ''}{total} ({fmt_counts(s.counts)})"
    )
    if s.counts.get("EARLY_STOPPED", 0):
        console.print(f"early stopping: {s.counts['EARLY_STOPPED']} trials stopped, "
                      f"~{_duration(s.seconds_saved)} of trial time saved (estimate; see README)")
    if s.left_running:
        console.print(f"{s.left_running} trials are still running; `nasctl resume {escape(s.experiment)}` "
                      "re-attaches them (`nasctl stop --cancel` cancels them)")
    pareto_table(view)
    console.print(f"database: {escape(db)}  (see `nasctl status {escape(s.experiment)}`, "
                  f"`nasctl trials {escape(s.experiment)}`)")


def finish(summary: Any, store: Any, as_json: bool) -> None:
    """Print how a run or resume ended (Pareto front and where the data is); exit 1 unless it completed."""
    from nasctl.orchestration.views import pareto_view

    view = pareto_view(store, summary.experiment)
    created = store.get_experiment(summary.experiment).created_at
    since_created = (datetime.now(timezone.utc).replace(tzinfo=None) - created).total_seconds()
    if as_json:
        print_json({"summary": {**summary_dict(summary), "since_created_s": round(since_created, 1)},
                    "pareto": view, "database": store.display_url})
    else:
        run_report(summary, view, store.display_url, since_created)
    if summary.status.value != "COMPLETED":
        raise SystemExit(1)
