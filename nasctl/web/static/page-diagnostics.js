/* Entry module of the model diagnostics page (/experiments/NAME/diagnostics). */
import { diagnosticsPage } from "./diagnostics.js";
import { start } from "./dom.js";

start(diagnosticsPage);
