/* The experiment page's trial table: sortable columns, status and metric filters, pages of rows
 * (in a report: sorted and filtered by status here, from the embedded rows).
 */
import { REPORT, api, enc, trialUrl } from "./api.js";
import { el, errorText, showMessage, statusBadge } from "./dom.js";
import { X, axisChoices } from "./exp-state.js";
import { fmt } from "./format.js";

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

export async function loadTable() {
  const name = X.summary.name;
  // Clicks can start a load while another is on its way: only the newest one draws
  // (a slower, older answer would otherwise show rows sorted the old way under the new header).
  const seq = X.tableSeq = (X.tableSeq || 0) + 1;
  let page;
  if (REPORT) page = reportTablePage();
  else {
    try { page = await api("/api/experiments/" + enc(name) + "/trials?" + tableQuery().toString()); }
    catch (e) {
      if (seq === X.tableSeq) { showMessage(errorText(e), true); X.tableError = true; }
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
