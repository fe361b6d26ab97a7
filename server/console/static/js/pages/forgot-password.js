/**
 * Forgotten password (`/forgot-password`): mail a reset link to an address (`GET /api/reset_password`).
 * The answer is the same whether or not an account has the address. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, valueOf } from "../forms.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api }) {
  const done = h("p", { role: "status" });
  const ask = form("Send a reset link", async (f) => {
    const email = valueOf(f, "email").trim();
    await api.get("/api/reset_password", { email });
    done.textContent = `If an account uses ${email}, a link to choose a new password is on its way. `
      + "It works once, for 15 minutes.";
  },
  field("E-mail", "email", { type: "email", autocomplete: "email", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Send reset link")));
  replace(main, h("section", { class: "narrow" }, heading("Forgotten password"),
    h("p", {}, "Enter the e-mail address of your account to receive a link to choose a new password."),
    ask, done, h("p", { class: "links" }, h("a", { href: "/login" }, "Back to sign in"))));
}
