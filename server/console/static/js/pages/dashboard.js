/**
 * Dashboard (`/`, every signed-in user): balance, quota used and request count (`GET /api/user/self`,
 * already read when the console loaded), and a chart of the user's own usage by model over the last 24
 * hours, 7 or 30 days (`GET /api/data/self`); an admin may choose everyone's usage instead, summed per
 * model (`GET /api/data/`). Admins also get the operator's section below (dashboard-top.js: who and what
 * spent most, each channel's calls and errors, over a range of days). Calls at load: `GET /api/data/self`
 * (and `/api/user/self` when the one read at load is older than 5 s), and for admins `GET /api/data/top`; one
 * more each time the period, whose usage or the operator's range changes.
 */

import { h, replace, uid } from "../dom.js";
import { heading } from "../forms.js";
import { METRICS, PERIODS, slotsOf, usageChart } from "../widgets/usage-chart.js";
import { number, t } from "../i18n.js";

/** The lowest role that may read everyone's usage (`GET /api/data/` is for admins). */
const ADMIN = 10;

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, session, site } = ctx;
  const user = await session.refresh(5000);
  /** @param {string} label @param {string} value */
  const figure = (label, value) => h("div", { class: "card" }, h("dt", {}, label), h("dd", {}, value));
  const periodId = uid("period");
  const metricId = uid("metric");
  const period = h("select", { id: periodId },
    Object.entries(PERIODS).map(([value, spec]) => h("option", { value }, spec.label())));
  period.value = "week";
  const metric = h("select", { id: metricId },
    Object.entries(METRICS).map(([value, label]) => h("option", { value }, label())));
  const area = h("div", { class: "chart-area" });
  const whoseId = uid("whose");
  // admins and root may see everyone's usage, summed per model and hour (`GET /api/data/`)
  const whose = user.role >= ADMIN ? h("select", { id: whoseId },
    h("option", { value: "self" }, t("dash.yours")), h("option", { value: "all" }, t("dash.everyone"))) : null;
  const operator = user.role >= ADMIN ? h("section", { class: "operator" }) : null;
  replace(main,
    heading(t("page.dashboard")),
    h("dl", { class: "cards" },
      figure(t("dash.balance"), site.quota(user.quota)),
      figure(t("dash.used"), site.quota(user.used_quota)),
      figure(t("dash.requests"), number(user.request_count))),
    h("section", { "aria-labelledby": `${periodId}-heading` },
      h("h2", { id: `${periodId}-heading` }, t("dash.usageByModel")),
      h("div", { class: "controls" },
        h("div", { class: "control" }, h("label", { for: periodId }, t("dash.period")), period),
        h("div", { class: "control" }, h("label", { for: metricId }, t("dash.show")), metric),
        whose ? h("div", { class: "control" }, h("label", { for: whoseId }, t("dash.whose")), whose) : null),
      area),
    operator);

  /** @type {{buckets: import("../types.js").UsageBucket[], slots: import("../widgets/usage-chart.js").Slot[]}} */
  let data = { buckets: [], slots: [] };
  const draw = () => {
    const chosen = /** @type {import("../widgets/usage-chart.js").Metric} */ (metric.value);
    const spec = PERIODS[/** @type {import("../widgets/usage-chart.js").Period} */ (period.value)];
    const format = chosen === "quota" ? (/** @type {number} */ v) => site.quota(v)
      : (/** @type {number} */ v) => number(Math.round(v));
    replace(area, usageChart({ buckets: data.buckets, slots: data.slots, metric: chosen, periodLabel: spec.label(),
      format, width: Math.max(280, Math.min(1200, (area.clientWidth || main.clientWidth || 640) - 34)) }));
  };
  const load = async () => {
    const span = slotsOf(/** @type {import("../widgets/usage-chart.js").Period} */ (period.value), new Date());
    area.setAttribute("aria-busy", "true");
    replace(area, h("p", { class: "loading" }, t("common.loading")));
    try {
      const path = whose?.value === "all" ? "/api/data/" : "/api/data/self";
      /** @type {import("../types.js").UsageBucket[]} */
      const buckets = await api.get(path, { start_timestamp: span.start, end_timestamp: span.end });
      data = { buckets, slots: span.slots };
      draw();
    } catch (error) {
      replace(area, h("p", { class: "form-error", role: "alert" }, error instanceof Error ? error.message : String(error)));
    } finally {
      area.removeAttribute("aria-busy");
    }
  };
  period.addEventListener("change", () => void load());
  whose?.addEventListener("change", () => void load());
  metric.addEventListener("change", draw);
  await Promise.all([load(),
    operator ? import("./dashboard-top.js").then(({ renderTop }) => renderTop(operator, ctx)) : null]);
}
