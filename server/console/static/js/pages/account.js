/**
 * Account (`/account`, every signed-in user): the display name (`PUT /api/user/self`); a new password
 * (with the current one, `original_password`); the e-mail address, bound with a mailed code
 * (`GET /api/verification`, then `GET /api/oauth/email/bind`); the access token (`GET /api/user/token`,
 * a new one each time, shown once); two-factor authentication: set-up with a QR code drawn by the server
 * (`POST /api/user/2fa/setup`; the image `GET /api/user/2fa/qr`, fetched as a Blob), the secret and the backup codes shown
 * once, then on with a code (`POST /api/user/2fa/enable`); off (`/2fa/disable`) and new backup codes
 * (`/2fa/backup_codes`) with a code; passkeys: the list (`GET /api/user/passkey`), one added
 * (`POST /api/user/passkey/register/begin`, `navigator.credentials.create()`, `…/register/finish`; only
 * when the site has passkeys on; a refusal, such as the limit of 10, is shown beside the button) and one
 * removed after a confirmation (`DELETE /api/user/passkey?credential_id=`, which needs a secure
 * verification: its 403 opens `widgets/verify.js`); and the notification settings (`PUT /api/user/setting`).
 * Calls at load: `GET /api/user/2fa/status` and `GET /api/user/passkey` (2), and `/api/user/self` when the
 * one read is over 5 s old.
 */

import { h, replace } from "../dom.js";
import { checkbox, checked, field, form, heading, refuse, run, valueOf } from "../forms.js";
import { dateTime } from "../site.js";
import { ceremony, passkeysSupported } from "../webauthn.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { secretBox } from "../widgets/secret-once.js";
import { needsVerification, verifyThen } from "../widgets/verify.js";

/** @typedef {{enabled: boolean, locked: boolean, backup_codes_remaining: number}} TwoFactorStatus */
/** @typedef {{secret: string, qr_code_data: string, backup_codes: string[]}} TwoFactorSetup */
/** @typedef {{credential_id: string, attachment: string, created_at: number, last_used_at: number}} Passkey */
/** @typedef {{enabled: boolean, count: number, last_used_at: number, credentials: Passkey[]}} PasskeyStatus */

/**
 * A section of the page with its heading.
 * @param {string} id
 * @param {string} title
 * @param {...import("../dom.js").Child} children
 */
