/* The experiments list (the dashboard's home page), refreshed every 5 s. */
import { REPORT, api, expUrl } from "./api.js";
import { el, progressBar, showMessage, statusBadge } from "./dom.js";
import { countsText, fmt, shownTime } from "./format.js";
import { setupHeader } from "./header.js";

export async function experimentsPage() {
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
