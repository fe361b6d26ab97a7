/**
 * `<tw-shell>`: the frame around every page. A header bar (the site's logo and name, the language and
 * theme switches, the signed-in user's name and Sign out) over a sidebar, `<nav aria-label=Main>`, with
 * the entries of the user's role in groups (pages.js `navigation`), and the content: a slot for a
 * site-wide banner, the status line, the `<main>` element pages draw into, and a slot for a footer.
 * Below 48rem wide the sidebar folds behind a "Menu" button. Signed out, and before the first-run setup,
 * there is no sidebar: the header and the page.
 */

import { h, replace, uid } from "./dom.js";
import { LANGUAGES, locale, t } from "./i18n.js";
import { navigation } from "./pages.js";
import { THEMES, chooseTheme, chosenTheme } from "./theme.js";

/** The switch's name of each theme, in the chosen language. */
const THEME_NAMES = { system: () => t("shell.theme.system"), light: () => t("shell.theme.light"),
  dark: () => t("shell.theme.dark") };

export class Shell extends HTMLElement {
  constructor() {
    super();
    this.logo = h("img", { class: "brand-logo", alt: "", hidden: true });
    this.siteName = h("span", { class: "brand-name" }, "Tollway");
    this.brand = h("a", { class: "brand", href: "/" }, this.logo, this.siteName);
    this.menu = h("button", {
      type: "button", class: "menu-toggle secondary", "aria-expanded": "false", "aria-controls": "site-nav",
      onclick: () => this.toggleMenu(),
    }, t("shell.menu"));
    this.nav = h("nav", { id: "site-nav", class: "sidebar", "aria-label": t("shell.mainNav"),
      onkeydown: (/** @type {KeyboardEvent} */ event) => {
        if (event.key !== "Escape" || this.menu.getAttribute("aria-expanded") !== "true") return;
        this.toggleMenu(false);  // the folded menu closes with Escape, the focus back on its button
        this.menu.focus();
      } });
    this.entries = h("div", { class: "sidebar-entries" });  // kept in view while the page scrolls
    this.nav.append(this.entries);
    this.languageLabel = h("label", { for: "language", class: "visually-hidden" }, t("shell.language"));
    this.language = h("select", { id: "language", class: "language",
      onchange: () => this.onLanguage(this.language.value) },
    Object.entries(LANGUAGES).map(([tag, { name }]) => h("option", { value: tag, lang: tag }, name)));
    this.language.value = locale();
    this.themeLabel = h("label", { for: "theme", class: "visually-hidden" }, t("shell.theme"));
    this.theme = h("select", { id: "theme", class: "theme",
      onchange: () => chooseTheme(/** @type {import("./theme.js").Theme} */ (this.theme.value)) });
    this.drawThemes();
    this.who = h("span", { class: "who" });
    this.signOut = h("button", { type: "button", class: "secondary", onclick: () => this.onSignOut() }, t("shell.signOut"));
    this.account = h("div", { class: "header-account", hidden: true }, this.who, this.signOut);
    this.skip = h("a", { class: "skip-link", href: "#main" }, t("shell.skip"));
    this.main = h("main", { id: "main", tabindex: "-1" }, h("p", { class: "loading" }, t("common.loading")));
    this.notice = h("div", { class: "notice", role: "status", "aria-live": "polite" });
    this.banner = h("div", { class: "site-banner" });
    this.footer = h("div", { class: "site-footer" });
    /** A message for the next page shown (after a redirect). */
    this.pending = "";
    /** Called when the user asks to sign out. */
    this.onSignOut = () => {};
    /** Called when the user picks a language in the switch (its tag). */
    this.onLanguage = (/** @type {string} */ _tag) => {};
  }

  connectedCallback() {
    if (this.contains(this.main)) return;
    this.classList.add("bare");
    replace(this,
      this.skip,
      h("header", { class: "top" }, this.menu, this.brand,
        h("div", { class: "header-tools" },
          h("div", { class: "switch" }, this.languageLabel, this.language),
          h("div", { class: "switch" }, this.themeLabel, this.theme),
          this.account)),
      h("div", { class: "frame" },
        this.nav,
        h("div", { class: "content" }, this.banner, this.notice, this.main, this.footer)));
  }

  /** The theme switch's choices, named in the chosen language, the remembered one chosen. */
  drawThemes() {
    replace(this.theme, THEMES.map((theme) => h("option", { value: theme }, THEME_NAMES[theme]())));
    this.theme.value = chosenTheme();
  }

  /** Name the shell's own controls again in the chosen language (the page and navigation are redrawn). */
  relabel() {
    this.menu.textContent = t("shell.menu");
    this.nav.setAttribute("aria-label", t("shell.mainNav"));
    this.languageLabel.textContent = t("shell.language");
    this.themeLabel.textContent = t("shell.theme");
    this.drawThemes();
    this.signOut.textContent = t("shell.signOut");
    this.skip.textContent = t("shell.skip");
    this.language.value = locale();
  }

  /** @param {string} name */
  setSiteName(name) {
    this.siteName.textContent = name;
  }

  /**
   * Show the site's logo before its name (an address the page may load: the console's policy allows
   * images of its own origin), or none.
   * @param {string | null} src
   */
  setLogo(src) {
    if (src) this.logo.setAttribute("src", src);
    else this.logo.removeAttribute("src");
    this.logo.hidden = !src;
  }

  /**
   * Put `node` (a site-wide notice, say) above every page, or nothing.
   * @param {Node | null} node
   */
  setBanner(node) {
    replace(this.banner, node);
  }

  /**
   * Put `node` (the site's footer, say: a `<footer>` element) below every page, or nothing.
   * @param {Node | null} node
   */
  setFooter(node) {
    replace(this.footer, node);
  }

  /**
   * Draw the sidebar for `user` with `currentPath` marked. Signed out (`user` null), and before the
   * first-run setup, there is none: the frame is bare.
   * @param {import("./types.js").SelfUser | null} user
   * @param {string} currentPath
   */
  setNav(user, currentPath) {
    this.classList.toggle("bare", !user);
    this.nav.hidden = !user;
    this.menu.hidden = !user;
    this.account.hidden = !user;
    if (user) {
      replace(this.entries, navigation(user.role).map((group) => {
        const id = uid("nav-group");
        return h("div", { class: "nav-group", role: "group", "aria-labelledby": id },
          h("span", { class: "nav-group-title", id }, group.title()),
          h("ul", { class: "nav-list" }, group.pages.map((page) => h("li", {},
            h("a", { href: page.path, "aria-current": page.path === currentPath ? "page" : false }, page.title())))));
      }));
      this.who.textContent = user.display_name || user.username;
    } else {
      replace(this.entries);
      this.who.textContent = "";
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
