/** The page of an address the console does not have. */

import { h, replace } from "../dom.js";
import { heading } from "../forms.js";
import { t } from "../i18n.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main }) {
  replace(main, heading(t("page.notFound")),
    h("p", {}, t("notFound.text"), h("a", { href: "/" }, t("notFound.start"))));
}
