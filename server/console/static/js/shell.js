/**
 * `<tw-shell>`: the frame around every page — the site's name, the navigation of the signed-in user's
 * role, sign out, the language switch, and the `<main>` element pages draw into. Below 48rem wide the
 * navigation folds behind a "Menu" button.
 */

import { h, replace } from "./dom.js";
import { LANGUAGES, locale, t } from "./i18n.js";
import { LEAST_ROLE, PAGES } from "./pages.js";

export class Shell extends HTMLElement {
  constructor() {
    super();
    this.brand = h("a", { class: "brand", href: "/" }, "Tollway");
    this.menu = h("button", {
      type: "button", class: "menu-toggle", "aria-expanded": "false", "aria-controls": "site-nav",
      onclick: () => this.toggleMenu(),
    }, t("shell.menu"));
    this.list = h("ul", { class: "nav-list" });
    this.account = h("div", { class: "nav-account" });
    this.nav = h("nav", { id: "site-nav", class: "site-nav", "aria-label": t("shell.mainNav") }, this.list, this.account);
    this.languageLabel = h("label", { for: "language", class: "visually-hidden" }, t("shell.language"));
    this.language = h("select", { id: "language", class: "language",
      onchange: () => this.onLanguage(this.language.value) },
    Object.entries(LANGUAGES).map(([tag, { name }]) => h("option", { value: tag, lang: tag }, name)));
    this.language.value = locale();
    this.skip = h("a", { class: "skip-link", href: "#main" }, t("shell.skip"));
    this.main = h("main", { id: "main", tabindex: "-1" }, h("p", { class: "loading" }, t("common.loading")));
    this.notice = h("div", { class: "notice", role: "status", "aria-live": "polite" });
    /** A message for the next page shown (after a redirect). */
    this.pending = "";
    /** Called when the user asks to sign out. */
    this.onSignOut = () => {};
    /** Called when the user picks a language in the switch (its tag). */
    this.onLanguage = (/** @type {string} */ _tag) => {};
  }

  connectedCallback() {
    if (this.contains(this.main)) return;
    replace(this,
      this.skip,
      h("header", { class: "top" }, this.brand,
        h("div", { class: "language-switch" }, this.languageLabel, this.language), this.menu, this.nav),
      this.notice,
      this.main);
  }

  /** Name the shell's own controls again in the chosen language (the page and navigation are redrawn). */
  relabel() {
    this.menu.textContent = t("shell.menu");
    this.nav.setAttribute("aria-label", t("shell.mainNav"));
    this.languageLabel.textContent = t("shell.language");
    this.skip.textContent = t("shell.skip");
    this.language.value = locale();
  }

  /** @param {string} name */
  setSiteName(name) {
    this.brand.textContent = name;
  }

  /**
   * Draw the navigation for `user` (null: signed out) with `currentPath` marked; none before the
   * first-run setup (`setUp` false), when there is nothing to sign in to.
   * @param {import("./types.js").SelfUser | null} user
   * @param {string} currentPath
   * @param {boolean} setUp
   */
  setNav(user, currentPath, setUp) {
    /** @param {string} path @param {string} label */
    const entry = (path, label) => h("li", {},
      h("a", { href: path, "aria-current": path === currentPath ? "page" : false }, label));
    if (user) {
      const entries = PAGES.filter((page) => page.nav && page.access in LEAST_ROLE
        && user.role >= LEAST_ROLE[/** @type {"user" | "admin" | "root"} */ (page.access)]);
      replace(this.list, entries.map((page) => entry(page.path, page.title())));
      replace(this.account,
        h("span", { class: "who" }, user.display_name || user.username),
        h("button", { type: "button", class: "secondary", onclick: () => this.onSignOut() }, t("shell.signOut")));
    } else if (!setUp) {
      replace(this.list);
      replace(this.account);
    } else {
      replace(this.list, entry("/login", t("page.login")), entry("/register", t("page.register")));
      replace(this.account);
    }
    this.toggleMenu(false);
  }

  /** @param {boolean} [open] */
  toggleMenu(open) {
    const next = open ?? this.menu.getAttribute("aria-expanded") !== "true";
    this.menu.setAttribute("aria-expanded", String(next));
    this.nav.classList.toggle("open", next);
  }

  /**
   * Show a short message in the status line (announced to screen readers).
   * @param {string} text
   */
  say(text) {
    this.notice.textContent = text;
    if (text) document.dispatchEvent(new CustomEvent("tw-said", { detail: text }));  // shown by the row acted on too
  }

  /**
   * Keep a message for the next page shown.
   * @param {string} text
   */
  flash(text) {
    this.pending = text;
  }

  /** Clear the status line, then show a message kept for this page, if any. */
  startPage() {
    this.say(this.pending);
    this.pending = "";
  }
}

customElements.define("tw-shell", Shell);
