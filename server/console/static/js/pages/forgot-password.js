/**
 * Forgotten password (`/forgot-password`): mail a reset link to an address (`GET /api/reset_password`).
 * The answer is the same whether or not an account has the address. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, valueOf } from "../forms.js";
import { t } from "../i18n.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api }) {
  const done = h("p", { role: "status" });
  const ask = form(t("forgot.form"), async (f) => {
    const email = valueOf(f, "email").trim();
    await api.get("/api/reset_password", { email });
    done.textContent = t("forgot.sent", { email });
  },
  field(t("field.email"), "email", { type: "email", autocomplete: "email", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, t("forgot.send"))));
  replace(main, h("section", { class: "narrow" }, heading(t("page.forgotPassword")),
    h("p", {}, t("forgot.intro")),
    ask, done, h("p", { class: "links" }, h("a", { href: "/login" }, t("forgot.back")))));
}
