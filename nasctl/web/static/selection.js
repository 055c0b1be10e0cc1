/* The experiment page's linked selection: parallel-coordinates brushing and Pareto box selection
 * write filters into the table's filter box; the filters select trials (the server answers which),
 * the Pareto plot greys the others, and the selection downloads as CSV.
 */
import { api } from "./api.js";
import { el } from "./dom.js";
import { A, X, apiBase, objNames } from "./exp-state.js";
import { unesc } from "./format.js";
import { renderPareto } from "./pareto.js";
import { loadTable } from "./trials-table.js";

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

export async function updateSelection() {
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
      return;  // the table's load (trials-table.js) shows the error
    }
  }
  renderPareto();
}

export function setupSelection() {
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
