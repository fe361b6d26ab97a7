/**
 * Logs (`/logs`, every signed-in user): a user sees their own logs (`GET /api/log/self`) and the totals of
 * the same filters (`GET /api/log/self/stat`); an admin sees every user's logs (`GET /api/log/`,
 * `GET /api/log/stat`) with each row's channel and a filter by user. Filters: type, model, API key name
 * (exact), a part of the model's name, the request id and a time range typed in the browser's time zone.
 * Each row opens in a dialog with everything the API has about it (`log-detail.js`). Calls at load: the
 * list and its totals (2).
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";
import { LEAST_ROLE } from "../pages.js";
import { dateTime, fromLocalInput } from "../site.js";
import { PagedTable } from "../widgets/paged-table.js";
import { LOG_TYPE_LABEL } from "../generated/enums.js";
import { labelOf, number, t } from "../i18n.js";
import { openLog } from "./log-detail.js";

/**
 * A log row: an admin's (`LogView`, with `channel_name`) or a user's own (`OwnLogView`).
 * @typedef {import("../generated/api.js").OwnLogView & Partial<Pick<import("../generated/api.js").LogView, "channel_name">>} LogRow
 */

/** @typedef {import("../generated/api.js").LogStat} LogStat */

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
      replace(totals, figure(t("chart.metric.quota"), site.quota(stat.quota)),
        figure(t("logs.rpm"), number(stat.rpm)),
        figure(t("logs.tpm"), number(stat.tpm)));
    } catch (error) {
      replace(totals, h("p", { class: "form-error", role: "alert" }, error instanceof Error ? error.message : String(error)));
    }
  };

  const typeOptions = [{ value: "0", label: t("logs.everyType") },
    ...Object.keys(LOG_TYPE_LABEL).map((value) => ({ value, label: labelOf(LOG_TYPE_LABEL, value) }))];
  const filterForm = form(t("logs.filter"), async (element) => {
    /** @type {Record<string, string | number>} */
    const next = { type: Number(valueOf(element, "type")), model_name_part: valueOf(element, "model_name_part").trim(),
      token_name: valueOf(element, "token_name").trim(), request_id: valueOf(element, "request_id").trim() };
    for (const name of ["start_timestamp", "end_timestamp"]) {
      const text = valueOf(element, name);
      if (!text) continue;
      const seconds = fromLocalInput(text);
      if (Number.isNaN(seconds)) throw refuse(name, t("common.mustBeDate"));
      next[name] = seconds;
    }
    if (admin) {
      next.username = valueOf(element, "username").trim();
      const channel = valueOf(element, "channel").trim();
      if (channel && !/^\d+$/.test(channel)) throw refuse("channel", t("logs.channelMustBeId"));
      if (channel) next.channel = Number(channel);
    }
    filters = next;
    await Promise.all([table.search(""), showTotals()]);
  },
  h("div", { class: "log-filters" },
    field(t("col.type"), "type", { type: "select", options: typeOptions, value: "0" }),
    field(t("col.model"), "model_name_part", { hint: t("logs.modelPart") }),
    field(t("logs.keyName"), "token_name"),
    admin ? field(t("col.user"), "username", { hint: t("logs.exactUser") }) : null,
    admin ? field(t("logs.channelId"), "channel", { inputmode: "numeric" }) : null,
    field(t("logs.requestId"), "request_id", { hint: t("logs.exactRequestId") }),
    field(t("logs.from"), "start_timestamp", { type: "datetime-local", hint: t("logs.inYourZone") }),
    field(t("logs.until"), "end_timestamp", { type: "datetime-local", hint: t("logs.inYourZone") })),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("logs.apply"))));

  /** @type {import("../widgets/paged-table.js").Column<LogRow>[]} */
  const columns = [
    { label: t("col.time"), cell: (row) => dateTime(row.created_at) },
    { label: t("col.type"), cell: (row) => labelOf(LOG_TYPE_LABEL, row.type) },
    ...(admin ? [{ label: t("col.user"), cell: (/** @type {LogRow} */ row) => row.username },
      { label: t("col.channel"), cell: (/** @type {LogRow} */ row) => (row.channel
        ? `#${row.channel}${row.channel_name ? ` ${row.channel_name}` : ""}` : "") }] : []),
    { label: t("col.apiKey"), cell: (row) => row.token_name },
    { label: t("col.model"), cell: (row) => row.model_name },
    { label: t("logs.tokensInOut"), cell: (row) => (row.type === 2
      ? `${number(row.prompt_tokens)} / ${number(row.completion_tokens)}` : ""), numeric: true },
    { label: t("col.quota"), cell: (row) => (row.quota ? site.quota(row.quota) : ""), numeric: true },
    { label: t("logs.timeTaken"), cell: (row) => (row.type === 2 ? t(row.is_stream ? "logs.secondsStreamed" : "logs.seconds", { seconds: number(row.use_time) }) : ""),
      numeric: true },
    { label: t("logs.details"), cell: (row) => h("span", { class: "server-text" }, row.content) },
    { label: t("col.actions"), cell: (row) => h("button", { type: "button", class: "secondary",
      "aria-label": t("logs.openLabel", { time: dateTime(row.created_at) }),
      onclick: () => void openLog(row, { admin, site }) }, t("logs.open")) },
  ];

  replace(main,
    heading(t("page.logs")),
    h("p", {}, admin ? t("logs.introAdmin")
      : t("logs.intro")),
    filterForm,
    h("h2", {}, t("logs.totals")),
    totals,
    h("h2", {}, t("logs.entries")),
    table);
  await Promise.all([table.configure({
    caption: admin ? t("logs.captionAdmin") : t("logs.caption"),
    empty: t("logs.empty"),
    columns,
    fetch: ({ p, page_size }) => api.get(list, { p, page_size, ...filters }),
  }), showTotals()]);
}

/**
 * The filters the totals take (the statistics have no `type` or `request_id`).
 * @param {Record<string, string | number>} filters
 */
function statQuery(filters) {
  const { type: _type, request_id: _request, ...rest } = filters;
  return rest;
}
