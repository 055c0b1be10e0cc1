/* nasctl dashboard: one script for every page (and for `nasctl report`).
 *
 * Data comes from the JSON API (or, in a report, from window.NASCTL_REPORT).
 * User-supplied strings (names, parameter values, log lines, messages) are only
 * ever inserted with textContent, and escaped before they reach plotly labels.
 */
"use strict";

const REPORT = window.NASCTL_REPORT || null;
const LIVE_MS = 2000;
const state = { readOnly: true, token: sessionStorage.getItem("nasctl-token") || "" };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

/* Escape a string for plotly's label mini-markup. */
function pesc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/* The text a pesc()-escaped label shows. */
function unesc(s) { return String(s).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"); }

function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") {
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
  }
  return String(v);
}

/* Ticks for a log axis over [lo, hi] (lo > 0), each labelled with its full value: 1-2-3-5-7
   within about a decade, 1-2-5 over two, 1-3 over three, powers of ten beyond. (plotly labels the ticks inside
   a decade with their first digit only: "2 3 4 5 6 7 8 9 100".) */
function logTicks(lo, hi) {
  if (!(lo > 0) || !(hi >= lo)) return {};
  const d0 = Math.floor(Math.log10(lo)), d1 = Math.ceil(Math.log10(hi));
  const span = d1 - d0;
  const steps = span > 3 ? [1] : span > 2 ? [1, 3] : span > 1 ? [1, 2, 5] : [1, 2, 3, 5, 7];
  const label = (v) => String(Number(v.toPrecision(3)));
  let vals = [];
  for (let d = d0; d <= d1; d++) for (const m of steps) {
    const v = Number((m * Math.pow(10, d)).toPrecision(12));
    if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) vals.push(v);
  }
  if (vals.length < 2) vals = [lo, hi].map((v) => Number(v.toPrecision(3)));
  return { tickvals: vals, ticktext: vals.map(label) };
}

/* A time as a date: "2026-11-25T16:54:20.123Z" or epoch seconds -> "2026-11-25 16:54:20 UTC" (one zone everywhere). */
function shownTime(t) {
  if (t === null || t === undefined || t === "") return "";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (isNaN(d)) return String(t);
  return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

/* A key/value cell: times (ISO strings, epoch seconds under a time-like key) as dates, the rest by fmt. */
const TIME_KEY = /(^|[_ .])(created|started|ended|submitted|updated|time|timestamp|at)$/i;
function fmtKv(k, v) {
  if (TIME_KEY.test(k) && ((typeof v === "number" && v > 1e8 && v < 1e11) || (typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v)))) return shownTime(v);
  return fmt(v);
}

function enc(s) { return encodeURIComponent(s); }
function expUrl(name) { return "/experiments/" + enc(name); }
function trialUrl(name, index) { return expUrl(name) + "/trials/" + index; }

class ApiError extends Error {
  constructor(status, body) { super((body && body.error) || ("HTTP " + status)); this.status = status; this.body = body; }
}

async function api(path, options) {
  if (REPORT) {
    if (path in REPORT.data) return REPORT.data[path];
    throw new ApiError(404, { error: "not part of this report" });
  }
  const opts = Object.assign({ headers: {} }, options || {});
  if (state.token) opts.headers["Authorization"] = "Bearer " + state.token;
  const r = await fetch(path, opts);
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

function showMessage(text, isError) {
  const m = document.getElementById("message");
  if (!m) return;
  m.textContent = text || "";
  m.className = isError ? "error" : "muted";
}

function statusBadge(s) { return el("span", { class: "status " + s, text: s }); }

function card(k, v) { return el("div", { class: "card" }, el("div", { class: "k", text: k }), el("div", { class: "v" }, v)); }

function progressBar(p) {
  const bar = el("span", { class: "bar" }, el("span"));
  bar.firstChild.style.width = Math.round(100 * (p || 0)) + "%";
  return bar;
}

function countsText(trials) {
  return Object.entries(trials || {}).filter(([, n]) => n > 0).map(([s, n]) => s.toLowerCase() + " " + n).join(", ");
}

function route() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (REPORT) return { name: REPORT.name };
  return { name: parts[1], index: parts[2] === "trials" ? Number(parts[3]) : null };
}

