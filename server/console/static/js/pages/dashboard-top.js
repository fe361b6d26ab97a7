/**
 * The operator's part of the dashboard (admins and root; loaded by dashboard.js only for them): over a
 * chosen range of days, the users, API keys and models that spent most, and every channel's calls and
 * errors (`GET /api/data/top`, summed by the server from the logs). The range is two dates in the browser's
 * time zone (from the first one's midnight to the last one's end); it starts as the last 7 days. Each list
 * is a table, with a bar of each row's share of the first row's spend (drawn, hidden from screen readers:
 * the number is in the row). Calls: one `GET /api/data/top` at load and one per change of the range.
 */

import { h, replace, uid } from "../dom.js";
import { field, form, refuse, valueOf } from "../forms.js";
import { number, t } from "../i18n.js";
import { typeName } from "./channel-form.js";

/** @typedef {{quota: number, calls: number, prompt_tokens: number, completion_tokens: number}} Spent  what each list counts */
/** @typedef {import("../generated/api.js").TopUser} TopUser */
/** @typedef {import("../generated/api.js").TopKey} TopKey */
/** @typedef {import("../generated/api.js").TopModel} TopModel */
/** @typedef {import("../generated/api.js").ChannelUse} ChannelUse */
/** @typedef {import("../generated/api.js").Dashboard} Dashboard  the reply of `GET /api/data/top` */

/** How many users, keys and models each list shows. */
const LIMIT = 10;
const DAY_MS = 86_400_000;

/**
 * A date as an `<input type=date>` value, in the browser's time zone.
 * @param {Date} date
 */
function dateValue(date) {
  const pad = (/** @type {number} */ n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/**
 * The unix second a date input's day (or the day `later` days after it) starts at in the browser's time
 * zone, or NaN. Days are counted on the calendar, so a day of a clock change is 23 or 25 hours.
 * @param {string} value  `YYYY-MM-DD`
 * @param {number} [later]
 */
function dayStart(value, later = 0) {
  const [year, month, day] = value.split("-").map(Number);
  if (!year || !month || !day) return Number.NaN;
  return Math.floor(new Date(year, month - 1, day + later).getTime() / 1000);
}

/**
 * A bar of `value`'s share of `most` (decoration: the number is in the row).
 * @param {number} value
 * @param {number} most
 */
function bar(value, most) {
  const fill = h("span", { class: "share-fill" });
  fill.style.width = `${most > 0 ? Math.max(1, Math.round((value / most) * 100)) : 0}%`;  // CSSOM: allowed by the CSP
  return h("span", { class: "share", "aria-hidden": "true" }, fill);
}

/** @typedef {{numbers: string}} Numbers  the head of a column of numbers */

/**
 * @param {string} name
 * @returns {Numbers}
 */
const numbers = (name) => ({ numbers: name });

/**
 * One list as a table: a caption, the column headers, one row per item, or the empty state.
 * @template T
 * @param {string} caption
 * @param {(string | Numbers)[]} headers  the first one names the row; `numbers(name)` heads a column of
 *   numbers (right-aligned); the last column is the share bar
 * @param {T[]} items
 * @param {(item: T) => import("../dom.js").Child[]} cells  the first one is the row's header cell's text
 * @param {string} empty
 * @param {boolean} [wide]  across the whole width (a list with many columns)
 */
function table(caption, headers, items, cells, empty, wide = false) {
  const names = headers.map((head) => typeof head === "string" ? head : head.numbers);
  const classes = headers.map((head, i) => i === headers.length - 1 ? "share-cell" : typeof head === "string" ? false : "num");
  const body = items.length
    ? items.map((item) => {
      const [first, ...rest] = cells(item);
      return h("tr", {}, h("th", { scope: "row", "data-label": names[0] }, first),
        rest.map((cell, i) => h("td", { "data-label": names[i + 1], class: classes[i + 1] }, cell)));
    })
    : h("tr", { class: "state" }, h("td", { colspan: headers.length }, empty));
  return h("div", { class: wide ? "table-wrap wide" : "table-wrap" },
    h("table", { class: "stacking top-table" },
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, names.map((name, i) => h("th", { scope: "col", class: classes[i] }, name)))),
      h("tbody", {}, body)));
}

