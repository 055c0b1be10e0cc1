/* The model diagnostics page (leave-one-out cross-validation), and its plots in a report. */
import { api, enc, route } from "./api.js";
import { PLOT_CONFIG, el, errorText, showMessage } from "./dom.js";
import { pesc } from "./format.js";
import { setupHeader } from "./header.js";

export async function diagnosticsPage() {
  const { name } = route();
  await setupHeader(name);
  document.getElementById("title").textContent = name + " · model diagnostics";
  let d;
  for (;;) {  // the server fits the model in the background and answers "computing" until it is done
    try { d = await api("/api/experiments/" + enc(name) + "/diagnostics"); }
    catch (e) { showMessage(errorText(e), true); return; }
    if (d.state !== "computing") break;
    document.body.dataset.computing = "1";
    // what the server is doing and for how long: the first fit in a server process loads Ax and BoTorch (~20 s)
    showMessage("Computing the diagnostics (" + Math.round(d.elapsed_s || 0) + " s): " + (d.stage || "starting") + "…");
    const m = document.getElementById("message");
    m.prepend(el("progress", { id: "diag-progress" }), " ");
    await new Promise((r) => setTimeout(r, 1000));
  }
  renderDiagnostics(d);
  document.body.dataset.ready = "1";
}

export function renderDiagnostics(d) {
  const caption = d.model + ", fitted on " + d.trials_used + " completed trials; intervals are 95%." +
    (d.stale ? " The experiment has changed since: recomputing." : "");
  const own = document.getElementById("diag-caption");  // the report's diagnostics section has its own caption
  if (own) own.textContent = caption; else showMessage(caption);
  const box = document.getElementById("diag");
  const names = Object.keys(d.metrics);
  const divs = names.map((m) => el("div", { "data-metric": m }));
  box.replaceChildren(...divs);
  names.forEach((m, k) => {
    const rows = d.metrics[m];
    const obs = rows.map((r) => r.observed), pred = rows.map((r) => r.predicted);
    const lo = Math.min(...obs, ...pred), hi = Math.max(...obs, ...pred);
    Plotly.react(divs[k], [
      { type: "scatter", mode: "markers", x: obs, y: pred, customdata: rows.map((r) => r.trial_index), name: "trials",
        error_y: { type: "data", symmetric: false, array: rows.map((r) => (r.upper === null ? 0 : r.upper - r.predicted)),
          arrayminus: rows.map((r) => (r.lower === null ? 0 : r.predicted - r.lower)), thickness: 1, color: "#8aa9e6" },
        marker: { color: "#2b6de0", size: 7 }, hovertemplate: "trial %{customdata}<br>observed %{x}<br>predicted %{y}<extra></extra>" },
      { type: "scatter", mode: "lines", x: [lo, hi], y: [lo, hi], name: "y = x", line: { dash: "dash", color: "#888" }, hoverinfo: "skip" },
    ], { title: { text: pesc(m), font: { size: 13 } }, showlegend: false, margin: { t: 35, r: 40, b: 45, l: 60 }, modebar: { orientation: "v" },
      xaxis: { title: { text: "observed" } }, yaxis: { title: { text: "predicted (LOO)" } } }, PLOT_CONFIG);
  });
}
