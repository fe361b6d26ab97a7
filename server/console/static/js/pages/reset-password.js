/**
 * The password reset link's page (`/user/reset?email=…&token=…`, the address the reset e-mail holds):
 * choose a new password (`POST /api/user/reset`). The token is taken out of the address bar at once, so
 * it stays in no history entry. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";
import { t } from "../i18n.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api, session, router, shell, url }) {
  const email = url.searchParams.get("email") ?? "";
  const token = url.searchParams.get("token") ?? "";
  if (!email || !token) {
    replace(main, h("section", { class: "narrow" }, heading(t("page.resetPassword")),
      h("p", {}, t("reset.incomplete"),
        h("a", { href: "/forgot-password" }, t("reset.askNew")))));
    return;
  }
  window.history.replaceState(null, "", "/user/reset");
  const reset = form(t("page.resetPassword"), async (f) => {
    const password = valueOf(f, "password");
    if (valueOf(f, "confirm") !== password) throw refuse("confirm", t("common.noMatch"));
    await api.post("/api/user/reset", { email, token, password });
    session.forget();  // every session of the account ended with the change
    shell.flash(t("reset.changed"));
    await router.go("/login");
  },
  field(t("field.email"), "email", { value: email, readonly: true }),
  field(t("field.newPassword"), "password", { type: "password", autocomplete: "new-password", required: true,
    hint: t("field.passwordHint") }),
  field(t("field.confirmPassword"), "confirm", { type: "password", autocomplete: "new-password", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, t("reset.change"))));
  replace(main, h("section", { class: "narrow" }, heading(t("page.resetPassword")), reset,
    h("p", { class: "links" }, t("reset.expired"), h("a", { href: "/forgot-password" }, t("reset.askNewOne")))));
}
