/* The experiment page's state, shared by its modules (experiment, pareto, trials-table, selection, insights).
 *
 * X: what the page shows: summary, points (pts, and pos: trial index -> position), hypervolume
 *    history (hv), change cursor, the table's page, parallel-coordinates data (par).
 * A: the analysis views: history, importance, parallel data with its categorical columns,
 *    log-scaled parameters, the Pareto plot's options, the linked selection (a Set of trial
 *    indices, or null) and the filters each plot wrote into the filter box (auto).
 */
import { enc } from "./api.js";

export const X = { summary: null, pts: null, pos: new Map(), hv: null, cursor: 0, page: { offset: 0, sort: "index", desc: false } };

export const A = { par: null, importance: null, history: null, selection: null, auto: { parallel: {}, pareto: {} }, options: null };

/* The experiment's API path. */
export function apiBase() { return "/api/experiments/" + enc(X.summary.name); }

export function objNames() { return X.summary.objectives.map((o) => o.name); }

export function goalOf(m) { const o = X.summary.objectives.find((q) => q.name === m); return o ? o.goal : null; }

/* What the Pareto plot's axes can show: the objectives, then the other metrics. */
export function axisChoices(s) {
  const names = s.objectives.map((o) => o.name);
  for (const m of s.metrics) if (!names.includes(m)) names.push(m);
  return names;
}
