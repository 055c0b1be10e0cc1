/* The Pareto plot: trials by category, the reference point, and its options (reference point
 * on demand, log axes, the 3-D view); the linked selection (selection.js) greys the trials outside it.
 */
import { REPORT, trialUrl } from "./api.js";
import { PLOT_CONFIG, el, fillSelect } from "./dom.js";
import { A, X, axisChoices, goalOf, objNames } from "./exp-state.js";
import { fmt, pesc } from "./format.js";

const CATEGORY = {
  dominated: { name: "dominated", size: 6, opacity: 0.55, byIndex: true, symbol: "circle" },
  front: { name: "Pareto-optimal (all objectives)", size: 11, opacity: 1, byIndex: true, symbol: "circle", line: { width: 1.5, color: "#111" } },
  infeasible: { name: "infeasible", size: 8, opacity: 0.8, color: "#9aa0a6", symbol: "x" },
  early_stopped: { name: "early-stopped (partial values)", size: 8, opacity: 0.9, color: "#7b4fb8", symbol: "triangle-down-open" },
  failed: { name: "failed", size: 8, opacity: 0.9, color: "#d62728", symbol: "x-thin-open" },
  pending: { name: "running / candidate", size: 8, opacity: 0.9, color: "#ff9f1c", symbol: "diamond-open" },
};

export function renderPareto() {
  const s = X.summary, p = X.pts;
  const xs = document.getElementById("pareto-x").value, ys = document.getElementById("pareto-y").value;
  const vx = p.values[xs] || [], vy = p.values[ys] || [];
  const n = p.index.length;
  const gl = n > 3000;
  const maxIndex = n ? Math.max(...p.index.slice(-1), 1) : 1;
  const traces = [];
  let plotted = 0;
  for (const [cat, look] of Object.entries(CATEGORY)) {
    const tx = [], ty = [], ti = [];
    for (let k = 0; k < n; k++) {
      if (p.category[k] !== cat || vx[k] === null || vy[k] === null || vx[k] === undefined || vy[k] === undefined) continue;
      tx.push(vx[k]); ty.push(vy[k]); ti.push(p.index[k]);
    }
    if (!tx.length) continue;
    plotted += tx.length;
    const marker = { size: look.size, opacity: look.opacity, symbol: look.symbol, line: look.line || { width: 0 } };
    if (look.byIndex) { marker.color = ti; marker.coloraxis = "coloraxis"; } else { marker.color = look.color; marker.line = { width: 1.5, color: look.color }; }
    traces.push({
      type: gl ? "scattergl" : "scatter", mode: "markers", name: look.name + " (" + tx.length + ")",
      x: tx, y: ty, customdata: ti, marker: marker, meta: cat,
      hovertemplate: "trial %{customdata}<br>" + pesc(xs) + " = %{x}<br>" + pesc(ys) + " = %{y}<extra>" + pesc(look.name) + "</extra>",
    });
  }
  const ref = s.reference_point;
  const shapes = [];
  if (xs in ref && ys in ref) {
    traces.push({ type: "scatter", mode: "markers", name: "reference point", x: [ref[xs]], y: [ref[ys]], meta: "reference",
      marker: { symbol: "star", size: 14, color: "#e4572e", line: { width: 1, color: "#111" } },
      hovertemplate: "reference point<br>" + pesc(xs) + " = %{x}<br>" + pesc(ys) + " = %{y}<extra></extra>" });
    shapes.push({ type: "line", xref: "x", yref: "paper", x0: ref[xs], x1: ref[xs], y0: 0, y1: 1, line: { dash: "dot", color: "#e4572e", width: 1 } });
    shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: ref[ys], y1: ref[ys], line: { dash: "dot", color: "#e4572e", width: 1 } });
  }
  const failedNoValues = p.category.filter((c) => c === "failed").length - (traces.find((t) => t.meta === "failed") || { x: [] }).x.length;
  document.getElementById("pareto-note").textContent = plotted + " trials plotted" + (failedNoValues > 0 ? "; " + failedNoValues + " failed without values" : "");
  const goal = (m) => { const o = s.objectives.find((q) => q.name === m); return o ? (o.goal === "maximize" ? " (max)" : " (min)") : ""; };
  const layout = {
    margin: { t: 10, r: 10, b: 50, l: 70 }, hovermode: "closest", uirevision: xs + "|" + ys, shapes: shapes,
    xaxis: { title: { text: pesc(xs + goal(xs)) } }, yaxis: { title: { text: pesc(ys + goal(ys)) } },
    legend: { orientation: "h", y: -0.18 },
    coloraxis: { colorscale: "Viridis", cmin: 0, cmax: maxIndex, colorbar: { title: { text: "trial" }, thickness: 12 } },
  };
  const div = document.getElementById("pareto");
  const view = paretoView(traces, layout, xs, ys, plotted);  // the options: reference point, log axes, 3-D, selection
  Plotly.react(div, view.traces, view.layout, PLOT_CONFIG);
  div.dataset.points = String(view.points);
  if (!div.dataset.bound) {
    div.dataset.bound = "1";
    div.on("plotly_click", (ev) => {
      const pt = ev.points && ev.points[0];
      if (!pt || pt.customdata === undefined) return;
      if (REPORT) showPointInfo(pt.customdata); else location.href = trialUrl(X.summary.name, pt.customdata);
    });
  }
}

