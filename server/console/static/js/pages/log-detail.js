/**
 * A log row opened in a dialog (the Logs page): everything the API has about it — request id, time, user,
 * key, channels tried, model and upstream model, route, stream, tokens, the billing breakdown (the ratios
 * or the price, the formula with its numbers, the charge it gives beside the row's), estimated usage, a
 * cut stream, the conversion, the client IP when the viewer may see it, an error log's status and
 * message, and the row as the API sent it.
 *
 * The charge is recomputed here by the gateway's formula (server/components/pricing.py,
 * docs/api/gateway.md#billing): in ratio mode ceil((input + output × completion ratio + cache reads × cache ratio + cache
 * writes × cache-write ratio (× 1.6 for a 1-hour write)) × model ratio × group ratio), in price mode
 * ceil(price × QuotaPerUnit × group ratio), a non-zero cost at least 1 point. A user's `other` lacks some
 * of the numbers (the server keeps only an allow-list); then the breakdown says it cannot be redone.
 */

import { h, uid } from "../dom.js";
import { dateTime } from "../site.js";
import { openDialog } from "../widgets/dialog.js";
import { LOG_TYPE_LABEL } from "../generated/enums.js";
import { labelOf, number, t } from "../i18n.js";

/**
 * @typedef {import("./logs.js").LogRow} LogRow
 */

/** 1.6: a 1-hour cache write's price over a 5-minute one's. */
const ONE_HOUR_WRITE = 1.6;

/**
 * A row's `other` as an object ({} when empty or not an object).
 * @param {string | undefined} raw
 * @returns {Record<string, any>}
 */
