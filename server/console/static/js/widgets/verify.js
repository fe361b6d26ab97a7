/**
 * The secure-verification prompt (docs/API.md "Secure verification"): when an action answers 403
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
  const dialog = openDialog("Confirm it is you");
  const passkeyProof = async () => {
    await ceremony(api, "/api/user/passkey/verify", "get");
    await api.post("/api/verify", { method: "passkey" });
    dialog.close();
    then();
  };
  const usePasskey = () => run(prompt, passkeyProof);
  const ways = twoFactor
    ? [h("p", {}, `The server answered: ${why}. Enter the code of your authenticator app (or a backup code)`
        + `${withPasskey ? ", or use one of your passkeys" : ""}.`),
      field("Authenticator code", "code", { autocomplete: "one-time-code", inputmode: "numeric", required: true })]
    : [h("p", {}, `The server answered: ${why}. Use one of your passkeys to confirm it is you.`)];
  const prompt = form("Confirm it is you", async (f) => {
    if (!twoFactor) return passkeyProof();
    await api.post("/api/verify", { method: "2fa", code: valueOf(f, "code").trim() });
    dialog.close();
    then();
  },
  ...ways,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
    withPasskey && twoFactor ? h("button", { type: "button", class: "secondary", onclick: () => void usePasskey() }, "Use a passkey") : null,
    h("button", { type: "submit" }, twoFactor ? "Verify" : "Use a passkey")));
  dialog.body.append(prompt);
  (prompt.querySelector("input") ?? prompt.querySelector("button[type=submit]"))?.focus();
}
