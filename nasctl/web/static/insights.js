/* The experiment page's analysis views: history with best so far, parameter importance, slices,
 * contour and EDF (from the API, or a report's embedded answers), and the linked selection's setup.
 */
import { REPORT, api } from "./api.js";
import { OBJ_COLORS, PLOT_CONFIG, el, fillSelect } from "./dom.js";
import { A, X, apiBase, goalOf, objNames } from "./exp-state.js";
import { logTicks, pesc } from "./format.js";
import { setupSelection, updateSelection } from "./selection.js";

/* ------------------------------------------------------------------ history */
function renderHistory() {
  const h = A.history;
  const name = document.getElementById("history-objective").value;
  const byTime = document.getElementById("history-x").value === "time";
  const o = h.objectives.find((q) => q.name === name);
  if (!o) return;
  const t0 = Date.parse(h.start);
  const xOf = (i, t) => (byTime ? (t === null ? null : new Date(t0 + t * 1000).toISOString()) : i);
  const feas = { x: [], y: [], c: [] }, infeas = { x: [], y: [], c: [] };
  h.trial_index.forEach((i, k) => {
    if (o.value[k] === null) return;
    const to = h.feasible[k] ? feas : infeas;
    to.x.push(xOf(i, h.time[k])); to.y.push(o.value[k]); to.c.push(i);
  });
  const gl = h.trial_index.length > 3000 ? "scattergl" : "scatter";
  const traces = [
    { type: gl, mode: "markers", name: "feasible trials", x: feas.x, y: feas.y, customdata: feas.c, marker: { color: "#2b6de0", size: 6, opacity: 0.7 },
      hovertemplate: "trial %{customdata}<br>" + pesc(name) + " = %{y}<extra></extra>" },
    { type: gl, mode: "markers", name: "infeasible", x: infeas.x, y: infeas.y, customdata: infeas.c, marker: { color: "#9aa0a6", size: 6, symbol: "x" },
      hovertemplate: "trial %{customdata} (infeasible)<br>" + pesc(name) + " = %{y}<extra></extra>" },
    { type: "scatter", mode: "lines", name: "best so far", x: o.best.trial_index.map((i, k) => xOf(i, o.best.time[k])), y: o.best.value,
      line: { shape: "hv", color: "#e4572e", width: 2 }, customdata: o.best.trial_index, hovertemplate: "best after trial %{customdata}: %{y}<extra></extra>" },
  ];
  Plotly.react("history", traces, {
    margin: { t: 10, r: 10, b: 45, l: 70 }, legend: { orientation: "h", y: -0.2 }, uirevision: name + byTime,
    xaxis: { title: { text: byTime ? "time (trial end)" : "trial index" }, type: byTime ? "date" : "linear" },
    yaxis: { title: { text: pesc(name + (o.goal === "maximize" ? " (max)" : " (min)")) } },
  }, PLOT_CONFIG);
  const div = document.getElementById("history");
  div.dataset.points = String(feas.x.length + infeas.x.length);
  div.dataset.best = String(o.best.value.length ? o.best.value[o.best.value.length - 1] : "");
  document.getElementById("history-note").textContent = h.completed + " completed trials" +
    (h.sampled ? " (" + h.trial_index.length + " drawn: every improvement and an even sample)" : "");
}

/* ------------------------------------------------------------------ importance */
function renderImportance() {
  const m = A.importance;
  const params = m.parameters.slice();
  const total = (p) => Object.values(m.objectives).reduce((s, o) => s + (o.share[p] || 0), 0);
  params.sort((a, b) => total(a) - total(b));
  const traces = Object.entries(m.objectives).map(([o, r], k) => ({
    type: "bar", orientation: "h", name: pesc(o), y: params.map(pesc), x: params.map((p) => r.share[p]),
    customdata: params.map((p) => r.importance[p]), marker: { color: OBJ_COLORS[k % OBJ_COLORS.length] },
    hovertemplate: "%{y}: %{x:.1%} of the explained variance<br>main effect: %{customdata:.1%} of the prediction variance<extra>" + pesc(o) + "</extra>",
  }));
  Plotly.react("importance", traces, {
    barmode: "group", margin: { t: 10, r: 10, b: 45, l: 110 }, legend: { orientation: "h", y: -0.2 },
    xaxis: { title: { text: "importance (share)" }, tickformat: ".0%", range: [0, 1] },
  }, PLOT_CONFIG);
  document.getElementById("importance").dataset.parameters = String(params.length);
  const unfitted = Object.entries(m.objectives).filter(([, r]) => !r.fitted).map(([o]) => o);
  document.getElementById("importance-note").textContent = "Random-forest main effects on " + m.trials_used + " of " +
    m.total_completed + " completed trials" + (m.stale ? " (refitting on the newest results…)" : "") +
    (unfitted.length ? "; too few values to model " + unfitted.join(", ") : "") + ".";
}

