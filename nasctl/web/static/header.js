/* The page header: links to the experiment, the report's date, and the token field or the
 * read-only notice. access() asks the server once per page whether it takes writes.
 */
import { REPORT, api, expUrl, state } from "./api.js";
import { el } from "./dom.js";

let asked = null;

/* Whether this server takes writes (`readOnly`), is `nasctl serve` (`service`: experiments can be
 * resumed) and, for a standby service, where writes go (`standby`); copied into api.js's state.
 * Asked once per page: every part of the page awaits the same answer. */
export function access() {
  if (!asked) asked = askAccess();
  return asked;
}

async function askAccess() {
  const out = { readOnly: true, service: false, standby: null };
  if (!REPORT) {
    try {
      const info = await api("/api/info");
      out.readOnly = info.read_only;
      out.service = info.service;
    } catch (e) { out.readOnly = true; out.service = false; }
    if (out.service) {  // only `nasctl serve` has /api/service: `nasctl web` is not asked (no 404 logged)
      try {
        const svc = await api("/api/service");
        if (svc.role === "standby") {  // a standby refuses writes: they go to the active service
          out.readOnly = true;
          out.standby = (svc.active_service && svc.active_service.url) || "the active service";
        }
      } catch (e) { /* the role stays unknown: writes are answered by the service itself */ }
    }
  }
  state.readOnly = out.readOnly;
  state.service = out.service;
  return out;
}

/* Fill the header's nav (links for experiment `name`, if any) and its auth corner. */
export async function setupHeader(name) {
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
  const { readOnly, standby } = await access();
  const auth = document.getElementById("auth");
  if (standby) { auth.textContent = "standby (read-only): changes go to " + standby; return; }
  if (readOnly) { auth.textContent = "read-only"; return; }
  const input = el("input", { type: "password", placeholder: "token", size: 14, id: "token-input" });
  input.value = state.token;
  input.addEventListener("change", () => { state.token = input.value; sessionStorage.setItem("nasctl-token", input.value); });
  auth.appendChild(el("label", {}, "token ", input));
}
