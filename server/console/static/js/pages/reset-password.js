/**
 * The password reset link's page (`/user/reset?email=…&token=…`, the address the reset e-mail holds):
 * choose a new password (`POST /api/user/reset`). The token is taken out of the address bar at once, so
 * it stays in no history entry. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api, session, router, shell, url }) {
  const email = url.searchParams.get("email") ?? "";
  const token = url.searchParams.get("token") ?? "";
  if (!email || !token) {
    replace(main, h("section", { class: "narrow" }, heading("Choose a new password"),
      h("p", {}, "This page opens from the link in a password reset e-mail, and that link is incomplete. ",
        h("a", { href: "/forgot-password" }, "Ask for a new link."))));
    return;
  }
  window.history.replaceState(null, "", "/user/reset");
  const reset = form("Choose a new password", async (f) => {
    const password = valueOf(f, "password");
    if (valueOf(f, "confirm") !== password) throw refuse("confirm", "does not match the password");
    await api.post("/api/user/reset", { email, token, password });
    session.forget();  // every session of the account ended with the change
    shell.flash("Your password is changed. Sign in with the new one.");
    await router.go("/login");
  },
  field("E-mail", "email", { value: email, readonly: true }),
  field("New password", "password", { type: "password", autocomplete: "new-password", required: true,
    hint: "8 to 64 characters." }),
  field("Confirm password", "confirm", { type: "password", autocomplete: "new-password", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Change password")));
  replace(main, h("section", { class: "narrow" }, heading("Choose a new password"), reset,
    h("p", { class: "links" }, "Link expired? ", h("a", { href: "/forgot-password" }, "Ask for a new one."))));
}
