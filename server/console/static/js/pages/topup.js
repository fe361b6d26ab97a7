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

/**
 * `GET /api/user/topup/info` (the fields the page reads).
 * @typedef {object} TopUpInfo
 * @property {boolean} enable_stripe_topup
 * @property {number} stripe_min_topup
 * @property {number} stripe_unit_price
 * @property {unknown[]} amount_options
 */

/**
 * An order (`GET /api/user/topup/self`).
 * @typedef {object} Order
 * @property {number} id
 * @property {number} amount
 * @property {number} money
 * @property {string} trade_no
 * @property {string} payment_method
 * @property {number} create_time
 * @property {number} complete_time
 * @property {string} status
 */

const ORDER_STATUS = /** @type {Record<string, string>} */ ({
  pending: "Pending", success: "Paid", failed: "Failed", expired: "Expired", review: "In review",
});

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

  const redeem = form("Redeem a code", async (element) => {
    const key = valueOf(element, "key");
    if (!key.trim()) throw refuse("key", "enter the code");
    /** @type {number} */
    const added = await api.post("/api/user/topup", { key });
    element.reset();
    await showBalance(0);
    shell.say(`Code redeemed: ${site.quota(added)} added to your balance.`);
  },
  field("Redemption code", "key", { autocomplete: "off", hint: "a code you were given" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, "Redeem")));

  const buyArea = h("div", {});
  replace(main,
    heading("Top up"),
    h("dl", { class: "cards" }, h("div", { class: "card" }, h("dt", {}, "Balance"), balance)),
    h("section", { "aria-labelledby": "redeem-heading" }, h("h2", { id: "redeem-heading" }, "Redeem a code"), redeem),
    h("section", { "aria-labelledby": "buy-heading" }, h("h2", { id: "buy-heading" }, "Buy online"), buyArea),
    h("section", { "aria-labelledby": "orders-heading" }, h("h2", { id: "orders-heading" }, "Your orders"), orders));

  /** @type {[TopUpInfo, void, void]} */
  const [info] = await Promise.all([
    api.get("/api/user/topup/info"),
    showBalance(5000),
    orders.configure({
      caption: "Your orders",
      searchLabel: "Search by order number",
      empty: "No orders yet.",
      fetch: ({ p, page_size, keyword }) => api.get("/api/user/topup/self", { p, page_size, keyword }),
      columns: [
        { label: "Order", cell: (o) => o.trade_no },
        { label: "Amount", cell: (o) => o.amount.toLocaleString() },
        { label: "Paid", cell: (o) => `$${o.money.toFixed(2)}` },
        { label: "Status", cell: (o) => ORDER_STATUS[o.status] ?? o.status },
        { label: "Created", cell: (o) => dateTime(o.create_time) },
        { label: "Completed", cell: (o) => dateTime(o.complete_time, "") },
      ],
    }),
  ]);
  replace(buyArea, info.enable_stripe_topup ? buyForm(ctx, info)
    : h("p", {}, "This site does not take payments online. Ask an administrator for a code."));
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
    throw new Error("The payment provider did not answer an https: checkout page; nothing was opened.");
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
    if (!/^\d+$/.test(text)) throw refuse("amount", "must be a whole number of units");
    return Number(text);
  };
  const element = form("Buy quota online", async (buy) => {
    const amount = amountOf(buy);
    const here = `${window.location.origin}/topup`;
    /** @type {{pay_link: unknown}} */
    const paid = await api.post("/api/user/stripe/pay", { amount, success_url: here, cancel_url: here });
    window.location.assign(checkoutPage(paid.pay_link));
  },
  field("Amount", "amount", { type: "number", min: String(info.stripe_min_topup), step: "1",
    inputmode: "numeric", value: String(info.stripe_min_topup),
    hint: `Units of one US dollar of quota each, at least ${info.stripe_min_topup}; $${info.stripe_unit_price} a unit.` }),
  price,
  h("div", { class: "actions inline" },
    h("button", { type: "button", class: "secondary", onclick: () => void quote() }, "Show the price"),
    h("button", { type: "submit" }, "Pay")));
  const quote = async () => {
    await run(element, async () => {
      /** @type {string} */
      const total = await api.post("/api/user/stripe/amount", { amount: amountOf(element) });
      price.textContent = `You pay $${total}.`;
    });
  };
  return element;
}
