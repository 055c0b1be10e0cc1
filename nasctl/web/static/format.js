/* Formatting: numbers, times, log-axis ticks, and escaping for plotly's label markup.
 *
 * User-supplied strings reach plotly labels only through pesc(); the DOM only through
 * textContent (dom.js's el()).
 */

/* Escape a string for plotly's label mini-markup. */
export function pesc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/* The text a pesc()-escaped label shows. */
export function unesc(s) { return String(s).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"); }

export function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") {
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
  }
  return String(v);
}

/* Ticks for a log axis over [lo, hi] (lo > 0), each labelled with its full value: 1-2-3-5-7
   within about a decade, 1-2-5 over two, 1-3 over three, powers of ten beyond. (plotly labels the ticks inside
   a decade with their first digit only: "2 3 4 5 6 7 8 9 100".) */
export function logTicks(lo, hi) {
  if (!(lo > 0) || !(hi >= lo)) return {};
  const d0 = Math.floor(Math.log10(lo)), d1 = Math.ceil(Math.log10(hi));
  const span = d1 - d0;
  const steps = span > 3 ? [1] : span > 2 ? [1, 3] : span > 1 ? [1, 2, 5] : [1, 2, 3, 5, 7];
  const label = (v) => String(Number(v.toPrecision(3)));
  let vals = [];
  for (let d = d0; d <= d1; d++) for (const m of steps) {
    const v = Number((m * Math.pow(10, d)).toPrecision(12));
    if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) vals.push(v);
  }
  if (vals.length < 2) vals = [lo, hi].map((v) => Number(v.toPrecision(3)));
  return { tickvals: vals, ticktext: vals.map(label) };
}

/* A time as a date: "2026-11-25T16:54:20.123Z" or epoch seconds -> "2026-11-25 16:54:20 UTC" (one zone everywhere). */
export function shownTime(t) {
  if (t === null || t === undefined || t === "") return "";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (isNaN(d)) return String(t);
  return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

/* A key/value cell: times (ISO strings, epoch seconds under a time-like key) as dates, the rest by fmt. */
const TIME_KEY = /(^|[_ .])(created|started|ended|submitted|updated|time|timestamp|at)$/i;
export function fmtKv(k, v) {
  if (TIME_KEY.test(k) && ((typeof v === "number" && v > 1e8 && v < 1e11) || (typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v)))) return shownTime(v);
  return fmt(v);
}

/* Trials by state, as "completed 8, failed 1". */
export function countsText(trials) {
  return Object.entries(trials || {}).filter(([, n]) => n > 0).map(([s, n]) => s.toLowerCase() + " " + n).join(", ");
}
