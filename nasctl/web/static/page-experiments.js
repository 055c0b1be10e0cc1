/* Entry module of the experiments page (/): the list, links to comparisons, the notice after a delete. */
import { comparePicker } from "./compare.js";
import { start } from "./dom.js";
import { experimentsPage } from "./experiments.js";
import { deletedNotice } from "./manage.js";

start(experimentsPage, comparePicker, deletedNotice);