async function loadImportance() {
  A.importance = await api(apiBase() + "/importance");
  renderImportance();
  if (A.importance.stale) setTimeout(() => loadImportance().catch(() => {}), 3000);
}

/* ------------------------------------------------------------------ slices, contour, EDF */
function parallelColumns(d) {
  const cats = {};
  for (const [pn, col] of Object.entries(d.parameters)) {
    const nonNull = col.filter((v) => v !== null);
    if (!(nonNull.length && nonNull.every((v) => typeof v === "number"))) cats[pn] = Array.from(new Set(col.map((v) => (v === null ? null : String(v)))));
  }
  return cats;
}

function renderSlices() {
  const d = A.par, obj = document.getElementById("slice-objective").value;
  const box = document.getElementById("slices");
  const names = Object.keys(d.parameters);
  const divs = names.map((pn) => el("div", { "data-parameter": pn }));
  box.replaceChildren(...divs);
  const y = d.values[obj] || [];
  names.forEach((pn, k) => {
    const col = d.parameters[pn];
    const xs = [], ys = [], ids = [];
    col.forEach((v, j) => { if (v !== null && y[j] !== null && y[j] !== undefined) { xs.push(pn in A.par.categories ? String(v) : v); ys.push(y[j]); ids.push(d.index[j]); } });
    const log = !(pn in A.par.categories) && A.logParams.has(pn);
    const xaxis = pn in A.par.categories ? { type: "category" } : log ? Object.assign({ type: "log" }, logTicks(Math.min(...xs), Math.max(...xs))) : { type: "linear" };
    Plotly.react(divs[k], [{ type: "scatter", mode: "markers", x: xs, y: ys, customdata: ids,
      marker: { color: ids, colorscale: "Viridis", size: 6, opacity: 0.7 },
      hovertemplate: "trial %{customdata}<br>" + pesc(pn) + " = %{x}<br>" + pesc(obj) + " = %{y}<extra></extra>" }],
    { title: { text: pesc(pn), font: { size: 13 } }, margin: { t: 35, r: 40, b: 40, l: 60 }, showlegend: false, modebar: { orientation: "v" },
      xaxis: xaxis, yaxis: { title: { text: pesc(obj) } } },
    PLOT_CONFIG);
  });
  document.getElementById("slice-note").textContent = d.index.length + " of " + d.total_completed + " completed trials; colour: trial index";
}

async function renderContour() {
  const x = document.getElementById("contour-x").value, y = document.getElementById("contour-y").value;
  const obj = document.getElementById("contour-objective").value;
  const note = document.getElementById("contour-note");
  if (!x || !y || x === y) { note.textContent = "Choose two different parameters."; return; }
  let c;
  try { c = await api(apiBase() + "/contour?" + new URLSearchParams({ x: x, y: y, objective: obj }).toString()); }
  catch (e) {
    note.textContent = REPORT && e.status === 404 ? "This pair is not part of the report (it holds the first parameters' pairs); the dashboard draws every pair." : e.message;
    Plotly.purge("contour");
    return;
  }
  note.textContent = "The forest's prediction of " + obj + " over " + x + " and " + y + ", averaged over the other parameters; dots: trials.";
  const cat = (a) => a.kind === "choice";
  const xv = c.x.values.map((v) => (cat(c.x) ? String(v) : v)), yv = c.y.values.map((v) => (cat(c.y) ? String(v) : v));
  const kind = cat(c.x) || cat(c.y) ? "heatmap" : "contour";
  const d = A.par, pts = { x: [], y: [], i: [] };
  d.index.forEach((i, k) => {
    const a = d.parameters[x][k], b = d.parameters[y][k];
    if (a === null || b === null) return;
    pts.x.push(cat(c.x) ? String(a) : a); pts.y.push(cat(c.y) ? String(b) : b); pts.i.push(i);
  });
  Plotly.react("contour", [
    { type: kind, x: xv, y: yv, z: c.z, colorscale: "Viridis", reversescale: goalOf(obj) === "minimize",
      colorbar: { title: { text: pesc(obj) }, thickness: 12 }, hovertemplate: pesc(x) + " = %{x}<br>" + pesc(y) + " = %{y}<br>" + pesc(obj) + " ≈ %{z}<extra></extra>" },
    { type: "scatter", mode: "markers", x: pts.x, y: pts.y, customdata: pts.i, name: "trials", showlegend: false,
      marker: { size: 4, color: "#111", opacity: 0.5 }, hovertemplate: "trial %{customdata}<extra></extra>" },
  ], { margin: { t: 10, r: 10, b: 45, l: 70 }, uirevision: x + "|" + y,
    xaxis: Object.assign({ title: { text: pesc(x) } }, gridAxis(c.x, xv)), yaxis: Object.assign({ title: { text: pesc(y) } }, gridAxis(c.y, yv)) }, PLOT_CONFIG);
  document.getElementById("contour").dataset.grid = c.x.values.length + "x" + c.y.values.length;
}

