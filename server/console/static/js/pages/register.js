/**
 * Create an account (`/register`, `POST /api/user/register`). When the site verifies e-mail addresses,
 * the address and the code mailed to it (`GET /api/verification`) are part of the form. An invitation
 * link's `?aff=` fills the invitation code. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, run, valueOf } from "../forms.js";
import { t } from "../i18n.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api, site, router, shell, url }) {
  const verify = site.status.email_verification;
  const sendCode = h("button", { type: "button", class: "secondary" }, t("register.sendCode"));
  const register = form(t("page.register"), async (f) => {
    const password = valueOf(f, "password");
    if (valueOf(f, "confirm") !== password) throw refuse("confirm", t("common.noMatch"));
    /** @type {Record<string, string>} */
    const body = { username: valueOf(f, "username").trim(), password, aff_code: valueOf(f, "aff_code") };
    if (verify) {
      body.email = valueOf(f, "email").trim();
      body.verification_code = valueOf(f, "verification_code").trim();
    }
    await api.post("/api/user/register", body);
    shell.flash(t("register.ready"));
    await router.go("/login");
  },
  field(t("field.username"), "username", { autocomplete: "username", required: true, hint: t("register.usernameHint") }),
  field(t("field.password"), "password", { type: "password", autocomplete: "new-password", required: true,
    hint: t("field.passwordHint") }),
  field(t("field.confirmPassword"), "confirm", { type: "password", autocomplete: "new-password", required: true }),
  verify ? [
    field(t("field.email"), "email", { type: "email", autocomplete: "email", required: true }),
    h("div", { class: "actions inline" }, sendCode),
    field(t("field.verificationCode"), "verification_code", { autocomplete: "one-time-code", inputmode: "numeric",
      required: true, hint: t("register.codeHint") }),
  ] : null,
  field(t("register.invitation"), "aff_code", { value: url.searchParams.get("aff") ?? "", hint: t("common.optional") }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, t("register.create"))));
  sendCode.addEventListener("click", () => void run(register, async () => {
    const email = valueOf(register, "email").trim();
    if (!email) throw refuse("email", t("common.required"));
    await api.get("/api/verification", { email });
    shell.say(t("register.codeSent", { email }));
  }));
  replace(main, h("section", { class: "narrow" }, heading(t("page.register")), register,
    h("p", { class: "links" }, t("register.haveAccount"), h("a", { href: "/login" }, t("page.login")))));
}
