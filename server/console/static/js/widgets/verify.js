/**
 * The secure-verification prompt (docs/api/auth.md#secure-verification): when an action answers 403
 * `VERIFICATION_REQUIRED` (or `VERIFICATION_EXPIRED`), a dialog asks the person to prove it is them —
 * with the code of their authenticator app (`POST /api/verify`, method `2fa`), or with one of their
 * passkeys (`POST /api/user/passkey/verify/begin`, `navigator.credentials.get()`,
 * `POST /api/user/passkey/verify/finish`, then `POST /api/verify`, method `passkey`) — and then runs the
 * action again. The verification lasts 5 minutes on this session.
 */

import { ApiError } from "../api.js";
import { h } from "../dom.js";
import { field, form, run, valueOf } from "../forms.js";
import { ceremony, passkeysSupported } from "../webauthn.js";
import { openDialog } from "./dialog.js";
import { t } from "../i18n.js";

/**
 * Whether `error` is the server asking for a secure verification first.
 * @param {unknown} error
 * @returns {error is ApiError}
 */
export function needsVerification(error) {
  return error instanceof ApiError && (error.code === "VERIFICATION_REQUIRED" || error.code === "VERIFICATION_EXPIRED");
}

/**
 * Open the prompt; once the server accepts a proof, close it and run `then`.
 * @param {import("../api.js").Api} api
 * @param {string} why  the server's message
 * @param {() => void} then
 * @param {{twoFactor?: boolean, passkey?: boolean}} [ways]  which proofs to offer (default: the code only)
 */
export function verifyThen(api, why, then, { twoFactor = true, passkey = false } = {}) {
  const withPasskey = passkey && passkeysSupported();
  const dialog = openDialog(t("verify.title"));
  const passkeyProof = async () => {
    await ceremony(api, "/api/user/passkey/verify", "get");
    await api.post("/api/verify", { method: "passkey" });
    dialog.close();
    then();
  };
  const usePasskey = () => run(prompt, passkeyProof);
  const ways = twoFactor
    ? [h("p", {}, t(withPasskey ? "verify.withCodeOrPasskey" : "verify.withCode", { why })),
      field(t("verify.code"), "code", { autocomplete: "one-time-code", inputmode: "numeric", required: true })]
    : [h("p", {}, t("verify.withPasskey", { why }))];
  const prompt = form(t("verify.title"), async (f) => {
    if (!twoFactor) return passkeyProof();
    await api.post("/api/verify", { method: "2fa", code: valueOf(f, "code").trim() });
    dialog.close();
    then();
  },
  ...ways,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    withPasskey && twoFactor ? h("button", { type: "button", class: "secondary", onclick: () => void usePasskey() }, t("verify.usePasskey")) : null,
    h("button", { type: "submit" }, twoFactor ? t("verify.verify") : t("verify.usePasskey"))));
  dialog.body.append(prompt);
  (prompt.querySelector("input") ?? prompt.querySelector("button[type=submit]"))?.focus();
}

/**
 * Ask for a verification the person can give: the code when their account has 2FA on, else one of their
 * passkeys when they have one and the browser can use it; with neither, say first what to set up (the
 * Account page), instead of asking for a code they cannot have.
 * @param {import("../api.js").Api} api
 * @param {string} why  the server's message
 * @param {() => void} then
 * @param {(path: string) => void} open  moves to a console page
 */
export async function verifyOrSetUp(api, why, then, open) {
  /** @type {[import("../generated/api.js").TwoFactorStatus, import("../generated/api.js").PasskeyStatus]} */
  const [twoFactor, passkeys] = await Promise.all([api.get("/api/user/2fa/status"), api.get("/api/user/passkey")]);
  if (twoFactor.enabled) {
    verifyThen(api, why, then, { passkey: passkeys.count > 0 });
    return;
  }
  if (passkeys.count > 0 && passkeysSupported()) {
    verifyThen(api, why, then, { twoFactor: false, passkey: true });
    return;
  }
  const dialog = openDialog(t("verify.setUpTitle"));
  const account = h("a", { href: "/account", class: "button", onclick: (/** @type {Event} */ event) => {
    event.preventDefault();
    dialog.close();
    open("/account");
  } }, t("verify.openAccount"));
  dialog.body.append(h("p", {}, t("verify.setUpFirst")),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.close")), account));
  account.focus();
}
