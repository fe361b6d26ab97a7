/**
 * Logs (`/logs`, every signed-in user): a user sees their own logs (`GET /api/log/self`) and the totals of
 * the same filters (`GET /api/log/self/stat`); an admin sees every user's logs (`GET /api/log/`,
 * `GET /api/log/stat`) with each row's channel and a filter by user. Filters: type, model, API key name
 * and a time range typed in the browser's time zone. Calls at load: the list and its totals (2).
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";
import { LEAST_ROLE } from "../pages.js";
import { dateTime, fromLocalInput } from "../site.js";
import { PagedTable } from "../widgets/paged-table.js";

/** The log types (`type` of a row and of the filter; 0: every type). */
export const LOG_TYPES = /** @type {Record<number, string>} */ ({
  1: "Top-up", 2: "Consumption", 3: "Management", 4: "System", 5: "Error", 6: "Refund",
});

/**
 * A log row (`/api/log/…`); `channel_name` only in an admin's view.
 * @typedef {object} LogRow
 * @property {number} id
 * @property {number} created_at
 * @property {number} type
 * @property {string} content
 * @property {string} username
 * @property {string} token_name
 * @property {string} model_name
 * @property {number} quota
 * @property {number} prompt_tokens
 * @property {number} completion_tokens
 * @property {number} use_time
 * @property {boolean} is_stream
 * @property {number} channel
 * @property {string} [channel_name]
 */

/** @typedef {{quota: number, rpm: number, tpm: number}} LogStat */

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, session, site } = ctx;
  const admin = session.role >= LEAST_ROLE.admin;
  const base = admin ? "/api/log" : "/api/log/self";
  const list = admin ? "/api/log/" : "/api/log/self";
  /** @type {Record<string, string | number>} */
  let filters = {};
  /** @type {PagedTable<LogRow>} */
  const table = new PagedTable();
  const totals = h("dl", { class: "cards", "aria-live": "polite" });

  const showTotals = async () => {
    try {
      /** @type {LogStat} */
      const stat = await api.get(`${base}/stat`, statQuery(filters));
      /** @param {string} label @param {string} value */
      const figure = (label, value) => h("div", { class: "card" }, h("dt", {}, label), h("dd", {}, value));
      replace(totals, figure("Quota used", site.quota(stat.quota)),
        figure("Requests in the last minute", stat.rpm.toLocaleString()),
        figure("Tokens in the last minute", stat.tpm.toLocaleString()));
    } catch (error) {
      replace(totals, h("p", { class: "form-error", role: "alert" }, error instanceof Error ? error.message : String(error)));
    }
  };

  const typeOptions = [{ value: "0", label: "Every type" },
    ...Object.entries(LOG_TYPES).map(([value, label]) => ({ value, label }))];
  const filterForm = form("Filter the logs", async (element) => {
    /** @type {Record<string, string | number>} */
    const next = { type: Number(valueOf(element, "type")), model_name: valueOf(element, "model_name").trim(),
      token_name: valueOf(element, "token_name").trim() };
    for (const name of ["start_timestamp", "end_timestamp"]) {
      const text = valueOf(element, name);
      if (!text) continue;
      const seconds = fromLocalInput(text);
      if (Number.isNaN(seconds)) throw refuse(name, "must be a date and time");
      next[name] = seconds;
    }
    if (admin) {
      next.username = valueOf(element, "username").trim();
      const channel = valueOf(element, "channel").trim();
      if (channel && !/^\d+$/.test(channel)) throw refuse("channel", "must be a channel id (a whole number)");
      if (channel) next.channel = Number(channel);
    }
    filters = next;
    await Promise.all([table.search(""), showTotals()]);
  },
  h("div", { class: "log-filters" },
    field("Type", "type", { type: "select", options: typeOptions, value: "0" }),
    field("Model", "model_name", { hint: "the exact model name" }),
    field("API key name", "token_name"),
    admin ? field("User", "username", { hint: "the exact username" }) : null,
    admin ? field("Channel id", "channel", { inputmode: "numeric" }) : null,
    field("From", "start_timestamp", { type: "datetime-local", hint: "in your time zone" }),
    field("Until", "end_timestamp", { type: "datetime-local", hint: "in your time zone" })),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, "Apply filters")));

  /** @type {import("../widgets/paged-table.js").Column<LogRow>[]} */
  const columns = [
    { label: "Time", cell: (row) => dateTime(row.created_at) },
    { label: "Type", cell: (row) => LOG_TYPES[row.type] ?? String(row.type) },
    ...(admin ? [{ label: "User", cell: (/** @type {LogRow} */ row) => row.username },
      { label: "Channel", cell: (/** @type {LogRow} */ row) => (row.channel
        ? `#${row.channel}${row.channel_name ? ` ${row.channel_name}` : ""}` : "") }] : []),
    { label: "API key", cell: (row) => row.token_name },
    { label: "Model", cell: (row) => row.model_name },
    { label: "Tokens in / out", cell: (row) => (row.type === 2
      ? `${row.prompt_tokens.toLocaleString()} / ${row.completion_tokens.toLocaleString()}` : "") },
    { label: "Quota", cell: (row) => (row.quota ? site.quota(row.quota) : "") },
    { label: "Time taken", cell: (row) => (row.type === 2 ? `${row.use_time} s${row.is_stream ? ", streamed" : ""}` : "") },
    { label: "Details", cell: (row) => row.content },
  ];

  replace(main,
    heading("Logs"),
    h("p", {}, admin ? "Every user's logs: calls, top-ups and changes, newest first."
      : "Your calls, top-ups and account changes, newest first."),
    filterForm,
    h("h2", {}, "Totals of these filters"),
    totals,
    h("h2", {}, "Log entries"),
    table);
  await Promise.all([table.configure({
    caption: admin ? "Every user's logs" : "Your logs",
    empty: "No logs match.",
    columns,
    fetch: ({ p, page_size }) => api.get(list, { p, page_size, ...filters }),
  }), showTotals()]);
}

/**
 * The filters the totals take (the statistics have no `type`).
 * @param {Record<string, string | number>} filters
 */
function statQuery(filters) {
  const { type: _type, ...rest } = filters;
  return rest;
}
