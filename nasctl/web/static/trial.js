/* The trial page: summary, parameters, values, job, the trial's own info, learning curves,
 * status timeline and log tail; live until the trial ends.
 */
import { LIVE_MS, api, enc, expUrl, post, route, state } from "./api.js";
import { PLOT_CONFIG, card, el, showMessage, statusBadge } from "./dom.js";
import { fmt, fmtKv, pesc, shownTime } from "./format.js";
import { setupHeader } from "./header.js";

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

export async function trialPage() {
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
      const r = await post(base + "/cancel");
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
      PLOT_CONFIG);
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
  PLOT_CONFIG);
}
