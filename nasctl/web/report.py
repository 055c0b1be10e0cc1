"""`nasctl report`: the experiment page as one self-contained HTML file.

The file carries plotly.js (from the installed plotly package), the dashboard's
own script and stylesheet, and the API answers the experiment page needs, so it
shows the same plots offline, without a server: Pareto front, hypervolume over
trials, the trial table (sortable, filtered by status), parallel coordinates
and, when there are enough completed trials, the model diagnostics.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from nasctl.errors import BadInputError
from nasctl.store import Store
from nasctl.store import queries
from nasctl.store.manage import get_note
from nasctl.web import serializers
from nasctl.web.analysis import analyze, parallel_sample
from nasctl.web.app import STATIC, plotly_js_path

#: Trials embedded in the report's table; beyond that, the Pareto front and the most recent trials.
MAX_TABLE_TRIALS = 5000


def _script_json(data: Any) -> str:
    """JSON that is safe inside a <script> element (no `</script>`, no HTML comments)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def report_data(store: Store, name: str, diagnostics: bool = True) -> dict[str, Any]:
    """What the report embeds: API answers by path, table rows and the diagnostics.

    Raises:
        NotFoundError: no experiment `name`.
    """
    exp = store.get_experiment(name)
    a = analyze(store, exp, queries.change_cursor(store, exp.id))
    base = "/api/experiments/" + quote(name, safe="")
    chosen = parallel_sample(a, 2000)
    if len(a.indices) <= MAX_TABLE_TRIALS:
        table_indices = list(a.indices)
    else:
        table_indices = sorted(set(a.front.indices) | set(a.indices[-(MAX_TABLE_TRIALS - len(a.front.indices)):]))
    table = [serializers.trial_summary(t, a.spec) for t in queries.trials_by_index(store, exp.id, table_indices)]
    diag: dict[str, Any] | None = None
    if diagnostics:
        from nasctl.optimizer.diagnostics import loo_cross_validation

        completed = [i for i, s in zip(a.indices, a.statuses) if s == "COMPLETED"]
        try:
            result = loo_cross_validation(a.spec, queries.trials_by_index(store, exp.id, completed[-1000:]))
        except BadInputError:
            result = None
        if result is not None:
            diag = serializers.diagnostics(name, result)
    return {
        "name": name,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "data": {
            base: serializers.experiment_summary(a),
            base + "/points": serializers.points(a),
            base + "/hypervolume": serializers.hypervolume_trace(a),
            base + "/parallel": serializers.parallel(a, queries.trial_parameters(store, exp.id, chosen), chosen),
            base + "/note": serializers.note(get_note(store, exp.id)),
            base + "/events?latest=true&limit=200": {
                "events": [serializers.event(e) for e in queries.latest_events(store, exp.id, 200)]
            },
        },
        "trials": table,
        "table_complete": len(table) == len(a.indices),
        "diagnostics": diag,
    }


def build_report(store: Store, name: str, diagnostics: bool = True) -> str:
    """The self-contained HTML report of experiment `name`."""
    data = report_data(store, name, diagnostics)
    page = (STATIC / "experiment.html").read_text(encoding="utf-8")
    css = (STATIC / "style.css").read_text(encoding="utf-8")
    app_js = (STATIC / "app.js").read_text(encoding="utf-8")
    manage_js = (STATIC / "manage.js").read_text(encoding="utf-8")
    plotly_js = plotly_js_path().read_text(encoding="utf-8")
    extra = ""
    if data["diagnostics"] is not None:
        extra = (
            '<section class="panel"><h2>Model diagnostics: leave-one-out cross-validation</h2>'
            '<p class="muted">Each completed trial predicted by the model fitted on the others (95% intervals).</p>'
            '<p id="diag-caption" class="muted"></p><div id="diag" class="curves"></div></section>\n'
        )
    if not data["table_complete"]:
        extra += (
            '<p class="muted">The table holds the Pareto-optimal and the most recent trials; '
            "`nasctl export` writes every trial.</p>\n"
        )
    page = page.replace('<link rel="stylesheet" href="/static/style.css">', "<style>\n" + css + "\n</style>")
    page = page.replace("</main>", extra + "</main>")
    # the analysis views ask the server (importance, contour, selection): not part of an offline report
    page = re.sub(r'\s*<div id="analysis">.*?<!-- /analysis -->', "", page, flags=re.S)
    page = page.replace('\n<script src="/static/analysis.js"></script>', "")
    scripts = (
        "<script>window.NASCTL_REPORT = " + _script_json(data) + ";</script>\n"
        "<script>" + plotly_js + "</script>\n"
        "<script>" + app_js + "</script>\n"
        "<script>" + manage_js + "</script>"
    )
    page = page.replace('<script src="/static/plotly.min.js"></script>\n<script src="/static/app.js"></script>\n'
                        '<script src="/static/manage.js"></script>', scripts)
    return page
