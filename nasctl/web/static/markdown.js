/* Notes' markdown, rendered safely.
 *
 * renderMarkdown builds DOM nodes one by one with textContent: no note text ever reaches
 * innerHTML, so a note cannot inject markup or script. Links keep only http(s), mailto and
 * same-site targets.
 */
import { el } from "./dom.js";

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
export function renderMarkdown(text) {
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
