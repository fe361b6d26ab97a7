/**
 * The texts root writes for everyone (Settings → the site): the `Notice` shown above every page to a
 * signed-in user, and the `Footer` below every page with a link to the About page. Both are drawn by
 * markdown.js (Markdown or allow-listed HTML, never markup of their own) and marked `server-text`: they
 * are the site's words, in whatever language root wrote them.
 *
 * A reader may dismiss the notice; it stays hidden in this browser until its text changes (the browser
 * keeps a digest of the dismissed text, not the text). Calls: `GET /api/notice` once per sign-in (or
 * console load when signed in); the footer costs none (`footer_html` comes with `GET /api/status`).
 */

import { h } from "../dom.js";
import { t } from "../i18n.js";
import { siteText } from "../markdown.js";

const DISMISSED = "tollway.notice.dismissed";

/**
 * A short digest of a text (FNV-1a, 32 bits, hex): enough to tell one notice from the next.
 * @param {string} text
 */
export function digest(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}

/**
 * The notice banner, or null when there is no notice or this browser dismissed this one.
 * @param {string} notice
 * @param {() => void} onDismiss  called after the reader dismissed it (to take the banner away)
 */
export function noticeBanner(notice, onDismiss) {
  if (!notice.trim()) return null;
  const id = digest(notice);
  try {
    if (window.localStorage.getItem(DISMISSED) === id) return null;
  } catch {
    // storage refused (a private window's policy): the notice is shown every time
  }
  const dismiss = () => {
    try {
      window.localStorage.setItem(DISMISSED, id);
    } catch {
      // not remembered: it comes back with the next load
    }
    onDismiss();
  };
  return h("aside", { class: "site-notice", "aria-label": t("notice.label") },
    h("div", { class: "site-text server-text" }, siteText(notice, t("notice.open"))),
    h("button", { type: "button", class: "secondary", onclick: dismiss }, t("notice.dismiss")));
}

/**
 * The footer: root's `Footer` text (when set), then a link to the About page.
 * @param {import("../site.js").Site} site
 */
export function siteFooter(site) {
  const text = site.status.footer_html;
  return h("footer", { class: "page-footer" },
    text.trim() ? h("div", { class: "site-text server-text" }, siteText(text, t("footer.open"))) : null,
    h("p", {}, h("a", { href: "/about" }, t("page.about"))));
}
