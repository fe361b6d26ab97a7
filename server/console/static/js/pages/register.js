/**
 * Create an account (`/register`, `POST /api/user/register`). When the site verifies e-mail addresses,
 * the address and the code mailed to it (`GET /api/verification`) are part of the form. An invitation
 * link's `?aff=` fills the invitation code. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, run, valueOf } from "../forms.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api, site, router, shell, url }) {
  const verify = site.status.email_verification;
  const sendCode = h("button", { type: "button", class: "secondary" }, "Send code");
  const register = form("Create an account", async (f) => {
    const password = valueOf(f, "password");
    if (valueOf(f, "confirm") !== password) throw refuse("confirm", "does not match the password");
    /** @type {Record<string, string>} */
    const body = { username: valueOf(f, "username").trim(), password, aff_code: valueOf(f, "aff_code") };
    if (verify) {
      body.email = valueOf(f, "email").trim();
      body.verification_code = valueOf(f, "verification_code").trim();
    }
    await api.post("/api/user/register", body);
    shell.flash("Your account is ready. Sign in.");
    await router.go("/login");
  },
  field("Username", "username", { autocomplete: "username", required: true, hint: "At most 20 characters." }),
  field("Password", "password", { type: "password", autocomplete: "new-password", required: true,
    hint: "8 to 64 characters." }),
  field("Confirm password", "confirm", { type: "password", autocomplete: "new-password", required: true }),
  verify ? [
    field("E-mail", "email", { type: "email", autocomplete: "email", required: true }),
    h("div", { class: "actions inline" }, sendCode),
    field("Verification code", "verification_code", { autocomplete: "one-time-code", inputmode: "numeric",
      required: true, hint: "The code mailed to the address above; it works for 10 minutes." }),
  ] : null,
  field("Invitation code", "aff_code", { value: url.searchParams.get("aff") ?? "", hint: "Optional." }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Create account")));
  sendCode.addEventListener("click", () => void run(register, async () => {
    const email = valueOf(register, "email").trim();
    if (!email) throw refuse("email", "is required");
    await api.get("/api/verification", { email });
    shell.say(`A code was sent to ${email}.`);
  }));
  replace(main, h("section", { class: "narrow" }, heading("Create an account"), register,
    h("p", { class: "links" }, "Already have an account? ", h("a", { href: "/login" }, "Sign in"))));
}
