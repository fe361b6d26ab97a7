/**
 * `<tw-paged-table>`: a list the server pages and searches (`p`, `page_size`, `keyword`), with a search
 * box, a pager, and the loading, empty and refused states. The page asks for rows with `fetch`; the
 * table only draws them. On a narrow screen each row is drawn as a small card of "label value" lines
 * (each cell carries its column's label in `data-label`).
 *
 *     const table = new PagedTable();
 *     table.configure({caption: "Your API keys", columns, fetch, empty: "No API keys yet."});
 */

import { h, replace, uid } from "../dom.js";
import { number, t } from "../i18n.js";

export const PAGE_SIZES = [10, 20, 50, 100];

/**
 * @typedef {object} PageQuery
 * @property {number} p  the page, from 1
 * @property {number} page_size
 * @property {string} keyword  "" when not searching
 */

/**
 * @template T
 * @typedef {object} Column
 * @property {string} label
 * @property {(row: T) => import("../dom.js").Child} cell
 */

/**
 * @template T
 * @typedef {object} TableOptions
 * @property {string} caption  the table's name
 * @property {Column<T>[]} columns
 * @property {(query: PageQuery) => Promise<import("../types.js").Paged<T>>} fetch
 * @property {string | (() => string)} empty  shown when there are no rows and no keyword (a function: the
 *   page's own filters may say why)
 * @property {string} [searchLabel]  the search box's label; no search box without it
 */

/** @template T */
export class PagedTable extends HTMLElement {
  constructor() {
    super();
    /** @type {TableOptions<T> | null} */
    this.options = null;
    /** @type {PageQuery} */
    this.query = { p: 1, page_size: PAGE_SIZES[0], keyword: "" };
    this.total = 0;
    this.sequence = 0;
    const captionId = uid("table-caption");
    this.caption = h("caption", { id: captionId });
    this.head = h("thead");
    this.body = h("tbody");
    this.table = h("table", { class: "stacking" }, this.caption, this.head, this.body);
    this.wrap = h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-labelledby": captionId },
      this.table);
    this.summary = h("p", { class: "table-summary", role: "status" });
    this.previous = h("button", { type: "button", class: "secondary", onclick: () => void this.go(this.query.p - 1) },
      t("table.previous"));
    this.next = h("button", { type: "button", class: "secondary", onclick: () => void this.go(this.query.p + 1) },
      t("table.next"));
    this.position = h("span", { class: "pager-position" });
    const sizeId = uid("page-size");
    this.size = h("select", { id: sizeId, onchange: () => this.resize() },
      PAGE_SIZES.map((n) => h("option", { value: String(n) }, String(n))));
    this.pager = h("nav", { class: "pager", "aria-label": t("table.pages") }, this.previous, this.position, this.next,
      h("label", { for: sizeId }, t("table.rowsPerPage")), this.size);
    this.searchBox = h("div");
  }

  /** @param {TableOptions<T>} options */
  configure(options) {
    this.options = options;
    this.caption.textContent = options.caption;
    replace(this.head, h("tr", {}, options.columns.map((c) => h("th", { scope: "col" }, c.label))));
    if (options.searchLabel) {
      const id = uid("search");
      const input = h("input", { id, type: "search", name: "keyword", autocomplete: "off" });
      const search = h("form", { role: "search", class: "search", "aria-label": options.searchLabel },
        h("label", { for: id }, options.searchLabel), input,
        h("button", { type: "submit", class: "secondary" }, t("table.search")));
      search.addEventListener("submit", (event) => {
        event.preventDefault();
        void this.search(input.value.trim());
      });
      replace(this.searchBox, search);
    }
    replace(this, this.searchBox, this.wrap, this.summary, this.pager);
    return this.load();
  }

  /** Show the rows again (after a change), on the same page. */
  reload() {
    return this.load();
  }

  /** @param {string} keyword */
  search(keyword) {
    this.query = { ...this.query, p: 1, keyword };
    return this.load();
  }

  /** @param {number} page */
  go(page) {
    this.query = { ...this.query, p: Math.max(1, page) };
    return this.load();
  }

  resize() {
    this.query = { ...this.query, p: 1, page_size: Number(this.size.value) };
    return this.load();
  }

  async load() {
    const options = this.options;
    if (!options) return;
    const sequence = ++this.sequence;
    const columns = options.columns.length;
    this.table.setAttribute("aria-busy", "true");
    replace(this.body, h("tr", { class: "state" }, h("td", { colspan: columns }, t("common.loading"))));
    this.previous.disabled = true;
    this.next.disabled = true;
    try {
      const page = await options.fetch(this.query);
      if (sequence !== this.sequence) return;
      this.total = page.total;
      const pages = Math.max(1, Math.ceil(page.total / this.query.page_size));
      if (page.items.length === 0 && this.query.p > 1 && page.total > 0) {
        void this.go(pages);  // the last page emptied (rows deleted): show the new last page
        return;
      }
      if (page.items.length === 0) {
        const empty = typeof options.empty === "function" ? options.empty() : options.empty;
        const text = this.query.keyword ? t("table.noMatch", { keyword: this.query.keyword }) : empty;
        replace(this.body, h("tr", { class: "state" }, h("td", { colspan: columns }, text)));
      } else {
        replace(this.body, page.items.map((row) => h("tr", {}, options.columns.map((c, i) => (i === 0
          ? h("th", { scope: "row", "data-label": c.label }, c.cell(row))
          : h("td", { "data-label": c.label }, c.cell(row)))))));
      }
      const first = (this.query.p - 1) * this.query.page_size + 1;
      this.summary.textContent = page.total === 0 ? ""
        : t("table.showing", { first: number(first), last: number(first + page.items.length - 1), count: page.total });
      this.position.textContent = t("table.position", { page: number(this.query.p), pages: number(pages) });
      this.previous.disabled = this.query.p <= 1;
      this.next.disabled = this.query.p >= pages;
    } catch (error) {
      if (sequence !== this.sequence) return;
      const message = error instanceof Error ? error.message : String(error);
      replace(this.body, h("tr", { class: "state" }, h("td", { colspan: columns, role: "alert" }, message)));
      this.summary.textContent = "";
    } finally {
      if (sequence === this.sequence) this.table.removeAttribute("aria-busy");
    }
  }
}

customElements.define("tw-paged-table", PagedTable);
