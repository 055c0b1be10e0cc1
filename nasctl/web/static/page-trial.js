/* Entry module of the trial page (/experiments/NAME/trials/I). */
import { start } from "./dom.js";
import { trialNotes } from "./manage.js";
import { trialPage } from "./trial.js";

start(trialPage, trialNotes);
