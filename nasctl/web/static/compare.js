/* Comparing experiments: links to comparisons on the experiments page, and the compare page
 * (hypervolume over trials and Pareto fronts against one common reference point).
 */
import { api, enc, expUrl } from "./api.js";
import { OBJ_COLORS, PLOT_CONFIG, el, errorText, fillSelect, showMessage, statusBadge } from "./dom.js";
import { fmt, pesc } from "./format.js";
import { setupHeader } from "./header.js";

/* ------------------------------------------------------------------ experiments page: pick experiments to compare */
export async function comparePicker() {
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
export async function comparePage() {
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
  catch (e) { showMessage(errorText(e), true); return; }
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
