/* nasctl dashboard: notes on experiments and trials, rename and delete.
 *
 * Loaded after app.js and uses its helpers (api, el, state, route, REPORT).
 * Notes are markdown rendered by `renderMarkdown` into DOM nodes built one by
 * one with textContent: no note text ever reaches innerHTML, so a note cannot
 * inject markup or script. Links keep only http(s), mailto and same-site targets.
 */
"use strict";

const SAFE_HREF = /^(https?:\/\/|mailto:|\/(?!\/)|#|\.{1,2}\/)/i;
const INLINE = /(`+)([^`]+?)\1|\*\*([^*]+)\*\*|(?<![\w])__([^_]+)__(?![\w])|\*([^*\s][^*]*)\*|(?<![\w])_([^_\s][^_]*)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)\)/g;

/* Inline markdown (code, bold, italics, links) of one line, appended to `parent`. */
function mdInline(parent, text) {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    if (m[2] !== undefined) parent.appendChild(el("code", { text: m[2] }));
    else if (m[3] !== undefined || m[4] !== undefined) mdInline(parent.appendChild(el("strong")), m[3] !== undefined ? m[3] : m[4]);
    else if (m[5] !== undefined || m[6] !== undefined) mdInline(parent.appendChild(el("em")), m[5] !== undefined ? m[5] : m[6]);
    else if (SAFE_HREF.test(m[8])) parent.appendChild(el("a", { href: m[8], text: m[7], rel: "noopener noreferrer nofollow", target: "_blank" }));
    else parent.appendChild(document.createTextNode(m[0]));  // an unsafe target (javascript:, data:) stays text
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  return parent;
}

/* Markdown (a common subset: headings, paragraphs, lists, quotes, fenced code, rules) as a <div>. */
function renderMarkdown(text) {
  const root = el("div", { class: "markdown" });
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  let para = null, list = null;
  const close = () => { para = null; list = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m;
    if (/^\s*```/.test(line)) {
      close();
      const body = [];
      for (i++; i < lines.length && !/^\s*```/.test(lines[i]); i++) body.push(lines[i]);
      root.appendChild(el("pre", {}, el("code", { text: body.join("\n") })));
    } else if (!line.trim()) {
      close();
    } else if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
      close();
      root.appendChild(mdInline(el("h" + Math.min(6, m[1].length + 2)), m[2]));
    } else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      close();
      root.appendChild(el("hr"));
    } else if ((m = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line))) {
      const tag = m[1] ? "ul" : "ol";
      if (!list || list.tagName.toLowerCase() !== tag) { para = null; list = root.appendChild(el(tag)); }
      mdInline(list.appendChild(el("li")), m[3]);
    } else if ((m = /^>\s?(.*)$/.exec(line))) {
      close();
      root.appendChild(mdInline(el("blockquote"), m[1]));
    } else {
      list = null;
      if (para) para.appendChild(el("br")); else para = root.appendChild(el("p"));
      mdInline(para, line);
    }
  }
  return root;
}

/* The note panel: rendered note, and (with a token) an editor that saves with PUT. */
async function notePanel(box, url) {
  let note = { text: null, updated_at: null };
  try { note = await api(url); } catch (e) { if (!REPORT) box.replaceChildren(el("p", { class: "error", text: e.message })); }
  function view() {
    const parts = [];
    if (note.text) parts.push(renderMarkdown(note.text));
    else parts.push(el("p", { class: "muted", text: REPORT ? "No note." : "No note yet." + (state.readOnly ? "" : " Notes are markdown.") }));
    if (note.updated_at) parts.push(el("p", { class: "muted small", text: "edited " + shownTime(note.updated_at) }));
    if (!REPORT && !state.readOnly) parts.push(el("button", { type: "button", class: "note-edit", text: note.text ? "edit note" : "add note", onclick: edit }));
    box.replaceChildren(...parts);
    box.dataset.ready = "1";
  }
  function edit() {
    const area = el("textarea", { class: "note-text", rows: 8, placeholder: "markdown: **bold**, *italic*, `code`, - lists, [links](https://…)" });
    area.value = note.text || "";
    const status = el("span", { class: "muted" });
    async function save() {
      try {
        note = await api(url, { method: "PUT", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: area.value }) });
        view();
      } catch (e) { status.textContent = e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : ""); status.className = "error"; }
    }
    box.replaceChildren(area, el("div", { class: "controls" },
      el("button", { type: "button", class: "note-save", text: "save", onclick: save }),
      el("button", { type: "button", text: "cancel", onclick: view }), status));
    area.focus();
  }
  view();
}

/* Rename and delete, for a dashboard started with a token. */
function managePanel(box, name) {
  const input = el("input", { id: "rename-to", value: name, size: 28, "aria-label": "new name" });
  const files = el("input", { type: "checkbox", id: "delete-files" });
  const out = el("span", { id: "manage-message", class: "muted" });
  const fail = (e) => { out.textContent = e.message + (e.body && e.body.hint ? " (" + e.body.hint + ")" : ""); out.className = "error"; };
  async function rename() {
    const to = input.value.trim();
    if (!to || to === name) return;
    if (!confirm("Rename experiment " + name + " to " + to + "? Its files stay where they are.")) return;
    try {
      await api("/api/experiments/" + enc(name) + "/rename", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: to }) });
      location.href = expUrl(to);
    } catch (e) { fail(e); }
  }
  async function remove() {
    const what = "experiment " + name + " with all its trials, metrics, events and notes" + (files.checked ? ", and its work directory" : "");
    if (!confirm("Delete " + what + "? This cannot be undone.")) return;
    try {
      const r = await api("/api/experiments/" + enc(name) + (files.checked ? "?files=true" : ""), { method: "DELETE" });
      const kept = r.files_error || r.files_kept_because;
      location.href = "/?deleted=" + enc(name) + (r.removed_files ? "&files=" + enc(r.removed_files) : "") + (kept ? "&kept=" + enc(kept) : "");
    } catch (e) { fail(e); }
  }
  box.replaceChildren(
    el("div", { class: "controls" }, el("label", {}, "new name ", input), el("button", { type: "button", id: "rename", text: "rename", onclick: rename })),
    el("div", { class: "controls" }, el("label", {}, files, " also delete its work directory"),
      el("button", { type: "button", class: "danger", id: "delete", text: "delete experiment", onclick: remove })),
    out);
  box.closest("section").hidden = false;
}

async function managePage() {
  const page = document.body.dataset.page;
  const box = document.getElementById("note");
  if (!box && page !== "experiments") return;
  if (!REPORT) {
    try { state.readOnly = (await api("/api/info")).read_only; } catch (e) { state.readOnly = true; }
  }
  const { name, index } = route();
  if (page === "experiments") {
    const q = new URLSearchParams(location.search);
    if (q.get("deleted")) {
      const kept = q.get("kept"), files = q.get("files");
      const m = el("p", { id: "deleted-note", class: kept ? "error" : "muted",
        text: "Deleted experiment " + q.get("deleted") + (files ? " and its folder " + files : "") + "." + (kept ? " Its files were kept: " + kept : "") });
      document.querySelector("main").insertBefore(m, document.querySelector("main").firstChild);
    }
    return;
  }
  const base = "/api/experiments/" + enc(name);
  await notePanel(box, page === "trial" ? base + "/trials/" + index + "/note" : base + "/note");
  const manage = document.getElementById("manage");
  if (manage && !REPORT && !state.readOnly) managePanel(manage, name);
}

window.addEventListener("DOMContentLoaded", () => {
  managePage().catch((e) => showMessage(String(e.message || e), true));
});
