/**
 * `<tw-paged-table>`: a list the server pages and searches (`p`, `page_size`, `keyword`), with a search
 * box, a pager, and the loading, empty and refused states. The page asks for rows with `fetch`; the
 * table only draws them. On a narrow screen each row is drawn as a small card of "label value" lines
 * (each cell carries its column's label in `data-label`). The table is compact (`table.compact` in
 * console.css); a column marked `numeric` is right-aligned in tabular figures.
 *
 * After a row action the rows are read again (`reload()`) without leaving the page: the old rows stay
 * until the new ones are drawn (the page keeps its height, so its scroll), the focus goes back to the
 * same control of the redrawn row (found by its accessible name, else the row's first button, else the
 * table), and what the status line said meanwhile (`shell.say`, announced as the `tw-said` event) is
 * shown next to that control too.
 *
 *     const table = new PagedTable();
 *     table.configure({caption: "Your API keys", columns, fetch, empty: "No API keys yet."});
 */

import { h, replace, uid } from "../dom.js";
import { number, t } from "../i18n.js";

export const PAGE_SIZES = [10, 20, 50, 100];
const CONTROLS = "button, a[href], input, select";

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
 * @property {boolean} [numeric]  a number or an amount: right-aligned, in tabular figures
 * @property {boolean} [quietHeader]  the header said to screen readers only (a column of checkboxes, each
 *   named): the column stays as narrow as its cells
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
    this.table = h("table", { class: "stacking compact" }, this.caption, this.head, this.body);
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
    /**
     * The control of a row that last had the focus: its accessible name, the row's first cell (which
     * names the row) and its place among the row's controls.
     * @type {{label: string, row: string, index: number} | null}
     */
    this.lastFocus = null;
    this.said = "";
    this.body.addEventListener("focusin", (event) => {
      const target = event.target;
      if (!(target instanceof HTMLElement)) return;
      const row = target.closest("tr");
      this.lastFocus = { label: target.getAttribute("aria-label") ?? target.textContent ?? "",
        row: row?.cells[0]?.textContent ?? "", index: row ? [...row.querySelectorAll(CONTROLS)].indexOf(target) : -1 };
    });
    this.onSaid = (/** @type {Event} */ event) => {
      this.said = event instanceof CustomEvent ? String(event.detail ?? "") : "";
    };
  }

  connectedCallback() {
    document.addEventListener("tw-said", this.onSaid);
  }

  disconnectedCallback() {
    document.removeEventListener("tw-said", this.onSaid);
  }

  /** @param {TableOptions<T>} options */
  configure(options) {
    this.options = options;
    this.caption.textContent = options.caption;
    replace(this.head, h("tr", {}, options.columns.map((c) => h("th", { scope: "col", class: c.numeric ? "num" : false },
      c.quietHeader ? h("span", { class: "visually-hidden" }, c.label) : c.label))));
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

  /** Show the rows again (after a change), on the same page, keeping the focus and the scroll. */
  reload() {
    return this.load(true);
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

  /** @param {boolean} [again]  a reload after a row action: keep the rows, then the focus */
  async load(again = false) {
    const options = this.options;
    if (!options) return;
    const sequence = ++this.sequence;
    const columns = options.columns.length;
    const note = this.said;
    this.said = "";
    this.table.setAttribute("aria-busy", "true");
    if (!again || this.body.rows.length === 0) {
      replace(this.body, h("tr", { class: "state" }, h("td", { colspan: columns }, t("common.loading"))));
    }
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
          : h("td", { "data-label": c.label, class: c.numeric ? "num" : false }, c.cell(row)))))));
      }
      const first = (this.query.p - 1) * this.query.page_size + 1;
      this.summary.textContent = page.total === 0 ? ""
        : t("table.showing", { first: number(first), last: number(first + page.items.length - 1), count: page.total });
      this.position.textContent = t("table.position", { page: number(this.query.p), pages: number(pages) });
      this.previous.disabled = this.query.p <= 1;
      this.next.disabled = this.query.p >= pages;
      if (again) this.refocus(note);
    } catch (error) {
      if (sequence !== this.sequence) return;
      const message = error instanceof Error ? error.message : String(error);
      replace(this.body, h("tr", { class: "state" }, h("td", { colspan: columns, role: "alert" }, message)));
      this.summary.textContent = "";
    } finally {
      if (sequence === this.sequence) this.table.removeAttribute("aria-busy");
    }
  }

  /**
   * After a reload: when the focus was lost with the old rows, put it back on the same control of the
   * redrawn row, and show `note` next to it.
   * @param {string} note
   */
  refocus(note) {
    const active = document.activeElement;
    const lost = !active || active === document.body || !active.isConnected;
    if (!lost || !this.lastFocus) return;
    const { label, row, index } = this.lastFocus;
    const controls = /** @type {HTMLElement[]} */ ([...this.body.querySelectorAll(CONTROLS)]);
    const same = controls.find((c) => (c.getAttribute("aria-label") ?? c.textContent ?? "") === label);
    // else the same row (its first cell unchanged), at the same place: a toggle renames its button
    const again = [...this.body.rows].find((r) => row && r.cells[0]?.textContent === row);
    const inRow = /** @type {HTMLElement[]} */ ([...(again?.querySelectorAll(CONTROLS) ?? [])]);
    const target = same ?? inRow[index] ?? inRow[0] ?? null;
    if (!target) {  // the row is gone (deleted): the table, whose status line says what happened
      this.wrap.focus({ preventScroll: true });
      return;
    }
    target.focus({ preventScroll: true });
    if (note) target.closest("td, th")?.append(h("span", { class: "row-note" }, note));
  }
}

customElements.define("tw-paged-table", PagedTable);
