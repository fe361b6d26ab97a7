/**
 * Every page of the console: its path, its title, who may open it, and its module (loaded when the page
 * is first shown). `server/console/routes.py` `PAGES` answers the same paths with `index.html`; a test
 * keeps the two lists equal.
 *
 * `access`: `setup` only before the first-run setup; `guest` only when signed out (signed in, it opens
 * the dashboard); `anyone`; or the least role (`user`, `admin`, `root`) that may open it.
 * `nav`: the navigation entry's name, for pages that have one (docs/CONSOLE.md names them all).
 */

/** @typedef {"setup" | "guest" | "anyone" | "user" | "admin" | "root"} Access */

/**
 * @typedef {object} Page
 * @property {string} path
 * @property {string} title
 * @property {Access} access
 * @property {string} [nav]
 * @property {() => Promise<import("./types.js").PageModule>} load
 */

/** @type {Page[]} */
export const PAGES = [
  { path: "/", title: "Dashboard", access: "user", nav: "Dashboard", load: () => import("./pages/dashboard.js") },
  { path: "/keys", title: "API keys", access: "user", nav: "API keys", load: () => import("./pages/keys.js") },
  { path: "/setup", title: "Set up Tollway", access: "setup", load: () => import("./pages/setup.js") },
  { path: "/login", title: "Sign in", access: "guest", load: () => import("./pages/login.js") },
  { path: "/register", title: "Create an account", access: "guest", load: () => import("./pages/register.js") },
  { path: "/forgot-password", title: "Forgotten password", access: "guest",
    load: () => import("./pages/forgot-password.js") },
  { path: "/user/reset", title: "Choose a new password", access: "anyone",
    load: () => import("./pages/reset-password.js") },
  // the user and root pages of issue 24
  { path: "/logs", title: "Logs", access: "user", nav: "Logs", load: () => import("./pages/logs.js") },
  { path: "/topup", title: "Top up", access: "user", nav: "Top up", load: () => import("./pages/topup.js") },
  { path: "/account", title: "Account", access: "user", nav: "Account", load: () => import("./pages/account.js") },
  { path: "/playground", title: "Playground", access: "user", nav: "Playground",
    load: () => import("./pages/playground.js") },
  // admin pages
  { path: "/users", title: "Users", access: "admin", nav: "Users", load: () => import("./pages/users.js") },
  { path: "/channels", title: "Channels", access: "admin", nav: "Channels", load: () => import("./pages/channels.js") },
  { path: "/redemptions", title: "Redemption codes", access: "admin", nav: "Redemption codes",
    load: () => import("./pages/redemptions.js") },
  { path: "/orders", title: "Orders", access: "admin", nav: "Orders", load: () => import("./pages/orders.js") },
  // root's pages
  { path: "/settings", title: "Settings", access: "root", nav: "Settings", load: () => import("./pages/settings.js") },
];

/** The page shown for a path no page has. */
export const NOT_FOUND = /** @type {Page} */ ({
  path: "", title: "Page not found", access: "anyone", load: () => import("./pages/not-found.js"),
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
