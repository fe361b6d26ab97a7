/** The page of an address the console does not have. */

import { h, replace } from "../dom.js";
import { heading } from "../forms.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main }) {
  replace(main, heading("Page not found"),
    h("p", {}, "The console has no page at this address. ", h("a", { href: "/" }, "Go to the start page.")));
}