/* A contour axis: categories, a log axis labelled in full (logTicks), or linear. */
function gridAxis(spec, values) {
  if (spec.kind === "choice") return { type: "category" };
  if (!spec.log) return { type: "linear" };
  return Object.assign({ type: "log" }, logTicks(Math.min(...values), Math.max(...values)));
}

function renderEdf() {
  const obj = document.getElementById("edf-objective").value;
  const p = X.pts;
  const v = [];
  p.values[obj].forEach((x, k) => { if (x !== null && p.status[k] === "COMPLETED") v.push(x); });
  v.sort((a, b) => a - b);
  const n = v.length;
  const step = Math.max(1, Math.ceil(n / 2000));  // at most ~2,000 steps drawn; the last value always
  const xs = [], ys = [];
  for (let k = 0; k < n; k += step) { xs.push(v[k]); ys.push((k + 1) / n); }
  if (n && xs[xs.length - 1] !== v[n - 1]) { xs.push(v[n - 1]); ys.push(1); }
  Plotly.react("edf", [{ type: "scatter", mode: "lines", line: { shape: "hv", color: "#2b6de0" }, x: xs, y: ys, name: pesc(obj),
    hovertemplate: "%{y:.1%} of trials have " + pesc(obj) + " ≤ %{x}<extra></extra>" }],
  { margin: { t: 10, r: 10, b: 45, l: 60 }, xaxis: { title: { text: pesc(obj) } }, yaxis: { title: { text: "fraction of completed trials" }, range: [0, 1.02] } },
  PLOT_CONFIG);
  document.getElementById("edf").dataset.points = String(n);
  document.getElementById("edf-note").textContent = n + " completed trials";
}

/* ------------------------------------------------------------------ experiment page */
/* The analysis views, once the experiment page (`pageReady`, experiment.js's experimentPage) has drawn. */
export async function analysisPage(pageReady) {
  try { await pageReady; } catch (e) { return; }  // the page shows its own error
  if (!X.summary) return;
  const objs = objNames();
  for (const id of ["history-objective", "slice-objective", "edf-objective", "contour-objective"]) fillSelect(document.getElementById(id), objs, objs[0]);
  const base = apiBase();
  const [hist, par] = await Promise.all([api(base + "/history"), api(base + "/parallel")]);
  A.history = hist;
  A.par = par;
  A.par.categories = parallelColumns(par);
  A.logParams = new Set();
  const params = Object.keys(par.parameters);
  fillSelect(document.getElementById("contour-x"), params, params[0]);
  fillSelect(document.getElementById("contour-y"), params, params[1] || params[0]);
  if (!REPORT) setupSelection();  // the table's metric filters need the server
  renderHistory();
  renderEdf();
  for (const id of ["history-objective", "history-x"]) document.getElementById(id).addEventListener("change", renderHistory);
  document.getElementById("slice-objective").addEventListener("change", renderSlices);
  document.getElementById("edf-objective").addEventListener("change", renderEdf);
  for (const id of ["contour-x", "contour-y", "contour-objective"]) document.getElementById(id).addEventListener("change", renderContour);
  try {
    await loadImportance();
    A.logParams = new Set(A.importance.scales.filter((p) => p.log).map((p) => p.name));
    if (params.length >= 2) await renderContour();
    else document.getElementById("contour-note").textContent = "The contour needs two parameters.";
  } catch (e) {
    document.getElementById("importance-note").textContent = e.message;
  }
  renderSlices();
  document.body.dataset.analysis = "1";
  if (REPORT) return;
  let cursor = X.cursor;
  setInterval(async () => {  // follow the live page: redraw history and EDF after new results
    if (X.cursor === cursor) return;
    cursor = X.cursor;
    try {
      A.history = await api(base + "/history");
      renderHistory();
      renderEdf();
      if (A.selection) await updateSelection();  // new trials that pass the filters join the selection
    } catch (e) { /* the next tick retries */ }
  }, 3000);
}

