/**
 * `usageChart(...)`: a user's usage by model as stacked bars, drawn as inline SVG by this code (no chart
 * library), one bar per hour or per day of the browser's time zone, with the same numbers as a table
 * for screen readers and for reading exact values.
 */

import { h, svg, uid } from "../dom.js";
import { locale, t } from "../i18n.js";

/** @typedef {"hours" | "week" | "month"} Period */
/** @typedef {"quota" | "count" | "token_used"} Metric */

/** What each period shows: its label (in the chosen language), and how many slots of which kind. */
export const PERIODS = /** @type {const} */ ({
  hours: { label: () => t("chart.period.hours"), slots: 24, unit: "hour" },
  week: { label: () => t("chart.period.week"), slots: 7, unit: "day" },
  month: { label: () => t("chart.period.month"), slots: 30, unit: "day" },
});

export const METRICS = /** @type {const} */ ({
  quota: () => t("chart.metric.quota"),
  count: () => t("chart.metric.count"),
  token_used: () => t("chart.metric.tokens"),
});

const SERIES_MAX = 6;  // the biggest models get their own colour; the rest are t("chart.otherModels")
const HEIGHT = 260;
const MARGIN = { top: 12, right: 8, bottom: 30, left: 76 };

/**
 * @typedef {object} Slot
 * @property {number} start  ms since the epoch
 * @property {number} end
 * @property {string} label  short (axis)
 * @property {string} long  in the table and tooltips
 */

/**
 * The slots of a period ending now, in the browser's time zone, and the window to ask the server for.
 * @param {Period} period
 * @param {Date} now
 * @returns {{slots: Slot[], start: number, end: number}}  start and end in unix seconds
 */
export function slotsOf(period, now) {
  const spec = PERIODS[period];
  /** @type {Slot[]} */
  const slots = [];
  if (spec.unit === "hour") {
    const first = new Date(now);
    first.setMinutes(0, 0, 0);
    first.setHours(first.getHours() - (spec.slots - 1));
    for (let i = 0; i < spec.slots; i += 1) {
      const start = new Date(first);
      start.setHours(first.getHours() + i);
      const end = new Date(start);
      end.setHours(start.getHours() + 1);
      slots.push({ start: start.getTime(), end: end.getTime(),
        label: start.toLocaleTimeString(locale(), { hour: "2-digit", minute: "2-digit" }),
        long: start.toLocaleString(locale(), { weekday: "short", hour: "2-digit", minute: "2-digit" }) });
    }
  } else {
    const first = new Date(now);
    first.setHours(0, 0, 0, 0);
    first.setDate(first.getDate() - (spec.slots - 1));
    for (let i = 0; i < spec.slots; i += 1) {
      const start = new Date(first);
      start.setDate(first.getDate() + i);
      const end = new Date(start);
      end.setDate(start.getDate() + 1);
      slots.push({ start: start.getTime(), end: end.getTime(),
        label: start.toLocaleDateString(locale(), { month: "short", day: "numeric" }),
        long: start.toLocaleDateString(locale(), { weekday: "short", month: "short", day: "numeric" }) });
    }
  }
  return { slots, start: Math.floor(slots[0].start / 1000), end: Math.floor(now.getTime() / 1000) };
}

/**
 * Sum the buckets per series and slot; the biggest models first, the rest as "Other models".
 * @param {import("../types.js").UsageBucket[]} buckets
 * @param {Slot[]} slots
 * @param {Metric} metric
 */
export function tally(buckets, slots, metric) {
  /** @type {Map<string, number>} */
  const totals = new Map();
  for (const b of buckets) totals.set(b.model_name, (totals.get(b.model_name) ?? 0) + b[metric]);
  const ranked = [...totals.entries()].filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]).map(([m]) => m);
  const named = ranked.length > SERIES_MAX ? ranked.slice(0, SERIES_MAX - 1) : ranked;
  const other = ranked.length > named.length;
  const series = other ? [...named, t("chart.otherModels")] : [...named];
  const values = series.map(() => slots.map(() => 0));
  for (const b of buckets) {
    const at = b.created_at * 1000;
    const slot = slots.findIndex((s) => at >= s.start && at < s.end);
    const index = named.indexOf(b.model_name);
    const row = index >= 0 ? index : other ? series.length - 1 : -1;
    if (slot >= 0 && row >= 0) values[row][slot] += b[metric];
  }
  return { series, values };
}