async function setupHeader(name) {
  const nav = document.getElementById("nav");
  if (!nav) return;
  if (name && !REPORT) {
    nav.appendChild(el("a", { href: expUrl(name), text: name }));
    nav.appendChild(document.createTextNode(" · "));
    nav.appendChild(el("a", { href: expUrl(name) + "/diagnostics", text: "model diagnostics" }));
  }
  if (REPORT) {
    nav.appendChild(el("span", { text: "report generated " + REPORT.generated_at }));
    return;
  }
  try {
    const info = await api("/api/info");
    state.readOnly = info.read_only;
    state.service = info.service;  // `nasctl serve`: experiments can be resumed from here
  } catch (e) { state.readOnly = true; state.service = false; }
  let standby = null;
  if (state.service) {  // only `nasctl serve` has /api/service: `nasctl web` is not asked (no 404 logged)
    try {
      const svc = await api("/api/service");
      if (svc.role === "standby") {  // a standby refuses writes: they go to the active service
        state.readOnly = true;
        standby = (svc.active_service && svc.active_service.url) || "the active service";
      }
    } catch (e) { /* the role stays unknown: writes are answered by the service itself */ }
  }
  const auth = document.getElementById("auth");
  if (standby) { auth.textContent = "standby (read-only): changes go to " + standby; return; }
  if (state.readOnly) { auth.textContent = "read-only"; return; }
  const input = el("input", { type: "password", placeholder: "token", size: 14, id: "token-input" });
  input.value = state.token;
  input.addEventListener("change", () => { state.token = input.value; sessionStorage.setItem("nasctl-token", input.value); });
  auth.appendChild(el("label", {}, "token ", input));
}

/* ------------------------------------------------------------------ experiments list */
async function experimentsPage() {
  await setupHeader(null);
  const tbody = document.querySelector("#experiments tbody");
  async function load() {
    const data = await api("/api/experiments");
    tbody.replaceChildren(...data.experiments.map((x) => el("tr", {},
      el("td", {}, el("a", { href: expUrl(x.name), text: x.name })),
      el("td", {}, statusBadge(x.status)),
      el("td", {}, progressBar(x.progress), " " + x.finished_trials + " / " + x.budget.max_trials),
      el("td", { text: countsText(x.trials) }),
      el("td", { text: fmt(x.hypervolume) }),
      el("td", { text: x.pareto_size }),
      el("td", { text: shownTime(x.created_at) }))));
    showMessage(data.experiments.length ? "" : "No experiments yet: start one with `nasctl run SPEC.yaml`.");
  }
  await load();
  if (!REPORT) setInterval(() => load().catch((e) => showMessage(e.message, true)), 5000);
}

/* ------------------------------------------------------------------ experiment page */
const X = { summary: null, pts: null, pos: new Map(), hv: null, cursor: 0, page: { offset: 0, sort: "index", desc: false } };

function renderSummary(s) {
  document.title = "nasctl — " + s.name;
  document.getElementById("title").replaceChildren(document.createTextNode(s.name + " "), statusBadge(s.status));
  const ref = Object.entries(s.reference_point).map(([k, v]) => k + "=" + fmt(v)).join(", ");
  const cards = [
    card("progress", el("span", {}, progressBar(s.progress), " " + s.finished_trials + " / " + s.budget.max_trials)),
    card("trials by state", (countsText(s.trials) || "none") + (s.queued ? " (" + s.queued + " of the running queued by the scheduler)" : "")),
    card("hypervolume", fmt(s.hypervolume)),
    card("Pareto front", s.pareto_size + " of " + s.feasible + " feasible"),
    card("reference point", ref),
    card("objectives", s.objectives.map((o) => o.name + " (" + (o.goal === "maximize" ? "max" : "min") + ")").join(", ")),
  ];
  if (s.usage && (s.usage.gpu_hours || s.budget.max_gpu_hours)) {
    cards.push(card("GPU-hours", fmt(s.usage.gpu_hours) + (s.usage.gpu_hours_lost ? " (" + fmt(s.usage.gpu_hours_lost) + " lost to failed or redone attempts)" : "")
      + (s.budget.max_gpu_hours ? " of " + fmt(s.budget.max_gpu_hours) : "")));
  }
  if (s.constraints.length) cards.push(card("constraints", s.constraints.join(", ")));
  const logScale = (s.log_scale || []).length ? "; on the log scale: " + s.log_scale.join(", ") : "";
  cards.push(card("optimizer", s.optimizer + ", " + s.initial_trials + " quasi-random first" + logScale));
  if (s.early_stopping) {
    const es = s.early_stopping;
    cards.push(card("early stopping", es.trials_stopped + " stopped on " + (es.metric || "the first objective with a curve") + ", ~" + fmt(es.seconds_saved) + " s of trial time saved"));
  }
  if (s.status_reason) cards.push(card("reason", s.status_reason));
  if (s.scheduler_unreachable) {
    const u = s.scheduler_unreachable;
    cards.push(card("scheduler", `${u.scheduler} unreachable since ${u.since.slice(0, 19).replace("T", " ")} UTC: trials keep running, candidates wait`));
  }
  if (!REPORT && !state.readOnly && s.status === "RUNNING") {
    cards.push(card("control", el("button", { class: "danger", type: "button", id: "stop", onclick: stopExperiment, text: "stop experiment" })));
  }
  if (!REPORT && !state.readOnly && state.service && (s.status === "STOPPED" || s.status === "FAILED")) {
    cards.push(card("control", el("button", { type: "button", id: "resume", onclick: resumeExperiment, text: "resume experiment" })));
  }
  document.getElementById("summary").replaceChildren(...cards);
}