/**
 * Draw the operator's section into `area` and load it.
 * @param {HTMLElement} area
 * @param {import("../types.js").PageContext} ctx
 */
export async function renderTop(area, { api, site }) {
  const headingId = uid("top");
  const today = new Date();
  const range = form(t("top.range"), async () => { await load(); },
    h("div", { class: "controls" },
      field(t("top.from"), "from", { type: "date", value: dateValue(new Date(today.getTime() - 6 * DAY_MS)) }),
      field(t("top.to"), "to", { type: "date", value: dateValue(today) }),
      h("div", { class: "control" }, h("button", { type: "submit", class: "secondary" }, t("top.show")))));
  const results = h("div", { class: "top-grid" });
  replace(area,
    h("h2", { id: headingId }, t("top.title")),
    h("p", { class: "hint" }, t("top.intro")),
    range,
    results);
  area.setAttribute("aria-labelledby", headingId);

  const spend = (/** @type {number} */ quota) => site.quota(quota);
  const tokens = (/** @type {Spent} */ row) => number(row.prompt_tokens + row.completion_tokens);

  /** @param {Dashboard} data */
  const draw = (data) => {
    const most = (/** @type {Spent[]} */ rows) => rows.reduce((m, row) => Math.max(m, row.quota), 0);
    const users = most(data.users);
    const keys = most(data.keys);
    const models = most(data.models);
    const busiest = data.channels.reduce((m, row) => Math.max(m, row.calls + row.errors), 0);
    replace(results,
      table(t("top.users"), [t("col.user"), numbers(t("top.spend")), numbers(t("top.calls")), numbers(t("top.tokens")), t("top.share")],
        data.users, (row) => [row.username || t("top.userId", { id: row.user_id }), spend(row.quota),
          number(row.calls), tokens(row), bar(row.quota, users)], t("top.none")),
      table(t("top.keys"), [t("top.key"), t("top.owner"), numbers(t("top.spend")), numbers(t("top.calls")), t("top.share")],
        data.keys, (row) => [row.token_name || t("top.keyId", { id: row.token_id }), row.username,
          spend(row.quota), number(row.calls), bar(row.quota, keys)], t("top.none")),
      table(t("top.models"), [t("col.model"), numbers(t("top.spend")), numbers(t("top.calls")), numbers(t("top.tokens")), t("top.share")],
        data.models, (row) => [row.model_name, spend(row.quota), number(row.calls), tokens(row),
          bar(row.quota, models)], t("top.none")),
      table(t("top.channels"), [t("top.channel"), t("top.type"), numbers(t("top.calls")), numbers(t("top.errors")), numbers(t("top.errorRate")),
        numbers(t("top.spend")), t("top.share")],
      data.channels, (row) => [row.channel_name || t("top.channelGone", { id: row.channel }),
        row.channel_type ? typeName(row.channel_type) : "—", number(row.calls), number(row.errors),
        number(row.errors / Math.max(1, row.calls + row.errors), { style: "percent", maximumFractionDigits: 1 }),
        spend(row.quota), bar(row.calls + row.errors, busiest)], t("top.noChannels"), true));
  };

  /** Load the range's lists; a date missing or out of order is refused at its field (thrown to `form`). */
  const load = async () => {
    const fromValue = valueOf(range, "from");
    const toValue = valueOf(range, "to");
    const start = dayStart(fromValue);
    if (Number.isNaN(start)) throw refuse("from", t("top.badDate"));
    const last = dayStart(toValue, 1) - 1;  // the last day's end: the next day's midnight less a second
    if (Number.isNaN(last)) throw refuse("to", t("top.badDate"));
    if (start > last) throw refuse("to", t("top.toBeforeFrom"));
    results.setAttribute("aria-busy", "true");
    replace(results, h("p", { class: "loading" }, t("common.loading")));
    try {
      /** @type {Dashboard} */
      const data = await api.get("/api/data/top", { start_timestamp: start, end_timestamp: last, limit: LIMIT });
      draw(data);
    } catch (error) {
      replace(results, h("p", { class: "form-error", role: "alert" }, error instanceof Error ? error.message : String(error)));
    } finally {
      results.removeAttribute("aria-busy");
    }
  };
  await load();  // the first load's dates are the page's own: nothing to refuse
}
