/**
 * The site's public settings (`GET /api/status`, read once per page load) and how the console shows
 * what they govern: quota as the site displays it (`QuotaPerUnit`, `DisplayInCurrency`, the display
 * type and exchange rates) and times in the browser's own time zone.
 */

import { locale, t } from "./i18n.js";

/** @typedef {import("./types.js").Status} Status */

export class Site {
  /** @param {Status} status */
  constructor(status) {
    this.status = status;
  }

  /** @param {import("./api.js").Api} api */
  static async load(api) {
    /** @type {Status} */
    const status = await api.get("/api/status");
    return new Site(status);
  }

  get name() {
    return this.status.system_name || "Tollway";
  }

  /** Whether quota is shown as money (else as raw points). */
  get inCurrency() {
    const s = this.status;
    return s.display_in_currency && s.quota_display_type !== "TOKENS" && s.quota_per_unit > 0;
  }

  /** The currency symbol and how many of it one US dollar is. */
  get currency() {
    const s = this.status;
    if (s.quota_display_type === "CNY") return { symbol: "¥", rate: s.usd_exchange_rate };
    if (s.quota_display_type === "CUSTOM") {
      return { symbol: s.custom_currency_symbol, rate: s.custom_currency_exchange_rate };
    }
    return { symbol: "$", rate: 1 };
  }

  /** The unit a quota field is typed in ("$", "¥", or "points"). */
  get quotaUnit() {
    return this.inCurrency ? this.currency.symbol : t("site.points");
  }

  /**
   * A quota amount as the site shows it: `$1.25`, or `625,000` points.
   * @param {number} quota
   */
  quota(quota) {
    if (!this.inCurrency) return Math.round(quota).toLocaleString(locale());
    const { symbol, rate } = this.currency;
    const amount = (quota / this.status.quota_per_unit) * rate;
    const small = amount !== 0 && Math.abs(amount) < 0.01;
    const digits = small ? { maximumSignificantDigits: 2 } : { minimumFractionDigits: 2, maximumFractionDigits: 2 };
    return symbol + amount.toLocaleString(locale(), digits);
  }

  /**
   * A quota as the number typed in a form (in `quotaUnit`).
   * @param {number} quota
   */
  quotaToInput(quota) {
    if (!this.inCurrency) return String(Math.round(quota));
    const amount = (quota / this.status.quota_per_unit) * this.currency.rate;
    return String(Math.round(amount * 1e6) / 1e6);
  }

  /**
   * The quota a number typed in a form (in `quotaUnit`) stands for, or NaN.
   * @param {string} text
   */
  quotaFromInput(text) {
    const value = Number(text.trim());
    if (text.trim() === "" || !Number.isFinite(value)) return Number.NaN;
    if (!this.inCurrency) return Math.round(value);
    return Math.round((value / this.currency.rate) * this.status.quota_per_unit);
  }
}

/**
 * Unix seconds as a date and time in the browser's time zone, in the chosen language; `never` for 0 or -1.
 * @param {number} seconds
 * @param {string} [never]
 */
export function dateTime(seconds, never = t("common.never")) {
  if (!seconds || seconds < 0) return never;
  return new Date(seconds * 1000).toLocaleString(locale(), { dateStyle: "medium", timeStyle: "short" });
}

/**
 * Unix seconds as the value of an `<input type="datetime-local">` (browser time zone).
 * @param {number} seconds
 */
export function toLocalInput(seconds) {
  const d = new Date(seconds * 1000);
  /** @param {number} n */
  const two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`;
}

/**
 * The unix seconds of an `<input type="datetime-local">` value (browser time zone), or NaN.
 * @param {string} value
 */
export function fromLocalInput(value) {
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? Number.NaN : Math.floor(ms / 1000);
}