function showPointInfo(index) {
  const k = X.pos.get(index);
  const parts = ["trial " + index + ": " + X.pts.status[k]];
  for (const [m, col] of Object.entries(X.pts.values)) if (col[k] !== null) parts.push(m + " = " + fmt(col[k]));
  const row = (REPORT.trials || []).find((t) => t.index === index);
  if (row) for (const [pn, pv] of Object.entries(row.parameters)) parts.push(pn + " = " + fmt(pv));
  document.getElementById("point-info").textContent = parts.join(" · ");
}

/* ------------------------------------------------------------------ Pareto plot options */
function paretoOptions() {
  if (A.options) return A.options;
  const controls = document.getElementById("pareto-x").closest(".controls");
  const box = (id, text) => el("label", {}, el("input", { type: "checkbox", id: id }), " " + text);
  const z = el("select", { id: "pareto-z" });
  const zLabel = el("label", { id: "pareto-z-label", hidden: true }, "z ", z);
  const threeD = box("pareto-3d", "3-D");
  const nObj = X.summary.objectives.length;
  if (nObj < 3) threeD.hidden = true;
  controls.insertBefore(el("span", { class: "controls" }, box("pareto-ref", "reference point"), box("pareto-logx", "log x"),
    box("pareto-logy", "log y"), threeD, zLabel), document.getElementById("pareto-note"));
  fillSelect(z, axisChoices(X.summary), objNames()[2] || axisChoices(X.summary)[0]);
  A.options = { ref: false, logx: false, logy: false, threeD: false };
  for (const [id, key] of [["pareto-ref", "ref"], ["pareto-logx", "logx"], ["pareto-logy", "logy"], ["pareto-3d", "threeD"]]) {
    document.getElementById(id).addEventListener("change", (ev) => {
      A.options[key] = ev.target.checked;
      zLabel.hidden = !A.options.threeD;
      renderPareto();
    });
  }
  z.addEventListener("change", renderPareto);
  return A.options;
}