async function resumeExperiment() {
  try {
    await api("/api/experiments/" + enc(X.summary.name) + "/resume", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    showMessage("queued: the service resumes the experiment as soon as a slot is free");
  } catch (e) { showMessage(e.message, true); }
}

async function stopExperiment() {
  if (!confirm("Stop " + X.summary.name + "?")) return;
  try {
    const r = await api("/api/experiments/" + enc(X.summary.name) + "/stop", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    showMessage(r.requested
      ? "stop requested: the orchestrator stops at its next loop step; running trials keep running until `nasctl resume` re-attaches them"
      : "stopped: no orchestrator was running it; running trials keep running until `nasctl resume` re-attaches them");
  } catch (e) { showMessage(e.message, true); }
}

function setPoints(p) {
  X.pts = p;
  X.pos = new Map(p.index.map((i, k) => [i, k]));
}

function axisChoices(s) {
  const names = s.objectives.map((o) => o.name);
  for (const m of s.metrics) if (!names.includes(m)) names.push(m);
  return names;
}

function fillSelect(sel, names, chosen) {
  sel.replaceChildren(...names.map((n) => el("option", { value: n, text: n, selected: n === chosen })));
}

const CATEGORY = {
  dominated: { name: "dominated", size: 6, opacity: 0.55, byIndex: true, symbol: "circle" },
  front: { name: "Pareto-optimal (all objectives)", size: 11, opacity: 1, byIndex: true, symbol: "circle", line: { width: 1.5, color: "#111" } },
  infeasible: { name: "infeasible", size: 8, opacity: 0.8, color: "#9aa0a6", symbol: "x" },
  early_stopped: { name: "early-stopped (partial values)", size: 8, opacity: 0.9, color: "#7b4fb8", symbol: "triangle-down-open" },
  failed: { name: "failed", size: 8, opacity: 0.9, color: "#d62728", symbol: "x-thin-open" },
  pending: { name: "running / candidate", size: 8, opacity: 0.9, color: "#ff9f1c", symbol: "diamond-open" },
};

function renderPareto() {
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
  // analysis.js (when loaded) adds the reference toggle, log axes, the 3-D view and the selection
  const view = typeof paretoView === "function" ? paretoView(traces, layout, xs, ys, plotted) : { traces: traces, layout: layout, points: plotted };
  Plotly.react(div, view.traces, view.layout, { displaylogo: false, responsive: true });
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

function renderHv() {
  const h = X.hv;
  Plotly.react("hv", [{ type: h.trial_index.length > 3000 ? "scattergl" : "scatter", mode: "lines", line: { shape: "hv", color: "#2b6de0" },
    x: h.trial_index, y: h.hypervolume, name: "hypervolume", hovertemplate: "after trial %{x}: %{y}<extra></extra>" }],
  { margin: { t: 10, r: 10, b: 45, l: 70 }, xaxis: { title: { text: "trial index" } }, yaxis: { title: { text: "hypervolume" } } },
  { displaylogo: false, responsive: true });
}

function mergeHv(tail) {
  if (!tail.trial_index.length) return;
  const first = tail.trial_index[0];
  const keep = X.hv.trial_index.findIndex((i) => i >= first);
  const cut = keep < 0 ? X.hv.trial_index.length : keep;
  X.hv = { trial_index: X.hv.trial_index.slice(0, cut).concat(tail.trial_index), hypervolume: X.hv.hypervolume.slice(0, cut).concat(tail.hypervolume) };
}

function tableColumns() {
  const s = X.summary;
  const cols = [{ key: "index", label: "#" }, { key: "status", label: "status" }, { key: "generation_method", label: "method" }];
  for (const m of axisChoices(s)) cols.push({ key: "values." + m, label: m, get: (r) => r.values[m] });
  for (const p of s.parameters) cols.push({ key: "parameters." + p, label: p, get: (r) => r.parameters[p] });
  cols.push({ key: null, label: "duration (s)", get: (r) => r.duration_s });
  cols.push({ key: null, label: "queued (s)", get: (r) => r.queued_s });
  cols.push({ key: null, label: "GPU-h", get: (r) => r.gpu_hours });
  return cols;
}

function tableQuery() {
  const q = new URLSearchParams();
  q.set("offset", X.page.offset);
  q.set("limit", document.getElementById("f-limit").value);
  q.set("sort", X.page.sort);
  if (X.page.desc) q.set("desc", "true");
  const st = document.getElementById("f-status").value;
  if (st) q.append("status", st);
  for (const w of document.getElementById("f-where").value.split(",").map((x) => x.trim()).filter(Boolean)) q.append("where", w);
  return q;
}

async function loadTable() {
  const name = X.summary.name;
  // Clicks can start a load while another is on its way: only the newest one draws
  // (a slower, older answer would otherwise show rows sorted the old way under the new header).
  const seq = X.tableSeq = (X.tableSeq || 0) + 1;
  let page;
  if (REPORT) page = reportTablePage();
  else {
    try { page = await api("/api/experiments/" + enc(name) + "/trials?" + tableQuery().toString()); }
    catch (e) {
      if (seq === X.tableSeq) { showMessage(e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : ""), true); X.tableError = true; }
      return;
    }
    if (seq !== X.tableSeq) return;
    // clear the table's own error (a bad filter), never another message (a confirmation the live refresh would wipe)
    if (X.tableError) { showMessage(""); X.tableError = false; }
  }
  const cols = tableColumns();
  const head = el("tr", {}, ...cols.map((c) => {
    const th = el("th", { text: c.label, class: c.key ? "sortable" : null, "data-key": c.key });
    if (c.key === X.page.sort) th.classList.add("sorted");
    if (c.key === X.page.sort && X.page.desc) th.classList.add("desc");
    if (c.key) th.addEventListener("click", () => {
      if (X.page.sort === c.key) X.page.desc = !X.page.desc; else { X.page.sort = c.key; X.page.desc = false; }
      X.page.offset = 0; loadTable();
    });
    return th;
  }));
  document.querySelector("#trials thead").replaceChildren(head);
  const front = new Set(X.pts.front);
  document.querySelector("#trials tbody").replaceChildren(...page.trials.map((r) => el("tr", { "data-index": r.index },
    ...cols.map((c) => {
      if (c.key === "index") {
        const label = String(r.index) + (front.has(r.index) ? " \u2605" : "");
        return el("td", {}, REPORT ? label : el("a", { href: trialUrl(name, r.index), text: label }));
      }
      if (c.key === "status") return el("td", {}, statusBadge(r.queued ? "QUEUED" : r.status),
        r.waiting_for_devices ? el("span", { class: "muted", text: " waiting for devices" }) : null,
        r.pending_reason ? el("span", { class: "muted", text: " " + r.pending_reason }) : null);
      if (c.key === "generation_method") return el("td", { text: r.generation_method });
      return el("td", { text: fmt(c.get(r)) });
    }))));
  const end = Math.min(page.offset + page.trials.length, page.total);
  document.getElementById("page-info").textContent = (page.total ? page.offset + 1 : 0) + "–" + end + " of " + page.total;
  document.getElementById("prev").disabled = page.offset <= 0;
  document.getElementById("next").disabled = end >= page.total;
  X.page.total = page.total;
  document.getElementById("trials").dataset.drawn = String(seq);  // how many loads were drawn (for tests)
}

function reportTablePage() {
  let rows = (REPORT.trials || []).slice();
  const st = document.getElementById("f-status").value;
  if (st) rows = rows.filter((r) => r.status === st);
  const key = X.page.sort;
  const get = (r) => key.startsWith("values.") ? r.values[key.slice(7)] : key.startsWith("parameters.") ? r.parameters[key.slice(11)] : r[key];
  rows.sort((a, b) => {
    const va = get(a), vb = get(b);
    if (va === vb) return a.index - b.index;
    if (va === null || va === undefined) return 1;
    if (vb === null || vb === undefined) return -1;
    return (va < vb ? -1 : 1) * (X.page.desc ? -1 : 1);
  });
  const limit = Number(document.getElementById("f-limit").value);
  return { total: rows.length, offset: X.page.offset, limit: limit, trials: rows.slice(X.page.offset, X.page.offset + limit) };
}

function renderParallel(d) {
  if (!X.par) window.addEventListener("resize", () => { clearTimeout(X.parTimer); X.parTimer = setTimeout(() => renderParallel(X.par), 200); });
  X.par = d;
  const dims = [];
  for (const [pn, col] of Object.entries(d.parameters)) {
    const nums = col.filter((v) => typeof v === "number");
    if (nums.length === col.filter((v) => v !== null).length && nums.length) {
      const lo = Math.min(...nums);
      dims.push({ label: pesc(pn), values: col.map((v) => (v === null ? lo : v)) });
    } else {
      const cats = Array.from(new Set(col.map((v) => (v === null ? "—" : String(v)))));
      dims.push({ label: pesc(pn), values: col.map((v) => cats.indexOf(v === null ? "—" : String(v))), tickvals: cats.map((_, k) => k), ticktext: cats.map(pesc) });
    }
  }
  for (const o of d.objectives) {
    const col = d.values[o.name] || [];
    dims.push({ label: pesc(o.name + (o.goal === "maximize" ? " \u2191" : " \u2193")), values: col.map((v) => (v === null ? NaN : v)) });
  }
  const first = d.objectives[0];
  const color = first ? (d.values[first.name] || []).map((v) => (v === null ? 0 : v)) : d.index;
  document.getElementById("parallel-note").textContent = d.index.length + " of " + d.total_completed + " completed trials (every Pareto-optimal one" +
    (d.index.length < d.total_completed ? ", the others evenly sampled" : "") + "); colour: " + (first ? first.name : "trial index");
  // axis titles are centred over their axes: where the axes are closer than the titles are long, turn them upright
  const div = document.getElementById("parallel");
  const brushes = {};  // a redraw (new results, a resize) keeps what the user brushed
  for (const old of (div.data && div.data[0] && div.data[0].dimensions) || []) if (old.constraintrange) brushes[old.label] = old.constraintrange;
  for (const dim of dims) if (brushes[dim.label]) dim.constraintrange = brushes[dim.label];
  const gap = (div.clientWidth - 120) / Math.max(1, dims.length - 1);
  const longest = Math.max(0, ...dims.map((d) => unesc(d.label).length)) * 7;
  const upright = longest > gap;
  Plotly.react(div, [{ type: "parcoords", dimensions: dims, labelangle: upright ? -90 : 0, labelside: "top",
    line: { color: color, colorscale: "Viridis", showscale: true, colorbar: { thickness: 12 } } }],
  { margin: { t: upright ? 30 + longest : 40, r: 60, b: 20, l: 60 } }, { displaylogo: false, responsive: true });
}

function renderEvents(list, prepend) {
  const ul = document.getElementById("events");
  const items = list.map((e) => el("li", {}, el("time", { text: shownTime(e.time) }), e.message));
  if (prepend) { for (const it of items) ul.insertBefore(it, ul.firstChild); }
  else ul.replaceChildren(...items.reverse());
  while (ul.children.length > 200) ul.removeChild(ul.lastChild);
}

async function experimentPage() {
  const { name } = route();
  await setupHeader(name);
  const base = "/api/experiments/" + enc(name);
  try {
    X.summary = await api(base);
  } catch (e) { showMessage(e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : ""), true); return; }
  renderSummary(X.summary);
  const choices = axisChoices(X.summary);
  const objs = X.summary.objectives.map((o) => o.name);
  fillSelect(document.getElementById("pareto-x"), choices, objs[0]);
  fillSelect(document.getElementById("pareto-y"), choices, objs[1] || choices[1] || objs[0]);
  for (const id of ["pareto-x", "pareto-y"]) document.getElementById(id).addEventListener("change", renderPareto);
  const stSel = document.getElementById("f-status");
  for (const st of ["CANDIDATE", "RUNNING", "COMPLETED", "FAILED", "EARLY_STOPPED", "ABANDONED"]) stSel.appendChild(el("option", { value: st, text: st }));
  document.getElementById("f-apply").addEventListener("click", () => { X.page.offset = 0; loadTable(); });
  document.getElementById("f-where").addEventListener("keydown", (ev) => { if (ev.key === "Enter") { X.page.offset = 0; loadTable(); } });
  document.getElementById("f-limit").addEventListener("change", () => { X.page.offset = 0; loadTable(); });
  document.getElementById("prev").addEventListener("click", () => { X.page.offset = Math.max(0, X.page.offset - Number(document.getElementById("f-limit").value)); loadTable(); });
  document.getElementById("next").addEventListener("click", () => { X.page.offset += Number(document.getElementById("f-limit").value); loadTable(); });
  if (REPORT) document.getElementById("f-where").parentElement.remove();
  const [pts, hv, par, ev] = await Promise.all([api(base + "/points"), api(base + "/hypervolume"), api(base + "/parallel"),
    api(base + "/events?latest=true&limit=200")]);
  setPoints(pts);
  X.hv = hv;
  X.cursor = pts.cursor;
  renderPareto();
  renderHv();
  renderParallel(par);
  renderEvents(ev.events, false);
  await loadTable();
  document.body.dataset.ready = "1";
  if (!REPORT) liveLoop(base);
}

async function liveLoop(base) {
  for (;;) {
    await new Promise((r) => setTimeout(r, LIVE_MS));
    try { await applyChanges(base); } catch (e) { showMessage("live update failed: " + e.message, true); }
  }
}

async function applyChanges(base) {
  const ch = await api(base + "/changes?since=" + X.cursor);
  if (!ch.changed) return;
  const oldRef = JSON.stringify(X.summary.reference_point);
  X.summary = ch.experiment;
  renderSummary(X.summary);
  if (JSON.stringify(ch.reference_point) !== oldRef) {
    setPoints(await api(base + "/points"));
    X.hv = await api(base + "/hypervolume");
  } else {
    const p = X.pts, t = ch.trials;
    for (let j = 0; j < t.index.length; j++) {
      let k = X.pos.get(t.index[j]);
      if (k === undefined) {
        k = p.index.length;
        p.index.push(t.index[j]); p.status.push(null); p.category.push(null);
        for (const m of Object.keys(p.values)) p.values[m].push(null);
        X.pos.set(t.index[j], k);
      }
      p.status[k] = t.status[j];
      p.category[k] = t.category[j];
      for (const [m, col] of Object.entries(t.values)) {
        if (!(m in p.values)) p.values[m] = p.index.map(() => null);
        p.values[m][k] = col[j];
      }
    }
    const front = new Set(ch.front);
    for (let k = 0; k < p.index.length; k++) {
      if (front.has(p.index[k])) p.category[k] = "front";
      else if (p.category[k] === "front") p.category[k] = "dominated";
    }
    p.front = ch.front;
    mergeHv(ch.hypervolume);
  }
  X.cursor = ch.cursor;
  renderPareto();
  renderHv();
  renderEvents(ch.events, true);
  await loadTable();
  if (ch.trials.index.length) renderParallel(await api(base + "/parallel"));
}

/* ------------------------------------------------------------------ trial page */
function kvRows(tbodySel, entries) {
  document.querySelector(tbodySel).replaceChildren(...entries.map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { text: fmtKv(k, v) }))));
}