export function otherOf(raw) {
  if (!raw) return {};
  try {
    const value = JSON.parse(raw);
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/**
 * A sum's float noise removed before the ceil (the ratios are decimals as written: 0.1 × 3 is 0.3).
 * @param {number} value
 */
function ceil(value) {
  return Math.ceil(Number(value.toFixed(9)));
}

/**
 * The billing of a consume log: the formula's numbers and the charge they give, or null when the row
 * lacks a number the formula needs.
 * @param {LogRow} row
 * @param {Record<string, any>} other
 * @param {number} quotaPerUnit
 * @returns {{price: boolean, terms: string, points: number, charge: number} | null}
 */
export function breakdown(row, other, quotaPerUnit) {
  const num = (/** @type {unknown} */ v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const group = num(other.group_ratio);
  const price = num(other.model_price);
  if (group === null || price === null) return null;
  const fmt = (/** @type {number} */ v) => String(Number(v.toFixed(9)));
  if (price >= 0) {
    const points = price * quotaPerUnit * group;
    const charge = points > 0 ? Math.max(1, ceil(points)) : 0;
    return { price: true, terms: `${fmt(price)} × ${fmt(quotaPerUnit)} × ${fmt(group)} = ${fmt(points)}`, points, charge };
  }
  const ratio = num(other.model_ratio);
  const completion = num(other.completion_ratio);
  if (ratio === null || completion === null) return null;
  const read = num(other.cache_read_tokens) ?? num(other.cache_tokens) ?? 0;
  const writes = num(other.cache_write_tokens) ?? num(other.cache_creation_tokens);
  if (writes === null && other.cache_read_tokens === undefined && read !== 0) return null;
  const write = writes ?? 0;
  const write1h = num(other.cache_write_1h_tokens) ?? 0;
  const cacheRatio = num(other.cache_ratio) ?? 1;
  const createRatio = num(other.cache_creation_ratio);
  if (write && createRatio === null) return null;
  const input = row.prompt_tokens - read - write;
  let tokens = input + row.completion_tokens * completion;
  let terms = `${input} + ${row.completion_tokens} × ${fmt(completion)}`;
  if (read) {
    tokens += read * cacheRatio;
    terms += ` + ${read} × ${fmt(cacheRatio)}`;
  }
  if (write) {
    const create = /** @type {number} */ (createRatio);
    tokens += (write - write1h) * create + write1h * create * ONE_HOUR_WRITE;
    terms += ` + ${write - write1h} × ${fmt(create)}`;
    if (write1h) terms += ` + ${write1h} × ${fmt(create)} × ${ONE_HOUR_WRITE}`;
  }
  const points = tokens * ratio * group;
  const charge = points > 0 ? Math.max(1, ceil(points)) : 0;
  return { price: false, terms: `(${terms}) × ${fmt(ratio)} × ${fmt(group)} = ${fmt(points)}`, points, charge };
}

/**
 * Open the dialog of a log row.
 * @param {LogRow} row
 * @param {{admin: boolean, site: import("../site.js").Site}} options
 */
export function openLog(row, { admin, site }) {
  const other = otherOf(row.other);
  const dialog = openDialog(t("logs.detailTitle", { time: dateTime(row.created_at) }));
  /** @type {[string, import("../dom.js").Child][]} */
  const items = [];
  /** @param {string} label @param {import("../dom.js").Child} value */
  const add = (label, value) => {
    if (value !== "" && value !== null && value !== undefined) items.push([label, value]);
  };
  const yesNo = (/** @type {unknown} */ v) => (v ? t("common.yes") : t("common.no"));
  const mono = (/** @type {string} */ text) => h("span", { class: "mono" }, text);
  add(t("logs.requestId"), row.request_id ? mono(row.request_id) : "—");
  add(t("col.time"), dateTime(row.created_at));
  add(t("col.type"), labelOf(LOG_TYPE_LABEL, row.type));
  add(t("col.user"), admin ? `${row.username} (#${row.user_id})` : row.username);
  add(t("col.apiKey"), row.token_name ? `${row.token_name} (#${row.token_id})` : "—");
  add(t("col.group"), row.group);
  if (admin) {
    add(t("col.channel"), row.channel ? `#${row.channel}${row.channel_name ? ` ${row.channel_name}` : ""}` : "—");
    const tried = Array.isArray(other.channels_tried) ? other.channels_tried
      : Array.isArray(other.admin_info?.use_channel) ? other.admin_info.use_channel : [];
    if (tried.length) add(t("logs.channelsTried"), tried.map((/** @type {unknown} */ id) => `#${id}`).join(t("common.listSeparator")));
  }
  add(t("col.model"), row.model_name ? mono(row.model_name) : "");
  if (other.upstream_model_name) add(t("logs.upstreamModel"), mono(String(other.upstream_model_name)));
  if (other.route) add(t("logs.route"), mono(String(other.route)));
  if (other.request_path) add(t("logs.path"), mono(String(other.request_path)));
  if (row.type === 2 || row.type === 5) {
    add(t("logs.stream"), yesNo(row.is_stream));
    add(t("logs.interrupted"), yesNo(other.stream_interrupted));
    add(t("logs.timeTaken"), t("logs.seconds", { seconds: number(row.use_time) }));
    if (typeof other.frt === "number") add(t("logs.firstResponse"), t("logs.milliseconds", { ms: number(other.frt) }));
  }
  if (row.type === 2) {
    add(t("logs.promptTokens"), number(row.prompt_tokens));
    add(t("logs.completionTokens"), number(row.completion_tokens));
    const read = other.cache_read_tokens ?? other.cache_tokens;
    if (typeof read === "number") add(t("logs.cacheReadTokens"), number(read));
    const write = other.cache_write_tokens ?? other.cache_creation_tokens;
    if (typeof write === "number") {
      add(t("logs.cacheWriteTokens"), other.cache_write_1h_tokens
        ? t("logs.cacheWriteOneHour", { count: write, hour: number(other.cache_write_1h_tokens) }) : number(write));
    }
    if ("usage_estimated" in other) add(t("logs.usageEstimated"), yesNo(other.usage_estimated));
    add(t("logs.conversion"), other.converted_from
      ? t("logs.converted", { from: String(other.converted_from), to: String(other.converted_to ?? "") }) : t("logs.notConverted"));
  }
  if (row.type === 5) {
    if (other.status_code !== undefined) add(t("logs.statusCode"), mono(String(other.status_code)));
    if (other.error_code) add(t("logs.errorCode"), mono(String(other.error_code)));
  }
  if (row.ip) add(t("logs.clientIp"), mono(row.ip));
  add(row.type === 5 ? t("logs.errorMessage") : t("logs.details"),
    row.content ? h("span", { class: "server-text" }, row.content) : "");

  /** @type {HTMLElement[]} */
  const body = [h("dl", { class: "details" }, items.map(([label, value]) => h("div", {}, h("dt", {}, label), h("dd", {}, value))))];
  if (row.type === 2) body.push(billing(row, other, site));
  body.push(h("details", { class: "raw" }, h("summary", {}, t("logs.raw")),
    h("pre", { class: "mono" }, JSON.stringify({ ...row, other }, null, 2))));
  const close = h("button", { type: "button", onclick: () => dialog.close() }, t("common.close"));
  dialog.body.append(...body, h("div", { class: "actions" }, close));
  close.focus();
  return dialog;
}

/**
 * The billing section of a consume log.
 * @param {LogRow} row
 * @param {Record<string, any>} other
 * @param {import("../site.js").Site} site
 */
function billing(row, other, site) {
  const result = breakdown(row, other, site.status.quota_per_unit);
  /** @type {[string, string][]} */
  const ratios = [];
  const num = (/** @type {unknown} */ v) => (typeof v === "number" ? number(v, { maximumFractionDigits: 9 }) : "");
  if (result?.price) {
    ratios.push([t("logs.price"), num(other.model_price)], [t("logs.groupRatio"), num(other.group_ratio)]);
  } else {
    ratios.push([t("prices.modelRatio"), num(other.model_ratio)], [t("prices.completionRatio"), num(other.completion_ratio)],
      [t("prices.cacheRatio"), num(other.cache_ratio)], [t("prices.cacheWriteRatio"), num(other.cache_creation_ratio)],
      [t("logs.groupRatio"), num(other.group_ratio)]);
  }
  const shown = ratios.filter(([, value]) => value !== "");
  const headingId = uid("billing");
  return h("section", { class: "billing", "aria-labelledby": headingId },
    h("h3", { id: headingId }, t("logs.billing")),
    shown.length ? h("dl", { class: "details" }, shown.map(([label, value]) => h("div", {}, h("dt", {}, label), h("dd", {}, value)))) : null,
    result ? [
      h("p", {}, result.price ? t("logs.formulaPrice") : t("logs.formulaRatio")),
      h("p", {}, h("code", { class: "formula" }, `${result.terms} → ${number(result.charge)}`)),
      h("p", { class: result.charge === row.quota ? "clean" : "flagged" },
        result.charge === row.quota ? t("logs.chargeMatches", { points: number(row.quota), amount: site.quota(row.quota) })
          : t("logs.chargeDiffers", { points: number(result.charge), charged: number(row.quota) })),
    ] : h("p", {}, t("logs.noBreakdown", { points: number(row.quota), amount: site.quota(row.quota) })));
}