/* The options applied to the 2-D plot's traces and layout (or the 3-D view instead): what renderPareto draws. */
function paretoView(traces, layout, xs, ys, plotted) {
  const opt = paretoOptions();
  if (opt.threeD) return pareto3d(xs, ys, document.getElementById("pareto-z").value);
  if (!opt.ref) {
    traces = traces.filter((t) => t.meta !== "reference");
    layout.shapes = [];
  }
  if (opt.logx) layout.xaxis.type = "log";
  if (opt.logy) layout.yaxis.type = "log";
  let selected = plotted;
  if (A.selection) {
    const out = { type: traces.length && traces[0].type === "scattergl" ? "scattergl" : "scatter", mode: "markers",
      name: "outside the selection", x: [], y: [], customdata: [], meta: "unselected",
      marker: { size: 5, color: "#c4c9cf", opacity: 0.45 }, hovertemplate: "trial %{customdata}<extra>outside the selection</extra>" };
    selected = 0;
    traces = traces.map((t) => {
      if (!t.customdata || t.meta === "reference") return t;
      const keep = t.customdata.map((i) => A.selection.has(i));
      const pick = (arr) => arr.filter((_, k) => keep[k]);
      t.customdata.forEach((i, k) => { if (!keep[k]) { out.x.push(t.x[k]); out.y.push(t.y[k]); out.customdata.push(i); } });
      const marker = Object.assign({}, t.marker);
      if (Array.isArray(marker.color)) marker.color = pick(marker.color);
      const n = keep.filter(Boolean).length;
      selected += n;
      return Object.assign({}, t, { x: pick(t.x), y: pick(t.y), customdata: pick(t.customdata), marker: marker,
        name: String(t.name).replace(/\(\d+\)$/, "(" + n + ")") });
    });
    traces.unshift(out);
  }
  document.getElementById("pareto").dataset.selected = A.selection ? String(selected) : "";
  return { traces: traces, layout: layout, points: plotted };
}

const SYMBOL_3D = { "circle": "circle", "x": "x", "x-thin-open": "x", "triangle-down-open": "diamond-open", "diamond-open": "diamond-open" };

function pareto3d(xs, ys, zs) {
  const p = X.pts, s = X.summary;
  const vx = p.values[xs] || [], vy = p.values[ys] || [], vz = p.values[zs] || [];
  const traces = [];
  let plotted = 0, selected = 0;
  const maxIndex = p.index.length ? Math.max(p.index[p.index.length - 1], 1) : 1;
  for (const [cat, look] of Object.entries(CATEGORY)) {
    if (cat === "pending") continue;
    const tx = [], ty = [], tz = [], ti = [];
    for (let k = 0; k < p.index.length; k++) {
      if (p.category[k] !== cat || vx[k] == null || vy[k] == null || vz[k] == null) continue;
      if (A.selection && !A.selection.has(p.index[k])) continue;
      tx.push(vx[k]); ty.push(vy[k]); tz.push(vz[k]); ti.push(p.index[k]);
    }
    if (!tx.length) continue;
    plotted += tx.length;
    const marker = { size: Math.max(3, look.size * 0.6), opacity: look.opacity, symbol: SYMBOL_3D[look.symbol] || "circle" };
    if (look.byIndex) { marker.color = ti; marker.cmin = 0; marker.cmax = maxIndex; marker.colorscale = "Viridis"; }
    else marker.color = look.color;
    if (cat === "front") marker.line = { width: 1, color: "#111" };
    traces.push({ type: "scatter3d", mode: "markers", name: look.name + " (" + tx.length + ")", x: tx, y: ty, z: tz,
      customdata: ti, marker: marker, meta: cat,
      hovertemplate: "trial %{customdata}<br>" + pesc(xs) + " = %{x}<br>" + pesc(ys) + " = %{y}<br>" + pesc(zs) + " = %{z}<extra></extra>" });
  }
  selected = plotted;
  const ref = s.reference_point;
  if (A.options.ref && xs in ref && ys in ref && zs in ref) {
    traces.push({ type: "scatter3d", mode: "markers", name: "reference point", x: [ref[xs]], y: [ref[ys]], z: [ref[zs]], meta: "reference",
      marker: { symbol: "diamond", size: 6, color: "#e4572e" } });
  }
  const axis = (m, log) => ({ title: { text: pesc(m + (goalOf(m) ? (goalOf(m) === "maximize" ? " (max)" : " (min)") : "")) }, type: log ? "log" : "linear" });
  document.getElementById("pareto").dataset.selected = A.selection ? String(selected) : "";
  return {
    traces: traces,
    layout: { margin: { t: 10, r: 10, b: 10, l: 10 }, uirevision: "3d|" + xs + "|" + ys + "|" + zs, legend: { orientation: "h" },
      scene: { aspectmode: "cube", camera: { eye: { x: 1.7, y: 1.7, z: 1.1 } }, xaxis: axis(xs, A.options.logx), yaxis: axis(ys, A.options.logy), zaxis: axis(zs, false) } },
    points: plotted,
  };
}
