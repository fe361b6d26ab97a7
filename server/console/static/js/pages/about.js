/**
 * About (`/about`, anyone, linked from every page's footer): the site's `About` option as root wrote it —
 * Markdown, HTML (copied through markdown.js's allow-list) or an address, shown as a link to it (the
 * console frames no other site). An empty option says there is no such page yet. Calls: `GET /api/about`.
 */

import { h, replace } from "../dom.js";
import { heading } from "../forms.js";
import { t } from "../i18n.js";
import { siteText } from "../markdown.js";

/** @param {import("../types.js").PageContext} ctx */
export async function render({ main, api }) {
  /** @type {string} */
  const about = await api.get("/api/about");
  replace(main, heading(t("page.about")),
    about.trim()
      ? h("div", { class: "site-text server-text" }, siteText(about, t("about.open")))
      : h("p", {}, t("about.none")));
}
