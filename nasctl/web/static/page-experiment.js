/* Entry module of the experiment page (/experiments/NAME), and of `nasctl report`, which inlines
 * this module with its imports (nasctl/web/bundle.py). */
import { REPORT } from "./api.js";
import { renderDiagnostics } from "./diagnostics.js";
import { start } from "./dom.js";
import { experimentPage } from "./experiment.js";
import { analysisPage } from "./insights.js";
import { experimentNotes } from "./manage.js";

const drawn = experimentPage();
start(
  async () => {
    await drawn;
    if (REPORT && REPORT.diagnostics) renderDiagnostics(REPORT.diagnostics);  // the report's own diagnostics section
  },
  () => analysisPage(drawn),
  experimentNotes,
);
