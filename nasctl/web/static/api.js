/* The JSON API client: the token, errors, routes and URLs.
 *
 * In a report (`nasctl report`) there is no server: the answers are embedded in the page
 * as a JSON block (a script element of type application/json, id "nasctl-report"), and api() reads them.
 */

function embeddedReport() {
  const block = document.getElementById("nasctl-report");
  return block ? JSON.parse(block.textContent) : null;
}

/* The report's data (name, generated_at, data by API path, trials, diagnostics), or null on the live dashboard. */
export const REPORT = embeddedReport();

/* How often live pages ask for changes (ms). */
export const LIVE_MS = 2000;

/* What this browser tab knows about the server: the token it sends, and (set by header.js's access())
 * whether writes are refused and whether the server is `nasctl serve`. */
export const state = { readOnly: true, service: false, token: sessionStorage.getItem("nasctl-token") || "" };

export function enc(s) { return encodeURIComponent(s); }
export function expUrl(name) { return "/experiments/" + enc(name); }
export function trialUrl(name, index) { return expUrl(name) + "/trials/" + index; }

export class ApiError extends Error {
  constructor(status, body) { super((body && body.error) || ("HTTP " + status)); this.status = status; this.body = body; }
}

export async function api(path, options) {
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

/* POST a JSON body (an empty object by default). */
export function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
}

/* The experiment (and trial) this page shows, from its path (or the report). */
export function route() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (REPORT) return { name: REPORT.name };
  return { name: parts[1], index: parts[2] === "trials" ? Number(parts[3]) : null };
}
