/**
 * Top up (`/topup`, every signed-in user): the balance; redeem a code (`POST /api/user/topup`); buy quota
 * online when the site takes payments (`GET /api/user/topup/info`; the price of an amount from
 * `POST /api/user/stripe/amount`; `POST /api/user/stripe/pay` answers the provider's checkout page, which
 * opens in this tab — only when it is an `https:` address, as the server checks too); and your own orders
 * (`GET /api/user/topup/self`). Calls at load: the top-up settings and the orders (2), and `/api/user/self`
 * when the one read at load is older than 5 s.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, run, valueOf } from "../forms.js";
import { dateTime } from "../site.js";
import { PagedTable } from "../widgets/paged-table.js";
import { TOP_UP_STATUS_LABEL } from "../generated/enums.js";
import { labelOf, number, t, usd } from "../i18n.js";

/** @typedef {import("../generated/api.js").TopUpInfo} TopUpInfo  `GET /api/user/topup/info` */

/** @typedef {import("../generated/api.js").TopUpView} Order  an order (`GET /api/user/topup/self`) */


/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, session, site, shell } = ctx;
  const balance = h("dd", {});
  const showBalance = async (/** @type {number} */ maxAge) => {
    const user = await session.refresh(maxAge);
    balance.textContent = site.quota(user.quota);
  };
  /** @type {PagedTable<Order>} */
  const orders = new PagedTable();

  const redeem = form(t("topup.redeemForm"), async (element) => {
    const key = valueOf(element, "key");
    if (!key.trim()) throw refuse("key", t("topup.enterCode"));
    /** @type {number} */
    const added = await api.post("/api/user/topup", { key });
    element.reset();
    await showBalance(0);
    shell.say(t("topup.redeemed", { amount: site.quota(added) }));
  },
  field(t("topup.code"), "key", { autocomplete: "off", hint: t("topup.codeHint") }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("topup.redeem"))));

  const buyArea = h("div", {});
  replace(main,
    heading(t("page.topup")),
    h("dl", { class: "cards" }, h("div", { class: "card" }, h("dt", {}, t("dash.balance")), balance)),
    h("section", { "aria-labelledby": "redeem-heading" }, h("h2", { id: "redeem-heading" }, t("topup.redeemForm")), redeem),
    h("section", { "aria-labelledby": "buy-heading" }, h("h2", { id: "buy-heading" }, t("topup.buyOnline")), buyArea),
    h("section", { "aria-labelledby": "orders-heading" }, h("h2", { id: "orders-heading" }, t("topup.yourOrders")), orders));

  /** @type {[TopUpInfo, void, void]} */
  const [info] = await Promise.all([
    api.get("/api/user/topup/info"),
    showBalance(5000),
    orders.configure({
      caption: t("topup.ordersCaption"),
      searchLabel: t("topup.searchOrder"),
      empty: t("topup.noOrders"),
      fetch: ({ p, page_size, keyword }) => api.get("/api/user/topup/self", { p, page_size, keyword }),
      columns: [
        { label: t("topup.order"), cell: (o) => o.trade_no },
        { label: t("col.amount"), cell: (o) => number(o.amount) },
        { label: t("topup.paid"), cell: (o) => usd(o.money) },
        { label: t("col.status"), cell: (o) => labelOf(TOP_UP_STATUS_LABEL, o.status) },
        { label: t("col.created"), cell: (o) => dateTime(o.create_time) },
        { label: t("col.completed"), cell: (o) => dateTime(o.complete_time, "") },
      ],
    }),
  ]);
  replace(buyArea, info.enable_stripe_topup ? buyForm(ctx, info)
    : h("p", {}, t("topup.noPayments")));
}

/**
 * The provider's checkout page, if the payer may be sent there: an absolute `https:` address without a user
 * name or password (server/payments/checkout.py `payer_url` says why); else an error, and nothing opens.
 * @param {unknown} link
 * @returns {string}
 */
function checkoutPage(link) {
  let url = null;
  try {
    url = typeof link === "string" ? new URL(link) : null;
  } catch {
    url = null;
  }
  if (!url || url.protocol !== "https:" || !url.hostname || url.username || url.password) {
    throw new Error(t("topup.badCheckout"));
  }
  return url.href;
}

/**
 * @param {import("../types.js").PageContext} ctx
 * @param {TopUpInfo} info
 */
function buyForm({ api }, info) {
  const price = h("p", { class: "hint", role: "status" });
  const amountOf = (/** @type {HTMLFormElement} */ element) => {
    const text = valueOf(element, "amount").trim();
    if (!/^\d+$/.test(text)) throw refuse("amount", t("topup.wholeUnits"));
    return Number(text);
  };
  const element = form(t("topup.buyForm"), async (buy) => {
    const amount = amountOf(buy);
    const here = `${window.location.origin}/topup`;
    /** @type {import("../generated/api.js").PayLink} */
    const paid = await api.post("/api/user/stripe/pay", { amount, success_url: here, cancel_url: here });
    window.location.assign(checkoutPage(paid.pay_link));
  },
  field(t("col.amount"), "amount", { type: "number", min: String(info.stripe_min_topup), step: "1",
    inputmode: "numeric", value: String(info.stripe_min_topup),
    hint: t("topup.amountHint", { min: number(info.stripe_min_topup), price: usd(info.stripe_unit_price) }) }),
  price,
  h("div", { class: "actions inline" },
    h("button", { type: "button", class: "secondary", onclick: () => void quote() }, t("topup.showPrice")),
    h("button", { type: "submit" }, t("topup.pay"))));
  const quote = async () => {
    await run(element, async () => {
      /** @type {string} */
      const total = await api.post("/api/user/stripe/amount", { amount: amountOf(element) });
      price.textContent = t("topup.youPay", { total: usd(Number(total)) });
    });
  };
  return element;
}
