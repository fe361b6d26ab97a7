/**
 * The console's entry point: read the site's settings and who is signed in, then show the page of the
 * address — or the page that must come first (the first-run setup on a server never set up, sign-in for
 * a page that needs it).
 *
 * At load this costs two `/api` calls (`GET /api/status`, and `GET /api/user/self` when a user id is
 * remembered), and `GET /api/notice` once per signed-in user (the site's notice, widgets/site-texts.js);
 * each page then makes its own (docs/CONSOLE.md counts them). Nothing polls. The site's logo and footer
 * come with the status.
 */

import { Api } from "./api.js";
import { h, replace } from "./dom.js";
import { heading } from "./forms.js";
import { LEAST_ROLE, NOT_FOUND, nextOf, pageAt } from "./pages.js";
import { Router } from "./router.js";
import { Session } from "./session.js";
import { Shell } from "./shell.js";
import { Site } from "./site.js";
import { safeHref } from "./markdown.js";
import { noticeBanner, siteFooter } from "./widgets/site-texts.js";
import { setLanguage, t } from "./i18n.js";

/** @param {URL} url */
function signInFor(url) {
  const here = url.pathname + url.search;
  return here === "/" ? "/login" : `/login?next=${encodeURIComponent(here)}`;
}

async function boot() {
  const shell = document.querySelector("tw-shell");
  if (!(shell instanceof Shell)) throw new Error("the page has no <tw-shell>");
  const api = new Api();
  const session = new Session(api);
  /** @type {Site} */
  let site;
  try {
    site = await Site.load(api);
    await session.restore();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    replace(shell.main, heading(t("main.cannotStart")), h("p", { role: "alert" }, message),
      h("button", { type: "button", onclick: () => window.location.reload() }, t("common.tryAgain")));
    return;
  }
  shell.setSiteName(site.name);
  const logo = safeHref(site.status.logo);
  shell.setLogo(logo && !logo.startsWith("mailto:") ? logo : null);
  shell.setFooter(siteFooter(site));

  /** The notice: of which user it was read for (0: none), and its text ("" once dismissed or unset). */
  const notice = { user: 0, text: "" };
  const drawNotice = () => shell.setBanner(noticeBanner(notice.text, () => {
    notice.text = "";
    shell.setBanner(null);
  }));
  /** Read the notice once per signed-in user (none when signed out), and show it above every page. */
  const readNotice = async () => {
    const user = session.user?.id ?? 0;
    if (user === notice.user) return;
    Object.assign(notice, { user, text: "" });
    shell.setBanner(null);
    if (!user) return;
    try {
      /** @type {string} */
      const text = await api.get("/api/notice");
      if (notice.user !== user) return;  // signed out (or in as another) meanwhile
      notice.text = text;
      drawNotice();
    } catch {
      // no notice shown: every page works without it
    }
  };
  let shown = 0;
  let first = true;

  /** @param {URL} url */
  const show = async (url) => {
    const sequence = ++shown;
    const page = pageAt(url.pathname) ?? NOT_FOUND;
    let redirect = "";
    if (!site.status.setup) redirect = page.path === "/setup" ? "" : "/setup";
    else if (page.access === "setup") redirect = "/";
    else if (page.access === "guest" && session.user) redirect = nextOf(url);
    else if (page.access in LEAST_ROLE && !session.user) redirect = signInFor(url);
    if (redirect) {
      await router.go(redirect, { replace: true });
      return;
    }
    shell.setNav(session.user, page.path);
    void readNotice();
    document.title = `${page.title()} · ${site.name}`;
    shell.startPage();
    for (const open of document.querySelectorAll("dialog[open]")) {
      if (open instanceof HTMLDialogElement) open.close();  // a dialog of the page left (or of a session ended)
    }
    const main = h("div", { class: "page" });  // a page still loading draws into its own, detached, element
    replace(shell.main, main);
    const least = LEAST_ROLE[/** @type {"user" | "admin" | "root"} */ (page.access)] ?? 0;
    try {
      if (session.role < least) {
        const why = { user: () => t("main.forbidden.user"), admin: () => t("main.forbidden.admin"),
          root: () => t("main.forbidden.root") }[/** @type {"user" | "admin" | "root"} */ (page.access)];
        replace(main, heading(t("main.notAllowed")), h("p", {}, why()));
      } else {
        const module = await page.load();
        if (sequence !== shown) return;
        await module.render({ main, api, session, site, router, shell, url });
      }
    } catch (error) {
      if (sequence !== shown) return;
      const message = error instanceof Error ? error.message : String(error);
      replace(main, heading(page.title()), h("p", { class: "form-error", role: "alert" }, message));
    }
    if (sequence !== shown) return;
    if (!first) main.querySelector("h1")?.focus();
    first = false;
  };

  const router = new Router(show);
  api.onSignedOut = () => {
    session.forget();
    shell.flash(t("main.sessionEnded"));
    void router.go(signInFor(new URL(window.location.href)), { replace: true });
  };
  shell.onLanguage = (tag) => {
    setLanguage(tag);
    shell.relabel();
    shell.setFooter(siteFooter(site));  // their own words are the site's, their labels the catalogue's
    if (notice.text) drawNotice();
    void router.show(new URL(window.location.href));  // the page drawn again, in the new language
  };
  shell.onSignOut = async () => {
    try {
      await session.signOut();
    } catch {
      // signed out here all the same: the server ends a session it cannot find
    }
    shell.flash(t("main.signedOut"));
    await router.go("/login");
  };
  await router.start();
}

void boot();
