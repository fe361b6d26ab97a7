/**
 * Every page of the console: its path, its title, who may open it, and its module (loaded when the page
 * is first shown). `server/console/routes.py` `PAGES` answers the same paths with `index.html`; a test
 * keeps the two lists equal.
 *
 * `access`: `setup` only before the first-run setup; `guest` only when signed out (signed in, it opens
 * the dashboard); `anyone`; or the least role (`user`, `admin`, `root`) that may open it.
 * `nav`: whether the page has a navigation entry, named as its title (docs/CONSOLE.md names them all).
 */

import { t } from "./i18n.js";

/** @typedef {"setup" | "guest" | "anyone" | "user" | "admin" | "root"} Access */

/**
 * @typedef {object} Page
 * @property {string} path
 * @property {() => string} title  in the chosen language
 * @property {Access} access
 * @property {boolean} [nav]  whether the page has a navigation entry (named as its title)
 * @property {() => Promise<import("./types.js").PageModule>} load
 */

/** @type {Page[]} */
export const PAGES = [
  { path: "/", title: () => t("page.dashboard"), access: "user", nav: true, load: () => import("./pages/dashboard.js") },
  { path: "/keys", title: () => t("page.keys"), access: "user", nav: true, load: () => import("./pages/keys.js") },
  { path: "/setup", title: () => t("page.setup"), access: "setup", load: () => import("./pages/setup.js") },
  { path: "/login", title: () => t("page.login"), access: "guest", load: () => import("./pages/login.js") },
  { path: "/register", title: () => t("page.register"), access: "guest", load: () => import("./pages/register.js") },
  { path: "/forgot-password", title: () => t("page.forgotPassword"), access: "guest",
    load: () => import("./pages/forgot-password.js") },
  { path: "/user/reset", title: () => t("page.resetPassword"), access: "anyone",
    load: () => import("./pages/reset-password.js") },
  // the user and root pages of issue 24
  { path: "/logs", title: () => t("page.logs"), access: "user", nav: true, load: () => import("./pages/logs.js") },
  { path: "/topup", title: () => t("page.topup"), access: "user", nav: true, load: () => import("./pages/topup.js") },
  { path: "/account", title: () => t("page.account"), access: "user", nav: true, load: () => import("./pages/account.js") },
  { path: "/playground", title: () => t("page.playground"), access: "user", nav: true,
    load: () => import("./pages/playground.js") },
  { path: "/models", title: () => t("page.models"), access: "user", nav: true, load: () => import("./pages/models.js") },
  // admin pages
  { path: "/users", title: () => t("page.users"), access: "admin", nav: true, load: () => import("./pages/users.js") },
  { path: "/channels", title: () => t("page.channels"), access: "admin", nav: true, load: () => import("./pages/channels.js") },
  { path: "/redemptions", title: () => t("page.redemptions"), access: "admin", nav: true,
    load: () => import("./pages/redemptions.js") },
  { path: "/orders", title: () => t("page.orders"), access: "admin", nav: true, load: () => import("./pages/orders.js") },
  // root's pages
  { path: "/settings", title: () => t("page.settings"), access: "root", nav: true, load: () => import("./pages/settings.js") },
];

/** The page shown for a path no page has. */
export const NOT_FOUND = /** @type {Page} */ ({
  path: "", title: () => t("page.notFound"), access: "anyone", load: () => import("./pages/not-found.js"),
});

/** Role numbers of the access levels that are roles. */
export const LEAST_ROLE = { user: 1, admin: 10, root: 100 };

/**
 * The page of a path (a trailing slash ignored), or undefined.
 * @param {string} pathname
 */
export function pageAt(pathname) {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, "") : pathname;
  return PAGES.find((page) => page.path === path);
}

/**
 * Where to go after signing in: the `next` of the address when it is a console page a signed-in user
 * opens (not another address, not a sign-in or first-run page), else the dashboard.
 * @param {URL} url
 */
export function nextOf(url) {
  const next = url.searchParams.get("next") ?? "";
  if (!next.startsWith("/") || next.startsWith("//")) return "/";
  const target = new URL(next, window.location.origin);
  const page = pageAt(target.pathname);
  return page && page.access !== "guest" && page.access !== "setup" ? target.pathname + target.search : "/";
}
