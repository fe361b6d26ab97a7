/**
 * Orders (`/orders`, admins): every user's top-up orders, newest first, paged and searched by a part of
 * the trade number on the server (`GET /api/user/topup`); a pending (or in review) order completed by
 * hand after a confirmation (`POST /api/user/topup/complete`), which credits its quota to the owner once.
 * Each order names its owner by username (the reply's `username`) and its payment in US dollars. Calls at
 * load: `GET /api/user/topup`.
 */

import { h, replace } from "../dom.js";
import { heading, rowLabel } from "../forms.js";
import { dateTime } from "../site.js";
import { confirmAction } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { TOP_UP_STATUS_LABEL } from "../generated/enums.js";
import { labelOf, number, t, usd } from "../i18n.js";

/** @typedef {import("../types.js").TopUp} TopUp */


/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, site, shell } = ctx;
  /** @type {PagedTable<TopUp>} */
  const table = new PagedTable();

  /** @param {TopUp} order */
  const complete = async (order) => {
    try {
      const sure = await confirmAction({ title: t("orders.completeTitle"),
        message: t("orders.completeMessage", { order: order.trade_no, user: order.username || `#${order.user_id}`, amount: site.quota(order.amount * site.status.quota_per_unit) }),
        confirm: t("orders.completeOrder") });
      if (!sure) return;
      await api.post("/api/user/topup/complete", { trade_no: order.trade_no });
      shell.say(t("orders.completed", { order: order.trade_no }));
      await table.reload();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };

  replace(main,
    heading(t("page.orders")),
    h("p", {}, t("orders.intro")),
    table);
  await table.configure({
    caption: t("orders.caption"),
    searchLabel: t("orders.search"),
    empty: t("orders.empty"),
    fetch: ({ p, page_size, keyword }) => api.get("/api/user/topup", { p, page_size, keyword }),
    columns: [
      { label: t("orders.tradeNo"), cell: (order) => h("span", { class: "mono" }, order.trade_no) },
      { label: t("col.user"), cell: (order) => order.username || `#${order.user_id}` },
      { label: t("col.amount"), cell: (order) => number(order.amount), numeric: true },
      { label: t("topup.paid"), cell: (order) => usd(order.money), numeric: true },
      { label: t("orders.method"), cell: (order) => [order.payment_provider, order.payment_method].filter(Boolean).join(" · ") || "—" },
      { label: t("col.status"), cell: (order) => h("span", { class: `badge status-${order.status}` },
        labelOf(TOP_UP_STATUS_LABEL, order.status)) },
      { label: t("col.created"), cell: (order) => dateTime(order.create_time) },
      { label: t("col.completed"), cell: (order) => dateTime(order.complete_time, "—") },
      { label: t("col.actions"), cell: (order) => (order.status === "pending" || order.status === "review"
        ? h("button", { type: "button", class: "secondary", "aria-label": rowLabel(t("orders.complete"), order.trade_no),
          onclick: () => void complete(order) }, t("orders.complete"))
        : "—") },
    ],
  });
}
