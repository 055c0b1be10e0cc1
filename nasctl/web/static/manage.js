/* Notes on experiments and trials (markdown.js renders them), rename and delete, and the
 * experiments page's notice after a delete. Editing needs a dashboard started with a token.
 */
import { REPORT, api, enc, expUrl, post, route, state } from "./api.js";
import { el, errorText } from "./dom.js";
import { shownTime } from "./format.js";
import { access } from "./header.js";
import { renderMarkdown } from "./markdown.js";

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
      } catch (e) { status.textContent = errorText(e); status.className = "error"; }
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
  const fail = (e) => { out.textContent = errorText(e); out.className = "error"; };
  async function rename() {
    const to = input.value.trim();
    if (!to || to === name) return;
    if (!confirm("Rename experiment " + name + " to " + to + "? Its files stay where they are.")) return;
    try {
      await post("/api/experiments/" + enc(name) + "/rename", { name: to });
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

/* The experiment page's note and, with a token, its manage panel. */
export async function experimentNotes() {
  const { name } = route();
  const { readOnly } = await access();
  await notePanel(document.getElementById("note"), "/api/experiments/" + enc(name) + "/note");
  if (!REPORT && !readOnly) managePanel(document.getElementById("manage"), name);
}

/* The trial page's note. */
export async function trialNotes() {
  const { name, index } = route();
  await access();
  await notePanel(document.getElementById("note"), "/api/experiments/" + enc(name) + "/trials/" + index + "/note");
}

/* The experiments page after a delete (manage panel's redirect): what was deleted, and any files kept. */
export async function deletedNotice() {
  const q = new URLSearchParams(location.search);
  if (!q.get("deleted")) return;
  const kept = q.get("kept"), files = q.get("files");
  const m = el("p", { id: "deleted-note", class: kept ? "error" : "muted",
    text: "Deleted experiment " + q.get("deleted") + (files ? " and its folder " + files : "") + "." + (kept ? " Its files were kept: " + kept : "") });
  document.querySelector("main").insertBefore(m, document.querySelector("main").firstChild);
}