/** @param {number} max */
function niceStep(max) {
  const raw = max / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const residual = raw / magnitude;
  return (residual > 5 ? 10 : residual > 2 ? 5 : residual > 1 ? 2 : 1) * magnitude;
}

/**
 * @param {object} input
 * @param {import("../types.js").UsageBucket[]} input.buckets
 * @param {Slot[]} input.slots
 * @param {Metric} input.metric
 * @param {string} input.periodLabel
 * @param {(value: number) => string} input.format  a value as shown (quota as the site shows it)
 * @param {number} input.width  the drawing's width in CSS pixels
 */
export function usageChart({ buckets, slots, metric, periodLabel, format, width }) {
  const { series, values } = tally(buckets, slots, metric);
  const titleText = t("chart.title", { metric: METRICS[metric](), period: periodLabel.toLowerCase() });
  if (series.length === 0) {
    return h("figure", { class: "chart" }, h("figcaption", {}, titleText),
      h("p", { class: "empty" }, t("chart.empty")));
  }
  const stackTops = slots.map((_, i) => values.reduce((sum, row) => sum + row[i], 0));
  const total = stackTops.reduce((a, b) => a + b, 0);
  const step = niceStep(Math.max(...stackTops));
  const top = Math.max(step, Math.ceil(Math.max(...stackTops) / step) * step);
  const plotW = Math.max(120, width - MARGIN.left - MARGIN.right);
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const slotW = plotW / slots.length;
  const barW = Math.max(2, slotW * 0.7);
  /** @param {number} v */
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH;

  const titleId = uid("chart-title");
  const descId = uid("chart-desc");
  const grid = [];
  for (let v = 0; v <= top + step / 2; v += step) {
    grid.push(svg("line", { class: "grid", x1: MARGIN.left, x2: MARGIN.left + plotW, y1: y(v), y2: y(v) }),
      svg("text", { class: "axis", x: MARGIN.left - 6, y: y(v), "text-anchor": "end", "dominant-baseline": "middle" },
        format(v)));
  }
  const every = Math.ceil(slots.length / Math.max(2, Math.floor(plotW / 72)));
  const labels = slots.map((s, i) => (i % every === 0
    ? svg("text", { class: "axis", x: MARGIN.left + slotW * i + slotW / 2, y: HEIGHT - 10, "text-anchor": "middle" },
      s.label)
    : null));
  const bars = slots.map((s, i) => {
    let base = 0;
    return series.map((name, k) => {
      const v = values[k][i];
      if (v <= 0) return null;
      const rect = svg("rect", { class: `series-${k}`, x: MARGIN.left + slotW * i + (slotW - barW) / 2,
        y: y(base + v), width: barW, height: Math.max(1, y(base) - y(base + v)) },
      svg("title", {}, `${name}, ${s.long}: ${format(v)}`));
      base += v;
      return rect;
    });
  });
  const drawing = svg("svg", { role: "img", "aria-labelledby": `${titleId} ${descId}`, width, height: HEIGHT,
    viewBox: `0 0 ${width} ${HEIGHT}` },
  svg("title", { id: titleId }, titleText),
  svg("desc", { id: descId }, t("chart.desc", { total: format(total), parts: series.map((name, k) => `${name} ${format(values[k].reduce((a, b) => a + b, 0))}`).join(t("common.listSeparator")) })),
  grid, bars, labels);

  const legend = h("ul", { class: "legend" }, series.map((name, k) => h("li", {},
    h("span", { class: `swatch series-${k}`, "aria-hidden": "true" }), name)));
  const table = h("table", {},
    h("caption", {}, titleText),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, slotKind(slots)), series.map((n) => h("th", { scope: "col" }, n)))),
    h("tbody", {}, slots.map((s, i) => (stackTops[i] > 0
      ? h("tr", {}, h("th", { scope: "row" }, s.long), series.map((_, k) => h("td", {}, format(values[k][i]))))
      : null))));
  return h("figure", { class: "chart" },
    h("figcaption", {}, titleText),
    drawing,
    legend,
    h("details", {}, h("summary", {}, t("chart.showNumbers")), h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("chart.theNumbers") }, table)));
}

/**
 * The table's first column heading: what one slot is.
 * @param {Slot[]} slots
 */
function slotKind(slots) {
  return slots.length > 1 && slots[1].start - slots[0].start <= 3600000 ? t("chart.hour") : t("chart.day");
}
