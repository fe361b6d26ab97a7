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

/** @param {import("../types.js").PageContext} ctx */
export function render({ main, api, session, router, site, url }) {
  /** @param {any} login */
  const finish = async (login) => {
    await session.signedIn(login);
    await router.go(nextOf(url), { replace: true });
  };
  const secondStep = () => {
    const step = form("Two-factor authentication", async (f) => {
      await finish(await api.post("/api/user/login/2fa", { code: valueOf(f, "code").trim() }));
    },
    field("Authentication code", "code", { autocomplete: "one-time-code", inputmode: "numeric", required: true,
      hint: "The 6-digit code of your authenticator app, or one of your backup codes." }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Verify")));
    replace(main, h("section", { class: "narrow" }, heading("Two-factor authentication"),
      h("p", {}, "Your password was right. Your account also needs its second factor."), step));
    step.querySelector("input")?.focus();
  };
  const signIn = form("Sign in", async (f) => {
    const reply = await api.post("/api/user/login", {
      username: valueOf(f, "username").trim(), password: valueOf(f, "password") });
    if (reply && reply.require_2fa) secondStep();
    else await finish(reply);
  },
  field("Username", "username", { autocomplete: "username", required: true, hint: "Or your e-mail address." }),
  field("Password", "password", { type: "password", autocomplete: "current-password", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")));
  const withPasskey = site.status.passkey_login && passkeysSupported()
    ? form("Sign in with a passkey", async () => {
      await finish(await ceremony(api, "/api/user/passkey/login", "get"));
    },
    h("div", { class: "actions" }, h("button", { type: "submit", class: "secondary" }, "Sign in with a passkey")))
    : null;
  replace(main, h("section", { class: "narrow" }, heading("Sign in"), signIn, withPasskey,
    h("p", { class: "links" }, h("a", { href: "/forgot-password" }, "Forgotten password?"), " · ",
      h("a", { href: "/register" }, "Create an account"))));
}
