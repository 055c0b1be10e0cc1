"""`nasctl report`: the experiment page as one self-contained HTML file.

The file carries plotly.js (from the installed plotly package), the experiment
page's modules (bundled into one inline script), the stylesheet, and the API
answers the experiment page needs (a JSON block the modules read), so it
shows the same plots offline, without a server: Pareto front (its reference
point on demand, as on the page), hypervolume over trials, the trial table
(sortable, filtered by status), parallel coordinates, history, parameter
importance, slices, contours (every pair of parameters up to
`MAX_REPORT_CONTOURS` plots) and EDF and, when there are enough completed
trials, the model diagnostics. Filtering the table by metric values (and
the linked selection built on it) needs the server.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

from nasctl.errors import BadInputError
from nasctl.store import Store
from nasctl.store import queries
from nasctl.store.manage import get_note
from nasctl.web import insights, serializers
from nasctl.web.analysis import AnalysisCache, analyze, parallel_sample
from nasctl.web.app import plotly_js_path
from nasctl.web.bundle import bundle_modules
from nasctl.web.insights_api import contour_json, importance_json
from nasctl.web.pages import PAGES, STATIC, fill_shell, page_body

#: Trials embedded in the report's table; beyond that, the Pareto front and the most recent trials.
MAX_TABLE_TRIALS = 5000
#: Contour plots embedded (parameter pairs x objectives), the first parameters' pairs first.
MAX_REPORT_CONTOURS = 60


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
            **_analysis_data(store, name, base),
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


def _analysis_data(store: Store, name: str, base: str) -> dict[str, Any]:
    """The analysis views' API answers: history, importance and contours by path (as the page asks)."""
    cache = insights.InsightsCache(store, AnalysisCache(store))
    out: dict[str, Any] = {base + "/history": cache.derived(name, "history", insights.history)}
    a, _ = cache.get(name)
    try:
        model = cache.importance(name, wait=True)
    except BadInputError:  # too few trials to model: the page says so, as the dashboard does
        return out
    out[base + "/importance"] = importance_json(model, a.cursor)
    params = [e.name for e in model.encodings]
    pairs = [(x, y) for x in params for y in params if x != y]
    pairs.sort(key=lambda p: (max(params.index(p[0]), params.index(p[1])), p))
    made = 0
    for x, y in pairs:
        for objective in model.forests:
            if made >= MAX_REPORT_CONTOURS:
                return out
            query = urlencode({"x": x, "y": y, "objective": objective})
            out[f"{base}/contour?{query}"] = contour_json(model, x, y, objective)
            made += 1
    return out


def build_report(store: Store, name: str, diagnostics: bool = True) -> str:
    """The self-contained HTML report of experiment `name`: the experiment page's shell and
    body, the stylesheet inlined, the data as a JSON block, plotly.js, and the page's modules
    bundled into one inline module script (bundle.py)."""
    data = report_data(store, name, diagnostics)
    css = (STATIC / "style.css").read_text(encoding="utf-8")
    plotly_js = plotly_js_path().read_text(encoding="utf-8")
    page = PAGES["experiment"]
    body = page_body("experiment")
    if data["diagnostics"] is not None:
        body += (
            '<section class="panel"><h2>Model diagnostics: leave-one-out cross-validation</h2>'
            '<p class="muted">Each completed trial predicted by the model fitted on the others (95% intervals).</p>'
            '<p id="diag-caption" class="muted"></p><div id="diag" class="curves"></div></section>\n'
        )
    if not data["table_complete"]:
        body += (
            '<p class="muted">The table holds the Pareto-optimal and the most recent trials; '
            "`nasctl export` writes every trial.</p>\n"
        )
    scripts = (
        '<script type="application/json" id="nasctl-report">' + _script_json(data) + "</script>\n"
        "<script>" + plotly_js + "</script>\n"
        '<script type="module">\n' + bundle_modules(STATIC, page.entry) + "</script>"
    )
    return fill_shell(title=page.title, page="experiment", body=body, styles="<style>\n" + css + "\n</style>",
                      scripts=scripts)
