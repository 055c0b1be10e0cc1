/* DOM helpers shared by every page: elements built with textContent only, the page's
 * message line, badges and cards, plot settings, and start(), which runs a page's parts.
 *
 * `Plotly` is the one global the modules use: plotly.min.js, loaded as a classic script
 * before each page's entry module (nasctl/web/pages.py), defines it.
 */

/* An element: attributes (`class`, `text` as textContent, `on*` listeners) and children (strings become text nodes). */
export function el(tag, attrs, ...children) {
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

export function showMessage(text, isError) {
  const m = document.getElementById("message");
  if (!m) return;
  m.textContent = text || "";
  m.className = isError ? "error" : "muted";
}

/* An API error's message with the server's hint, when it gave one. */
export function errorText(e) {
  return e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : "");
}

export function statusBadge(s) { return el("span", { class: "status " + s, text: s }); }

export function card(k, v) { return el("div", { class: "card" }, el("div", { class: "k", text: k }), el("div", { class: "v" }, v)); }

export function progressBar(p) {
  const bar = el("span", { class: "bar" }, el("span"));
  bar.firstChild.style.width = Math.round(100 * (p || 0)) + "%";
  return bar;
}

export function fillSelect(sel, names, chosen) {
  sel.replaceChildren(...names.map((n) => el("option", { value: n, text: n, selected: n === chosen })));
}

/* The plotly config of every plot. */
export const PLOT_CONFIG = { displaylogo: false, responsive: true };

/* One colour per objective or experiment. */
export const OBJ_COLORS = ["#2b6de0", "#e4572e", "#17a673", "#8e44ad", "#f1a208", "#1b998b", "#c5283d", "#3d5a80"];

/* Run a page's parts (async functions) side by side; a part that fails shows its error in the message line. */
export function start(...parts) {
  for (const part of parts) part().catch((e) => showMessage(String(e.message || e), true));
}
