/**
 * Sign in (`/login`): username (or e-mail) and password (`POST /api/user/login`); when the account has
 * 2FA on, the second step asks for a code (`POST /api/user/login/2fa`). When the site has passkeys on
 * (`passkey_login` of `/api/status`) and the browser can use them, `Sign in with a passkey`
 * (`POST /api/user/passkey/login/begin`, `navigator.credentials.get()`, `…/login/finish`) signs in like a
 * password, with no second step. No calls at load.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, valueOf } from "../forms.js";
import { nextOf } from "../pages.js";
import { ceremony, passkeysSupported } from "../webauthn.js";
import { t } from "../i18n.js";

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api, session, router, site, url }) {
  /** @param {any} login */
  const finish = async (login) => {
    await session.signedIn(login);
    await router.go(nextOf(url), { replace: true });
  };
  const secondStep = () => {
    const step = form(t("login.twoFactor"), async (f) => {
      await finish(await api.post("/api/user/login/2fa", { code: valueOf(f, "code").trim() }));
    },
    field(t("login.code"), "code", { autocomplete: "one-time-code", inputmode: "numeric", required: true,
      hint: t("login.codeHint") }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, t("verify.verify"))));
    replace(main, h("section", { class: "narrow" }, heading(t("login.twoFactor")),
      h("p", {}, t("login.passwordRight")), step));
    step.querySelector("input")?.focus();
  };
  const signIn = form(t("page.login"), async (f) => {
    const reply = await api.post("/api/user/login", {
      username: valueOf(f, "username").trim(), password: valueOf(f, "password") });
    if (reply && reply.require_2fa) secondStep();
    else await finish(reply);
  },
  field(t("field.username"), "username", { autocomplete: "username", required: true, hint: t("login.usernameHint") }),
  field(t("field.password"), "password", { type: "password", autocomplete: "current-password", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, t("page.login"))));
  const withPasskey = site.status.passkey_login && passkeysSupported()
    ? form(t("login.withPasskey"), async () => {
      await finish(await ceremony(api, "/api/user/passkey/login", "get"));
    },
    h("div", { class: "actions" }, h("button", { type: "submit", class: "secondary" }, t("login.withPasskey"))))
    : null;
  replace(main, h("section", { class: "narrow" }, heading(t("page.login")), signIn, withPasskey,
    h("p", { class: "links" }, h("a", { href: "/forgot-password" }, t("login.forgot")), " · ",
      h("a", { href: "/register" }, t("page.register")))));
}