function section(id, title, ...children) {
  return h("section", { class: "panel", "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, session, shell } = ctx;
  const [user, twoFactor, passkeys] = await Promise.all([
    /** @type {Promise<import("../types.js").SelfUser & {setting?: string}>} */ (session.refresh(5000)),
    /** @type {Promise<TwoFactorStatus>} */ (api.get("/api/user/2fa/status")),
    /** @type {Promise<PasskeyStatus>} */ (api.get("/api/user/passkey"))]);
  /** Whether 2FA is on now (the verification prompt offers its code only then). */
  let twoFactorOn = twoFactor.enabled;
  /** @type {Record<string, unknown>} */
  let settings = {};
  try {
    settings = user.setting ? JSON.parse(user.setting) : {};
  } catch {
    settings = {};
  }

  const profile = form("Profile", async (element) => {
    const display = valueOf(element, "display_name").trim();
    await api.put("/api/user/self", { display_name: display });
    await session.refresh(0);
    shell.say("Display name saved.");
  },
  field("Username", "username", { value: user.username, readonly: true }),
  field("Display name", "display_name", { value: user.display_name, autocomplete: "nickname" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, "Save profile")));

  const password = form("Change the password", async (element) => {
    const next = valueOf(element, "password");
    if (next !== valueOf(element, "confirm")) throw refuse("confirm", "does not match the password");
    await api.put("/api/user/self", { original_password: valueOf(element, "original_password"), password: next });
    element.reset();
    shell.say("Password changed.");
  },
  field("Current password", "original_password", { type: "password", autocomplete: "current-password" }),
  field("New password", "password", { type: "password", autocomplete: "new-password" }),
  field("Confirm the new password", "confirm", { type: "password", autocomplete: "new-password" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, "Change password")));

  const email = form("E-mail address", async (element) => {
    const address = valueOf(element, "email").trim();
    const code = valueOf(element, "code").trim();
    if (!code) {  // Enter in the address field, before any code came: ask for one
      await mailCode(address);
      return;
    }
    await api.get("/api/oauth/email/bind", { email: address, code });
    await session.refresh(0);
    shell.say(`E-mail address ${address} bound to your account.`);
  },
  field("E-mail address", "email", { type: "email", value: user.email, autocomplete: "email" }),
  h("div", { class: "actions inline" }, h("button", { type: "button", class: "secondary", onclick: () => void sendCode() },
    "Send code")),
  field("Code from the e-mail", "code", { autocomplete: "one-time-code", inputmode: "numeric" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, "Bind address")));
  /** @param {string} address */
  const mailCode = async (address) => {
    if (!address) throw refuse("email", "enter the address to bind");
    await api.get("/api/verification", { email: address });
    shell.say(`A code was sent to ${address}.`);
  };
  const sendCode = () => run(email, () => mailCode(valueOf(email, "email").trim()));

  const tokenArea = h("div", {});
  const token = section("token-heading", "Access token",
    h("p", {}, "A token lets a program call the management API as you: send it as ",
      h("code", {}, "Authorization: Bearer <token>"), " with ", h("code", {}, `New-Api-User: ${user.id}`),
      " (your user id; a call without it is refused). Making one replaces the one before."),
    h("div", { class: "toolbar" }, h("button", { type: "button", onclick: () => void makeToken() }, "Make a new access token")),
    tokenArea);
  const makeToken = async () => {
    const sure = await confirmAction({ title: "Make a new access token?",
      message: "Programs using your current access token stop working at once.", confirm: "Make a new token" });
    if (!sure) return;
    try {
      /** @type {string} */
      const secret = await api.get("/api/user/token");
      replace(tokenArea, secretBox("Your new access token", secret,
        "Shown this once: copy it now. Anyone holding it can act as you."));
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };

  const twoFactorArea = h("div", {});
  const drawTwoFactor = (/** @type {TwoFactorStatus} */ status) => {
    twoFactorOn = status.enabled;
    replace(twoFactorArea, status.enabled ? twoFactorManage(ctx, status, () => void reloadTwoFactor())
    : [h("p", {}, "Two-factor authentication is off: signing in needs only your password."),
      h("div", { class: "toolbar" }, h("button", { type: "button", onclick: () => void startTwoFactor() },
        "Set up two-factor authentication"))]);
  };
  const reloadTwoFactor = async () => drawTwoFactor(await api.get("/api/user/2fa/status"));
  const startTwoFactor = async () => {
    try {
      /** @type {TwoFactorSetup} */
      const setup = await api.post("/api/user/2fa/setup");
      openTwoFactorSetup(ctx, setup, () => void reloadTwoFactor());
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };
  drawTwoFactor(twoFactor);

  const passkeyArea = h("div", {});
  const drawPasskeys = (/** @type {PasskeyStatus} */ status) => replace(passkeyArea, passkeyList(status, remove),
    !ctx.site.status.passkey_login
      ? h("p", {}, "Passkeys are switched off on this site: you cannot add one now.")
      : passkeysSupported()
        ? adder
        : h("p", {}, "This browser cannot make passkeys."));
  const reloadPasskeys = async () => drawPasskeys(await api.get("/api/user/passkey"));
  /** @param {() => Promise<void>} work */
  const acted = async (work) => {
    try {
      await work();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };
  /** Add a passkey; a refusal (the server's, or the browser's) is thrown, for `adder` to show beside its button. */
  const addPasskey = async () => {
    try {
      await ceremony(api, "/api/user/passkey/register", "create");
    } catch (error) {
      if (!needsVerification(error)) throw error;  // with 2FA on, adding one needs a verification made with 2FA
      verifyThen(api, error.message, () => void run(adder, addPasskey), { twoFactor: true, passkey: false });
      return;
    }
    await reloadPasskeys();
    shell.say("Passkey added: you can sign in with it.");
  };
  const adder = form("Add a passkey", addPasskey,
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Add a passkey")));
  /** @param {Passkey} passkey @param {boolean} [asked] */
  const remove = (passkey, asked = false) => acted(async () => {
    const sure = asked || await confirmAction({ title: "Remove this passkey?",
      message: `Passkey ${shortId(passkey.credential_id)} will no longer sign you in. The authenticator may still `
        + "list it: remove it there too.", confirm: "Remove passkey" });
    if (!sure) return;
    try {
      await api.delete(`/api/user/passkey?credential_id=${encodeURIComponent(passkey.credential_id)}`);
    } catch (error) {
      if (!needsVerification(error)) throw error;
      verifyThen(api, error.message, () => void remove(passkey, true), { twoFactor: twoFactorOn, passkey: true });
      return;
    }
    await reloadPasskeys();
    shell.say(`Passkey ${shortId(passkey.credential_id)} removed.`);
  });
  drawPasskeys(passkeys);

  const notify = form("Notifications", async (element) => {
    const threshold = valueOf(element, "quota_warning_threshold").trim();
    /** @type {Record<string, unknown>} */
    const body = { notify_type: valueOf(element, "notify_type"), webhook_url: valueOf(element, "webhook_url").trim(),
      notification_email: valueOf(element, "notification_email").trim(), record_ip_log: checked(element, "record_ip_log") };
    if (threshold) {
      if (!/^\d+$/.test(threshold)) throw refuse("quota_warning_threshold", "must be a whole number of quota points");
      body.quota_warning_threshold = Number(threshold);
    }
    await api.put("/api/user/setting", body);
    shell.say("Settings saved.");
  },
  field("Notify by", "notify_type", { type: "select", value: String(settings.notify_type ?? "email"),
    options: [{ value: "email", label: "E-mail" }, { value: "webhook", label: "Webhook" }] }),
  field("Warn when the balance is below (points)", "quota_warning_threshold",
    { inputmode: "numeric", value: settings.quota_warning_threshold ? String(settings.quota_warning_threshold) : "" }),
  field("Notification e-mail", "notification_email", { type: "email", value: String(settings.notification_email ?? ""),
    hint: "empty: your account's address" }),
  field("Webhook URL", "webhook_url", { type: "url", value: String(settings.webhook_url ?? "") }),
  checkbox("Record the client IP address in my logs", "record_ip_log", settings.record_ip_log === true),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, "Save settings")));

  replace(main,
    heading("Account"),
    section("profile-heading", "Profile", profile),
    section("password-heading", "Password", password),
    section("email-heading", "E-mail address", email),
    token,
    section("twofa-heading", "Two-factor authentication", twoFactorArea),
    section("passkeys-heading", "Passkeys",
      h("p", {}, "A passkey signs you in without a password or a code: your device or security key holds it."),
      passkeyArea),
    section("settings-heading", "Notifications and privacy", notify));
}

/**
 * The set-up dialog: the QR code (drawn by the server), the secret for typing by hand, the backup codes
 * (shown this once), and the code that turns 2FA on.
 * @param {import("../types.js").PageContext} ctx
 * @param {TwoFactorSetup} setup
 * @param {() => void} done
 */
function openTwoFactorSetup({ api, shell }, setup, done) {
  const dialog = openDialog("Set up two-factor authentication", () => URL.revokeObjectURL(qr.src));
  const qr = h("img", { class: "qr", width: 222, height: 222,
    alt: "QR code of the authenticator set-up (the key below, as an image)" });
  api.blob("/api/user/2fa/qr").then((image) => { qr.src = URL.createObjectURL(image); },
    (error) => qr.replaceWith(h("p", { class: "form-error", role: "alert" }, error instanceof Error ? error.message : String(error))));
  const enable = form("Turn on two-factor authentication", async (element) => {
    await api.post("/api/user/2fa/enable", { code: valueOf(element, "code").trim() });
    dialog.close();
    shell.say("Two-factor authentication is on: signing in now asks for a code.");
    done();
  },
  field("Code from the app", "code", { autocomplete: "one-time-code", inputmode: "numeric", required: true }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
    h("button", { type: "submit" }, "Turn on")));
  dialog.body.append(
    h("p", {}, "1. Scan this code with an authenticator app, or type the key below into it."),
    qr,
    secretBox("Key for typing by hand", setup.secret, "The same secret as the QR code."),
    h("p", {}, "2. Keep these backup codes somewhere safe: each signs you in once without the app. They are shown this once."),
    h("ul", { class: "backup-codes", "aria-label": "Backup codes" }, setup.backup_codes.map((c) => h("li", {}, h("code", {}, c)))),
    h("p", {}, "3. Type the code the app shows now."),
    enable);
}

/**
 * 2FA is on: turn it off, or new backup codes; each with a code.
 * @param {import("../types.js").PageContext} ctx
 * @param {TwoFactorStatus} status
 * @param {() => void} changed
 */
function twoFactorManage({ api, shell }, status, changed) {
  const codes = h("div", {});
  const manage = form("Manage two-factor authentication", async () => {},
    field("Code from the app or a backup code", "code", { autocomplete: "one-time-code" }),
    h("div", { class: "actions inline" },
      h("button", { type: "button", class: "secondary", onclick: () => void renew() }, "New backup codes"),
      h("button", { type: "button", class: "danger", onclick: () => void off() }, "Turn off")));
  const renew = () => run(manage, async () => {
    /** @type {{backup_codes: string[]}} */
    const made = await api.post("/api/user/2fa/backup_codes", { code: valueOf(manage, "code").trim() });
    replace(codes, h("p", {}, "Your new backup codes, shown this once (the old ones no longer work):"),
      h("ul", { class: "backup-codes", "aria-label": "New backup codes" }, made.backup_codes.map((c) => h("li", {}, h("code", {}, c)))));
  });
  const off = () => run(manage, async () => {
    const code = valueOf(manage, "code").trim();
    if (!code) throw refuse("code", "enter a code from the app or a backup code");
    const sure = await confirmAction({ title: "Turn off two-factor authentication?",
      message: "Signing in will need only your password.", confirm: "Turn off" });
    if (!sure) return;
    await api.post("/api/user/2fa/disable", { code });
    shell.say("Two-factor authentication is off.");
    changed();
  });
  return [h("p", {}, `Two-factor authentication is on${status.locked ? " (locked after failed codes: try later)" : ""}. `
    + `${status.backup_codes_remaining} backup codes left.`), manage, codes];
}

/**
 * A passkey's id as people read it: its first 12 characters.
 * @param {string} credentialId
 */
function shortId(credentialId) {
  return credentialId.length > 12 ? `${credentialId.slice(0, 12)}…` : credentialId;
}

const ATTACHMENT = /** @type {Record<string, string>} */ ({ platform: "This device",
  "cross-platform": "Security key or phone" });

/**
 * The user's passkeys as a table, each with its Remove button.
 * @param {PasskeyStatus} status
 * @param {(passkey: Passkey) => void} remove
 */
function passkeyList(status, remove) {
  if (status.credentials.length === 0) return h("p", {}, "You have no passkey.");
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Your passkeys" },
    h("table", { class: "stacking" }, h("caption", {}, `Your passkeys (${status.count})`),
      h("thead", {}, h("tr", {}, ["Passkey", "Kind", "Added", "Last used", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, status.credentials.map((p) => h("tr", {},
        h("th", { scope: "row", "data-label": "Passkey" }, h("code", {}, shortId(p.credential_id))),
        h("td", { "data-label": "Kind" }, ATTACHMENT[p.attachment] ?? "Not said"),
        h("td", { "data-label": "Added" }, dateTime(p.created_at)),
        h("td", { "data-label": "Last used" }, dateTime(p.last_used_at)),
        h("td", { "data-label": "Actions" }, h("button", { type: "button", class: "danger",
          "aria-label": `Remove passkey ${shortId(p.credential_id)}`, onclick: () => remove(p) }, "Remove")))))));
}