// A trial's own record (trial_info.json) as flat key/value rows: nested keys joined with ".".
function flatInfo(obj, prefix) {
  const out = [];
  for (const [k, v] of Object.entries(obj || {})) {
    const key = prefix ? prefix + "." + k : k;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) out.push(...flatInfo(v, key));
    else out.push([key, Array.isArray(v) ? v.join(" ") : v]);
  }
  return out;
}

async function trialPage() {
  const { name, index } = route();
  await setupHeader(name);
  const base = "/api/experiments/" + enc(name) + "/trials/" + index;
  let t;
  async function load() {
    t = await api(base);
    document.title = "nasctl — " + name + " trial " + index;
    document.getElementById("title").replaceChildren(el("a", { href: expUrl(name), text: name }), document.createTextNode(" · trial " + index + " "), statusBadge(t.status));
    const cards = [card("method", t.generation_method), card("duration", t.duration_s === null ? "—" : fmt(t.duration_s) + " s running")];
    if (t.queued_s >= 1 || t.queued) cards.push(card("queued", fmt(t.queued_s) + " s" + (t.pending_reason ? " (" + t.pending_reason + ")" : "")));
    if (t.gpu_hours) cards.push(card("GPU-hours", fmt(t.gpu_hours) + (t.gpu_hours_lost ? " (" + fmt(t.gpu_hours_lost) + " lost)" : "")));
    if (t.restarts) cards.push(card("restarts", String(t.restarts)));
    if (t.failure_reason) cards.push(card("failure", (t.failure_class ? t.failure_class + ": " : "") + t.failure_reason));
    if (t.attempts && t.attempts.length > 1) cards.push(card("attempts", String(t.attempts.length)));
    if (!state.readOnly && !t.terminal) cards.push(card("control", el("button", { class: "danger", type: "button", id: "cancel", onclick: cancelTrial, text: "cancel trial" })));
    document.getElementById("summary").replaceChildren(...cards);
    kvRows("#params tbody", Object.entries(t.parameters));
    kvRows("#values tbody", Object.entries(t.values));
    kvRows("#job tbody", [["job handle", t.job_handle], ["job name", t.job_name], ["scheduler", t.scheduler], ["log dir", t.log_dir],
      ["devices", t.devices ? t.devices.join(",") : (t.waiting_for_devices ? "waiting for free devices" : "—")],
      ["created", t.created_at], ["started", t.started_at], ["ended", t.ended_at], ...Object.entries(t.runner_metadata)]);
    const info = flatInfo(t.info, "");
    document.getElementById("info-panel").hidden = info.length === 0;
    kvRows("#info tbody", info);
    renderCurves(t);
    renderTimeline(t);
  }
  async function cancelTrial() {
    if (!confirm("Cancel trial " + index + "?")) return;
    try {
      const r = await api(base + "/cancel", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      showMessage(r.requested ? "cancel requested: the orchestrator cancels the job at its next loop step"
        : "cancelled: no orchestrator was running the experiment; the job was cancelled and the trial ended ABANDONED");
    } catch (e) { showMessage(e.message, true); }
  }
  async function loadLog() {
    const sel = document.getElementById("log-stream");
    const pre = document.getElementById("log");
    const streams = t.log_streams || [];
    for (const o of sel.options) o.hidden = !streams.includes(o.value);
    if (!streams.length) {  // e.g. a trial run inside the orchestrator's process: no log file to ask for
      pre.textContent = t.log_tail || "(no log file was recorded for this trial)";
      document.getElementById("log-path").textContent = t.log_tail ? "stored log tail" : "";
      return;
    }
    if (!streams.includes(sel.value)) sel.value = streams[0];
    const stream = sel.value;
    try {
      const lg = await api(base + "/log?lines=200&stream=" + stream);
      pre.textContent = lg.text || "(empty)";
      document.getElementById("log-path").textContent = lg.path;
    } catch (e) {
      pre.textContent = t && t.log_tail ? t.log_tail : "(" + e.message + ")";
      document.getElementById("log-path").textContent = t && t.log_tail ? "stored log tail" : "";
    }
  }
  try { await load(); } catch (e) { showMessage(e.message, true); return; }
  document.getElementById("log-stream").addEventListener("change", loadLog);
  document.getElementById("log-refresh").addEventListener("click", loadLog);
  await loadLog();
  document.body.dataset.ready = "1";
  while (!t.terminal) {
    await new Promise((r) => setTimeout(r, LIVE_MS));
    try { await load(); await loadLog(); } catch (e) { showMessage("live update failed: " + e.message, true); }
  }
}

/* Is a learning curve flat (two or more steps, one value)? */
function isConstant(c) {
  return c.value.length > 1 && c.value.every((v) => v === c.value[0]);
}

/* Learning curves: objectives first, then the other metrics; flat series folded into a closed <details>. */
function renderCurves(t) {
  const box = document.getElementById("curves");
  const names = Object.keys(t.curves);
  if (!names.length) { box.replaceChildren(el("p", { class: "muted", text: "No metrics logged yet." })); return; }
  const objs = (t.objectives || []).map((o) => o.name);
  names.sort((a, b) => {
    const ka = objs.includes(a) ? objs.indexOf(a) : objs.length, kb = objs.includes(b) ? objs.indexOf(b) : objs.length;
    return ka - kb || a.localeCompare(b);
  });
  const shown = names.filter((m) => !isConstant(t.curves[m]));
  const flat = names.filter((m) => isConstant(t.curves[m]));
  const plot = (div, m) => {
    const c = t.curves[m];
    Plotly.react(div, [{ type: "scatter", mode: c.step.length > 1 ? "lines+markers" : "markers", x: c.step, y: c.value, name: pesc(m) }],
      { title: { text: pesc(m + (objs.includes(m) ? " (objective)" : "")), font: { size: 13 } }, margin: { t: 35, r: 40, b: 40, l: 60 },
        xaxis: { title: { text: "step" } }, modebar: { orientation: "v" } },
      { displaylogo: false, responsive: true });
  };
  const wasOpen = Boolean(box.querySelector("details.folded[open]"));
  const divs = shown.map((m) => el("div", { "data-metric": m }));
  const children = [...divs];
  if (flat.length) {
    const flatDivs = flat.map((m) => el("div", { "data-metric": m }));
    const folded = el("details", { class: "folded", id: "constant-curves" },
      el("summary", { text: flat.length + " constant series: " + flat.map((m) => m + " = " + fmt(t.curves[m].value[0])).join(", ") }),
      el("div", { class: "curves" }, ...flatDivs));
    // plotted when opened: a closed <details> has no size to lay a plot out in
    folded.addEventListener("toggle", () => { if (folded.open) flat.forEach((m, k) => plot(flatDivs[k], m)); });
    folded.open = wasOpen;
    children.push(folded);
  }
  box.replaceChildren(...children);
  shown.forEach((m, k) => plot(divs[k], m));
}

function renderTimeline(t) {
  const ul = document.getElementById("timeline");
  ul.replaceChildren(...t.timeline.map((e) => el("li", {}, el("time", { text: shownTime(e.time) }), el("b", { text: e.kind + " " }), e.message)));
  const bars = [];
  const at = (s) => (s ? new Date(s) : null);
  const created = at(t.created_at);
  const colors = { user: "#d62728", infrastructure: "#ff7f0e", timeout: "#9467bd", cancelled: "#7f7f7f", unschedulable: "#8c564b" };
  // per attempt (a retried trial ran more than once): its waits in the scheduler's queue and its runs
  // (a requeued job waits again), from the server's segments; the gaps between attempts are waits to retry
  let last = created;
  const attempts = t.attempts || [];
  attempts.forEach((a) => {
    const start = at(a.started_at);
    const end = at(a.ended_at) || (t.terminal ? at(t.ended_at) : new Date());
    if (!start || !end) return;
    if (last && start > last) bars.push({ phase: a.number === 1 ? "waiting to start" : "waiting to retry", start: last, end: start, color: "#d9d2f5" });
    const pieces = (a.segments && a.segments.length) ? a.segments : [{ phase: "running", start: a.started_at, end: a.ended_at }];
    const runs = pieces.filter((p) => p.phase === "running").length;
    let run = 0;
    const prefix = attempts.length > 1 ? "attempt " + a.number + " " : "";
    pieces.forEach((p) => {
      const s = at(p.start), e = at(p.end) || end;
      if (!s || !e) return;
      if (p.phase === "queued") {
        bars.push({ phase: prefix + "queued by the scheduler", start: s, end: e, color: "#b7a6f0" });
        return;
      }
      run += 1;
      // a run's bar: how the attempt ended follows the arrow on its last run; earlier runs ended in a restart
      const lastRun = run === runs;
      const ended = lastRun ? (a.failure_class || (a.ended_at && t.terminal ? t.status.toLowerCase() : null)) : "restarted";
      const phase = prefix + "running" + (a.node ? " on " + a.node : "") + (ended ? " \u2192 " + ended : "");
      const color = !lastRun ? "#ffbb78" : colors[a.failure_class] || (a.ended_at && t.status === "COMPLETED" ? "#2ca02c" : "#2b6de0");
      bars.push({ phase, start: s, end: e, color });
    });
    last = end;
  });
  const secs = (b) => { const s = (b.end - b.start) / 1000; return s < 120 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min"; };
  // the legend above the plot, the ticks' date line below it: room for both, and for the "trial N" label
  Plotly.react("timeline-plot", bars.map((b) => ({ type: "bar", orientation: "h", y: ["trial " + t.index], base: [b.start.toISOString()],
    x: [b.end - b.start], name: b.phase, marker: { color: b.color }, hovertemplate: pesc(b.phase) + ": " + secs(b) + "<extra></extra>" })),
  { barmode: "stack", margin: { t: 10, r: 20, b: 60, l: 70 }, xaxis: { type: "date", automargin: true }, yaxis: { automargin: true },
    showlegend: true, legend: { orientation: "h", x: 0, y: 1.02, xanchor: "left", yanchor: "bottom" } },
  { displaylogo: false, responsive: true });
}

/* ------------------------------------------------------------------ diagnostics page */
async function diagnosticsPage() {
  const { name } = route();
  await setupHeader(name);
  document.getElementById("title").textContent = name + " · model diagnostics";
  let d;
  for (;;) {  // the server fits the model in the background and answers "computing" until it is done
    try { d = await api("/api/experiments/" + enc(name) + "/diagnostics"); }
    catch (e) { showMessage(e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : ""), true); return; }
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

function renderDiagnostics(d) {
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
      xaxis: { title: { text: "observed" } }, yaxis: { title: { text: "predicted (LOO)" } } }, { displaylogo: false, responsive: true });
  });
}

/* ------------------------------------------------------------------ start */
const PAGES = { experiments: experimentsPage, experiment: experimentPage, trial: trialPage, diagnostics: diagnosticsPage };
window.addEventListener("DOMContentLoaded", () => {
  const page = PAGES[document.body.dataset.page];
  if (page) page().then(() => {
    if (REPORT && REPORT.diagnostics) renderDiagnostics(REPORT.diagnostics);
  }).catch((e) => showMessage(String(e.message || e), true));
});
