/**
 * Orders (`/orders`, admins): every user's top-up orders, newest first, paged and searched by a part of
 * the trade number on the server (`GET /api/user/topup`); a pending (or in review) order completed by
 * hand after a confirmation (`POST /api/user/topup/complete`), which credits its quota to the owner once.
 * Calls at load: `GET /api/user/topup`.
 */

import { h, replace } from "../dom.js";
import { heading } from "../forms.js";
import { dateTime } from "../site.js";
import { confirmAction } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";

/** @typedef {import("../types.js").TopUp} TopUp */

const ORDER_STATUS = /** @type {Record<string, string>} */ ({
  pending: "Pending", review: "In review", success: "Completed", failed: "Failed", expired: "Expired",
});

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, site, shell } = ctx;
  /** @type {PagedTable<TopUp>} */
  const table = new PagedTable();

  /** @param {TopUp} order */
  const complete = async (order) => {
    try {
      const sure = await confirmAction({ title: "Complete this order by hand?",
        message: `Order ${order.trade_no} is marked paid and user #${order.user_id} is credited `
          + `${site.quota(order.amount * site.status.quota_per_unit)}. Do this only when the payment arrived.`,
        confirm: "Complete order" });
      if (!sure) return;
      await api.post("/api/user/topup/complete", { trade_no: order.trade_no });
      shell.say(`Order ${order.trade_no} completed.`);
      await table.reload();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };

  replace(main,
    heading("Orders"),
    h("p", {}, "Every top-up order of every user. An order still pending can be completed by hand."),
    table);
  await table.configure({
    caption: "Top-up orders",
    searchLabel: "Search by trade number",
    empty: "No top-up orders yet.",
    fetch: ({ p, page_size, keyword }) => api.get("/api/user/topup", { p, page_size, keyword }),
    columns: [
      { label: "Trade number", cell: (order) => h("span", { class: "mono" }, order.trade_no) },
      { label: "User", cell: (order) => `#${order.user_id}` },
      { label: "Amount", cell: (order) => String(order.amount) },
      { label: "Paid", cell: (order) => String(order.money) },
      { label: "Method", cell: (order) => [order.payment_provider, order.payment_method].filter(Boolean).join(" · ") || "—" },
      { label: "Status", cell: (order) => h("span", { class: `badge status-${order.status}` },
        ORDER_STATUS[order.status] ?? order.status) },
      { label: "Created", cell: (order) => dateTime(order.create_time) },
      { label: "Completed", cell: (order) => dateTime(order.complete_time, "—") },
      { label: "Actions", cell: (order) => (order.status === "pending" || order.status === "review"
        ? h("button", { type: "button", class: "secondary", "aria-label": `Complete ${order.trade_no}`,
          onclick: () => void complete(order) }, "Complete")
        : "—") },
    ],
  });
}
