/* The experiment page: summary cards, stop and resume, Pareto plot, hypervolume, trial table,
 * parallel coordinates and events, kept live by asking for changes every LIVE_MS.
 * The analysis views below them are insights.js's.
 */
import { LIVE_MS, REPORT, api, enc, post, route, state } from "./api.js";
import { PLOT_CONFIG, card, el, errorText, fillSelect, progressBar, showMessage, statusBadge } from "./dom.js";
import { X, axisChoices } from "./exp-state.js";
import { countsText, fmt, pesc, shownTime, unesc } from "./format.js";
import { setupHeader } from "./header.js";
import { renderPareto } from "./pareto.js";
import { loadTable } from "./trials-table.js";

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
    await post("/api/experiments/" + enc(X.summary.name) + "/resume");
    showMessage("queued: the service resumes the experiment as soon as a slot is free");
  } catch (e) { showMessage(e.message, true); }
}

async function stopExperiment() {
  if (!confirm("Stop " + X.summary.name + "?")) return;
  try {
    const r = await post("/api/experiments/" + enc(X.summary.name) + "/stop");
    showMessage(r.requested
      ? "stop requested: the orchestrator stops at its next loop step; running trials keep running until `nasctl resume` re-attaches them"
      : "stopped: no orchestrator was running it; running trials keep running until `nasctl resume` re-attaches them");
  } catch (e) { showMessage(e.message, true); }
}

function setPoints(p) {
  X.pts = p;
  X.pos = new Map(p.index.map((i, k) => [i, k]));
}

function renderHv() {
  const h = X.hv;
  Plotly.react("hv", [{ type: h.trial_index.length > 3000 ? "scattergl" : "scatter", mode: "lines", line: { shape: "hv", color: "#2b6de0" },
    x: h.trial_index, y: h.hypervolume, name: "hypervolume", hovertemplate: "after trial %{x}: %{y}<extra></extra>" }],
  { margin: { t: 10, r: 10, b: 45, l: 70 }, xaxis: { title: { text: "trial index" } }, yaxis: { title: { text: "hypervolume" } } },
  PLOT_CONFIG);
}

function mergeHv(tail) {
  if (!tail.trial_index.length) return;
  const first = tail.trial_index[0];
  const keep = X.hv.trial_index.findIndex((i) => i >= first);
  const cut = keep < 0 ? X.hv.trial_index.length : keep;
  X.hv = { trial_index: X.hv.trial_index.slice(0, cut).concat(tail.trial_index), hypervolume: X.hv.hypervolume.slice(0, cut).concat(tail.hypervolume) };
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
  { margin: { t: upright ? 30 + longest : 40, r: 60, b: 20, l: 60 } }, PLOT_CONFIG);
}

function renderEvents(list, prepend) {
  const ul = document.getElementById("events");
  const items = list.map((e) => el("li", {}, el("time", { text: shownTime(e.time) }), e.message));
  if (prepend) { for (const it of items) ul.insertBefore(it, ul.firstChild); }
  else ul.replaceChildren(...items.reverse());
  while (ul.children.length > 200) ul.removeChild(ul.lastChild);
}

export async function experimentPage() {
  const { name } = route();
  await setupHeader(name);
  const base = "/api/experiments/" + enc(name);
  try {
    X.summary = await api(base);
  } catch (e) { showMessage(errorText(e), true); return; }
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
