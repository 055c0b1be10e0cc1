/* nasctl dashboard: the analysis views (loaded after app.js, whose helpers it uses).
 *
 * Experiment page: Pareto options (reference point, log axes, 3-D), history with
 * best so far, parameter importance, slices, contour, EDF, and the linked
 * selection (parallel-coordinates brushing <-> table filter <-> Pareto plot,
 * CSV download). Experiments page: the link to the comparison. Compare page.
 * User strings go through textContent or pesc() only, as in app.js.
 */
"use strict";

const A = { par: null, importance: null, history: null, selection: null, auto: { parallel: {}, pareto: {} }, options: null };
const PLOT_CONFIG = { displaylogo: false, responsive: true };
const OBJ_COLORS = ["#2b6de0", "#e4572e", "#17a673", "#8e44ad", "#f1a208", "#1b998b", "#c5283d", "#3d5a80"];

function apiBase() { return "/api/experiments/" + enc(X.summary.name); }
function objNames() { return X.summary.objectives.map((o) => o.name); }
function goalOf(m) { const o = X.summary.objectives.find((q) => q.name === m); return o ? o.goal : null; }
function fillNames(id, names, chosen) { fillSelect(document.getElementById(id), names, chosen); }

function waitReady() {
  return new Promise((resolve) => {
    const check = () => (document.body.dataset.ready === "1" ? resolve() : setTimeout(check, 100));
    check();
  });
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

/* Called by app.js's renderPareto before drawing: returns the traces and layout to draw. */
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

/* ------------------------------------------------------------------ linked selection */
function filterTexts() {
  return document.getElementById("f-where").value.split(",").map((x) => x.trim()).filter(Boolean);
}

function fieldOf(text) { const m = /^\s*([A-Za-z_][\w.\-/]*)/.exec(text); return m ? m[1] : null; }

/* v to 6 significant digits, rounded outwards (down for a lower bound, up for an upper one) so the
   filter keeps every trial inside the brushed range. */
function num6(v, up) {
  if (v === 0 || !isFinite(v)) return String(v);
  const unit = Math.pow(10, Math.floor(Math.log10(Math.abs(v))) - 5);
  return String(Number(((up ? Math.ceil(v / unit) : Math.floor(v / unit)) * unit).toPrecision(6)));
}

/* Filters made by a plot (`source`: "parallel" brushing, "pareto" box selection), by field:
   they replace that plot's earlier ones (and the user's own on the same fields) in the filter box. */
function setPlotFilters(source, byField) {
  const old = A.auto[source];
  const keep = filterTexts().filter((t) => !(fieldOf(t) in old) && !(fieldOf(t) in byField));
  A.auto[source] = byField;
  document.getElementById("f-where").value = keep.concat(...Object.values(byField)).join(", ");
  X.page.offset = 0;
  loadTable();
  updateSelection();
}

/* After the user edits the filter box: a plot's filter that is gone from it takes its brush
   (parallel coordinates) or box (Pareto plot) away too, so the plots show what the table shows. */
function dropStalePlotFilters() {
  const texts = new Set(filterTexts());
  const stale = (conds) => !conds.every((c) => texts.has(c));
  const gd = document.getElementById("parallel");
  const fields = X.summary.parameters.concat(objNames());
  const clear = {};
  for (const [name, conds] of Object.entries(A.auto.parallel)) {
    if (!stale(conds)) continue;
    delete A.auto.parallel[name];
    const k = fields.indexOf(name);
    if (k >= 0) clear["dimensions[" + k + "].constraintrange"] = null;
  }
  if (Object.keys(clear).length && gd.data) { A.syncing = true; Plotly.restyle(gd, clear).finally(() => { A.syncing = false; }); }
  const boxed = Object.values(A.auto.pareto);
  if (boxed.length && boxed.some(stale)) {
    A.auto.pareto = {};
    Plotly.relayout("pareto", { selections: [] });
  }
}

/* Box or lasso selection in the Pareto plot: the selected region's x and y ranges filter the table. */
function onParetoSelect(ev) {
  const xs = document.getElementById("pareto-x").value, ys = document.getElementById("pareto-y").value;
  const pts = (ev && ev.points) || [];
  if (!ev || (!ev.range && !pts.length)) { setPlotFilters("pareto", {}); return; }
  let rx, ry;
  if (ev.range && ev.range.x && ev.range.y) { rx = ev.range.x; ry = ev.range.y; }
  else { rx = [Math.min(...pts.map((p) => p.x)), Math.max(...pts.map((p) => p.x))]; ry = [Math.min(...pts.map((p) => p.y)), Math.max(...pts.map((p) => p.y))]; }
  const range = (name, r) => [name + " >= " + num6(Math.min(...r), false), name + " <= " + num6(Math.max(...r), true)];
  const by = {};
  by[xs] = range(xs, rx);
  by[ys] = xs === ys ? by[xs] : range(ys, ry);
  setPlotFilters("pareto", by);
}

/* Parallel-coordinates brushing: each brushed axis becomes filters in the table's filter box. */
function onBrush() {
  if (A.syncing) return;
  const gd = document.getElementById("parallel");
  const dims = (gd.data && gd.data[0] && gd.data[0].dimensions) || [];
  const fields = X.summary.parameters.concat(objNames());
  const brushed = {};
  dims.forEach((d, k) => {
    const name = fields[k];
    let cr = d.constraintrange;
    if (!name || !cr || !cr.length) return;
    const ranges = Array.isArray(cr[0]) ? cr : [cr];
    const conds = [];
    if (d.tickvals && d.ticktext) {
      const cats = d.ticktext.map((t) => (t === "—" ? null : unesc(t)));
      const inside = (code) => ranges.some(([lo, hi]) => code >= lo && code <= hi);
      cats.forEach((c, code) => { if (!inside(code) && c !== null) conds.push(name + " != " + c); });
    } else {
      const lo = Math.min(...ranges.map((r) => r[0])), hi = Math.max(...ranges.map((r) => r[1]));
      conds.push(name + " >= " + num6(lo, false), name + " <= " + num6(hi, true));
    }
    brushed[name] = conds;
  });
  setPlotFilters("parallel", brushed);
}

async function updateSelection() {
  const texts = filterTexts();
  const q = new URLSearchParams();
  for (const t of texts) q.append("where", t);
  document.getElementById("f-csv").href = apiBase() + "/selection.csv" + (texts.length ? "?" + q.toString() : "");
  const info = document.getElementById("selection-info");
  if (!texts.length) {
    A.selection = null;
    info.textContent = "";
  } else {
    try {
      const sel = await api(apiBase() + "/selection?" + q.toString());
      A.selection = new Set(sel.index);
      info.textContent = sel.total + " trials selected";
    } catch (e) {
      A.selection = null;
      info.textContent = "";
      return;  // app.js's table load shows the error
    }
  }
  renderPareto();
}

function setupSelection() {
  const controls = document.getElementById("f-apply").parentElement;
  const csv = el("a", { id: "f-csv", href: apiBase() + "/selection.csv", download: "", text: "download CSV" });
  controls.insertBefore(el("span", {}, csv, " ", el("span", { id: "selection-info", class: "muted" })), document.getElementById("pager"));
  document.getElementById("f-where").placeholder = "val_acc >= 0.9, width < 64, act = relu";
  const applied = () => { dropStalePlotFilters(); updateSelection(); };
  document.getElementById("f-apply").addEventListener("click", applied);
  document.getElementById("f-where").addEventListener("keydown", (ev) => { if (ev.key === "Enter") applied(); });
  const gd = document.getElementById("parallel");
  gd.on("plotly_restyle", onBrush);
  const pd = document.getElementById("pareto");
  pd.on("plotly_selected", onParetoSelect);
  pd.on("plotly_deselect", () => onParetoSelect(null));
}

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
async function analysisPage() {
  await waitReady();
  if (!X.summary) return;
  const objs = objNames();
  for (const id of ["history-objective", "slice-objective", "edf-objective", "contour-objective"]) fillNames(id, objs, objs[0]);
  const base = apiBase();
  const [hist, par] = await Promise.all([api(base + "/history"), api(base + "/parallel")]);
  A.history = hist;
  A.par = par;
  A.par.categories = parallelColumns(par);
  A.logParams = new Set();
  const params = Object.keys(par.parameters);
  fillNames("contour-x", params, params[0]);
  fillNames("contour-y", params, params[1] || params[0]);
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

/* ------------------------------------------------------------------ experiments page: pick experiments to compare */
async function comparePicker() {
  const h1 = document.querySelector("main h1");
  const data = await api("/api/experiments");
  const groups = new Map();
  for (const x of data.experiments) {
    const key = x.objectives.map((o) => o.name + ":" + o.goal).join(",");
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(x.name);
  }
  const comparable = Array.from(groups.values()).filter((g) => g.length >= 2);
  if (!comparable.length) return;
  const links = comparable.map((g) => el("a", { href: "/compare?" + g.map((n) => "names=" + enc(n)).join("&"), class: "compare-link",
    text: "compare " + (g.length > 4 ? g.length + " experiments" : g.join(", ")) }));
  const p = el("p", { id: "compare-links" }, "Same objectives: ");
  links.forEach((a, k) => { if (k) p.appendChild(document.createTextNode(" · ")); p.appendChild(a); });
  h1.after(p);
}

/* ------------------------------------------------------------------ compare page */
async function comparePage() {
  await setupHeader(null);
  const names = new URLSearchParams(location.search).getAll("names").flatMap((n) => n.split(",")).filter(Boolean);
  const list = await api("/api/experiments");
  const pick = document.getElementById("compare-pick");
  const boxes = list.experiments.map((x) => el("label", {}, el("input", { type: "checkbox", value: x.name, checked: names.includes(x.name) }), " " + x.name));
  const go = el("button", { type: "button", id: "compare-go", text: "compare" });
  go.addEventListener("click", () => {
    const chosen = boxes.map((b) => b.firstChild).filter((c) => c.checked).map((c) => c.value);
    location.search = chosen.map((n) => "names=" + enc(n)).join("&");
  });
  pick.replaceChildren(...boxes, go);
  if (names.length < 2) { showMessage("Choose two or more experiments with the same objectives."); return; }
  const q = names.map((n) => "names=" + enc(n)).join("&");
  let c;
  try { c = await api("/api/compare?" + q); }
  catch (e) { showMessage(e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : ""), true); return; }
  const objs = c.objectives.map((o) => o.name);
  fillSelect(document.getElementById("compare-x"), objs, objs[0]);
  fillSelect(document.getElementById("compare-y"), objs, objs[1] || objs[0]);
  const color = (k) => OBJ_COLORS[k % OBJ_COLORS.length];
  Plotly.react("compare-hv", c.experiments.map((x, k) => ({ type: "scatter", mode: "lines", line: { shape: "hv", color: color(k) },
    name: pesc(x.name), x: x.history.trial_index, y: x.history.hypervolume, hovertemplate: "after trial %{x}: %{y}<extra>" + pesc(x.name) + "</extra>" })),
  { margin: { t: 10, r: 10, b: 45, l: 70 }, legend: { orientation: "h", y: -0.2 }, xaxis: { title: { text: "trial index" } }, yaxis: { title: { text: "hypervolume" } } },
  PLOT_CONFIG);
  function fronts() {
    const xs = document.getElementById("compare-x").value, ys = document.getElementById("compare-y").value;
    Plotly.react("compare-front", c.experiments.map((x, k) => {
      const order = x.front.trial_index.map((_, j) => j).sort((a, b) => x.front.values[xs][a] - x.front.values[xs][b]);
      // the attainment line: a maximised x steps up (or down) before moving right, a minimised one after
      const shape = c.objectives.find((o) => o.name === xs).goal === "maximize" ? "vh" : "hv";
      return { type: "scatter", mode: objs.length === 2 ? "lines+markers" : "markers", line: { shape: shape, color: color(k) }, marker: { color: color(k), size: 8 },
        name: pesc(x.name), x: order.map((j) => x.front.values[xs][j]), y: order.map((j) => x.front.values[ys][j]),
        customdata: order.map((j) => x.front.trial_index[j]), hovertemplate: "trial %{customdata}<br>" + pesc(xs) + " = %{x}<br>" + pesc(ys) + " = %{y}<extra>" + pesc(x.name) + "</extra>" };
    }), { margin: { t: 10, r: 10, b: 45, l: 70 }, legend: { orientation: "h", y: -0.2 }, uirevision: xs + "|" + ys,
      xaxis: { title: { text: pesc(xs) } }, yaxis: { title: { text: pesc(ys) } } }, PLOT_CONFIG);
  }
  for (const id of ["compare-x", "compare-y"]) document.getElementById(id).addEventListener("change", fronts);
  fronts();
  const ref = Object.entries(c.reference_point).map(([k, v]) => k + "=" + fmt(v)).join(", ");
  showMessage("Common reference point: " + ref);
  document.querySelector("#compare-table thead").replaceChildren(el("tr", {}, ...["experiment", "status", "completed", "hypervolume", "Pareto front"].map((t) => el("th", { text: t }))));
  document.querySelector("#compare-table tbody").replaceChildren(...c.experiments.map((x) => el("tr", {},
    el("td", {}, el("a", { href: expUrl(x.name), text: x.name })), el("td", {}, statusBadge(x.status)),
    el("td", { text: x.completed }), el("td", { text: fmt(x.hypervolume) }), el("td", { text: x.front.trial_index.length }))));
  document.body.dataset.ready = "1";
}

window.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (REPORT && page !== "experiment") return;
  const run = page === "experiment" ? analysisPage : page === "experiments" ? comparePicker : page === "compare" ? comparePage : null;
  if (run) run().catch((e) => showMessage(String(e.message || e), true));
});
