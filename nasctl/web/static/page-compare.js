/* Entry module of the compare page (/compare?names=A&names=B). */
import { comparePage } from "./compare.js";
import { start } from "./dom.js";

start(comparePage);
