/**
 * Every page of the console: its path, its title, who may open it, and its module (loaded when the page
 * is first shown). The list is `../pages.json`, the one manifest `server/console/routes.py` also reads (it
 * answers each path with `index.html`, the entry's `summary` its route's summary in the API document).
 *
 * `access`: `setup` only before the first-run setup; `guest` only when signed out (signed in, it opens
 * the dashboard); `anyone`; or the least role (`user`, `admin`, `root`) that may open it.
 * `group`: the sidebar group of the page's entry, named as its title (docs/CONSOLE.md names them all); a
 * page without one has no entry; the manifest lists the entries in the sidebar's order.
 * `navigation(role)` lays the groups out for a role.
 */

import manifest from "../pages.json" with { type: "json" };
import { Role } from "./generated/enums.js";
import { t } from "./i18n.js";

/** @typedef {"setup" | "guest" | "anyone" | "user" | "admin" | "root"} Access */
/** @typedef {"use" | "money" | "manage" | "system"} Group */

/**
 * An entry of `pages.json`.
 * @typedef {object} ManifestEntry
 * @property {string} path
 * @property {string} module  `js/pages/<module>.js`
 * @property {string} title  the catalogue key of its title
 * @property {Access} access
 * @property {Group} [group]
 * @property {string} summary  its route's summary in the API document (English, for the server)
 */

/**
 * @typedef {object} Page
 * @property {string} path
 * @property {() => string} title  in the chosen language
 * @property {Access} access
 * @property {Group} [group]  the sidebar group of the page's entry (named as its title); none: no entry
 * @property {() => Promise<import("./types.js").PageModule>} load
 */

/** @type {Page[]} */
export const PAGES = /** @type {ManifestEntry[]} */ (manifest).map(({ path, module, title, access, group }) => ({
  path, title: () => t(title), access, ...(group ? { group } : {}), load: () => import(`./pages/${module}.js`),
}));

/** The sidebar's groups, in its order, each with its heading in the chosen language. */
export const GROUPS = /** @type {{id: Group, title: () => string}[]} */ ([
  { id: "use", title: () => t("shell.group.use") },
  { id: "money", title: () => t("shell.group.money") },
  { id: "manage", title: () => t("shell.group.manage") },
  { id: "system", title: () => t("shell.group.system") },
]);

/**
 * The sidebar of a role: its groups that have an entry the role may open, each with those pages. Below
 * admin, the one "manage" page a user may open (Models and prices) reads as a page to use: it is listed
 * under "use", not as a group of one.
 * @param {number} role
 * @returns {{id: Group, title: () => string, pages: Page[]}[]}
 */
export function navigation(role) {
  /** @param {Page} page */
  const groupOf = (page) => page.group === "manage" && role < LEAST_ROLE.admin ? "use" : page.group;
  const open = PAGES.filter((page) => page.group && page.access in LEAST_ROLE
    && role >= LEAST_ROLE[/** @type {"user" | "admin" | "root"} */ (page.access)]);
  return GROUPS.map((group) => ({ ...group, pages: open.filter((page) => groupOf(page) === group.id) }))
    .filter((group) => group.pages.length > 0);
}

/** The page shown for a path no page has. */
export const NOT_FOUND = /** @type {Page} */ ({
  path: "", title: () => t("page.notFound"), access: "anyone", load: () => import("./pages/not-found.js"),
});

/** Role numbers of the access levels that are roles. */
export const LEAST_ROLE = { user: Role.COMMON, admin: Role.ADMIN, root: Role.ROOT };

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
