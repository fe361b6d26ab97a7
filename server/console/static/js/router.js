/**
 * Moving between pages without reloading: the history API. A click on a link to a console page, and the
 * browser's back and forward buttons, show that page in place; any other link (the API document, another
 * site, a file) is left to the browser.
 */

import { pageAt } from "./pages.js";

export class Router {
  /** @param {(url: URL) => Promise<void>} show  draws the page of a URL */
  constructor(show) {
    this.show = show;
  }

  /** Start handling link clicks and history moves, and show the current address. */
  start() {
    window.addEventListener("popstate", () => void this.show(new URL(window.location.href)));
    document.addEventListener("click", (event) => this.onClick(event));
    return this.show(new URL(window.location.href));
  }

  /**
   * Open a console address (a path with an optional query).
   * @param {string} target
   * @param {{replace?: boolean}} [options]  replace the current history entry instead of adding one
   */
  go(target, { replace = false } = {}) {
    const url = new URL(target, window.location.origin);
    if (replace) window.history.replaceState(null, "", url);
    else window.history.pushState(null, "", url);
    return this.show(url);
  }

  /** @param {MouseEvent} event */
  onClick(event) {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey
      || event.altKey) return;
    const target = event.target instanceof Element ? event.target.closest("a[href]") : null;
    if (!(target instanceof HTMLAnchorElement) || target.target || target.hasAttribute("download")) return;
    const url = new URL(target.href);
    if (url.origin !== window.location.origin || !pageAt(url.pathname)) return;
    if (url.pathname === window.location.pathname && url.search === window.location.search && url.hash) return;
    event.preventDefault();
    void this.go(url.pathname + url.search);
  }
}
