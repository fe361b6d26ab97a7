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
import { checkbox, checked, field, form, heading, refuse, rowLabel, run, valueOf, withCodes } from "../forms.js";
import { dateTime } from "../site.js";
import { ceremony, passkeysSupported } from "../webauthn.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { secretBox } from "../widgets/secret-once.js";
import { needsVerification, verifyThen } from "../widgets/verify.js";
import { t } from "../i18n.js";

/** @typedef {import("../generated/api.js").TwoFactorStatus} TwoFactorStatus */
/** @typedef {import("../generated/api.js").TwoFactorSetup} TwoFactorSetup */
/** @typedef {import("../generated/api.js").PasskeyItem} Passkey */
/** @typedef {import("../generated/api.js").PasskeyStatus} PasskeyStatus */

/**
 * A section of the page with its heading: a card of the page's grid (two columns wide, one on a phone).
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

  const profile = form(t("account.profile"), async (element) => {
    const display = valueOf(element, "display_name").trim();
    await api.put("/api/user/self", { display_name: display });
    await session.refresh(0);
    shell.say(t("account.displaySaved"));
  },
  field(t("field.username"), "username", { value: user.username, readonly: true }),
  field(t("field.displayName"), "display_name", { value: user.display_name, autocomplete: "nickname" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("account.saveProfile"))));

  const password = form(t("account.changePassword"), async (element) => {
    const next = valueOf(element, "password");
    if (next !== valueOf(element, "confirm")) throw refuse("confirm", t("common.noMatch"));
    await api.put("/api/user/self", { original_password: valueOf(element, "original_password"), password: next });
    element.reset();
    shell.say(t("account.passwordChanged"));
  },
  field(t("field.currentPassword"), "original_password", { type: "password", autocomplete: "current-password" }),
  field(t("field.newPassword"), "password", { type: "password", autocomplete: "new-password" }),
  field(t("field.confirmNew"), "confirm", { type: "password", autocomplete: "new-password" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("reset.change"))));

  const email = form(t("field.emailAddress"), async (element) => {
    const address = valueOf(element, "email").trim();
    const code = valueOf(element, "code").trim();
    if (!code) {  // Enter in the address field, before any code came: ask for one
      await mailCode(address);
      return;
    }
    await api.get("/api/oauth/email/bind", { email: address, code });
    await session.refresh(0);
    shell.say(t("account.bound", { email: address }));
  },
  field(t("field.emailAddress"), "email", { type: "email", value: user.email, autocomplete: "email" }),
  h("div", { class: "actions inline" }, h("button", { type: "button", class: "secondary", onclick: () => void sendCode() },
    t("register.sendCode"))),
  field(t("account.codeFromMail"), "code", { autocomplete: "one-time-code", inputmode: "numeric" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("account.bind"))));
  /** @param {string} address */
  const mailCode = async (address) => {
    if (!address) throw refuse("email", t("account.enterAddress"));
    await api.get("/api/verification", { email: address });
    shell.say(t("register.codeSent", { email: address }));
  };
  const sendCode = () => run(email, () => mailCode(valueOf(email, "email").trim()));

  const tokenArea = h("div", {});
  const token = section("token-heading", t("account.accessToken"),
    h("p", {}, withCodes(t("account.tokenIntro"),
      { auth: "Authorization: Bearer <token>", user: `New-Api-User: ${user.id}` })),
    h("div", { class: "toolbar" }, h("button", { type: "button", onclick: () => void makeToken() }, t("account.makeToken"))),
    tokenArea);
  const makeToken = async () => {
    const sure = await confirmAction({ title: t("account.makeTokenTitle"),
      message: t("account.makeTokenMessage"), confirm: t("account.makeTokenConfirm") });
    if (!sure) return;
    try {
      /** @type {string} */
      const secret = await api.get("/api/user/token");
      replace(tokenArea, secretBox(t("account.newToken"), secret,
        t("account.tokenOnce")));
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };

  const twoFactorArea = h("div", {});
  const drawTwoFactor = (/** @type {TwoFactorStatus} */ status) => {
    twoFactorOn = status.enabled;
    replace(twoFactorArea, status.enabled ? twoFactorManage(ctx, status, () => void reloadTwoFactor())
    : [h("p", {}, t("account.twoFactorOff")),
      h("div", { class: "toolbar" }, h("button", { type: "button", onclick: () => void startTwoFactor() },
        t("account.setUpTwoFactor")))]);
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
      ? h("p", {}, t("account.passkeysOff"))
      : passkeysSupported()
        ? adder
        : h("p", {}, t("account.noPasskeySupport")));
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
    shell.say(t("account.passkeyAdded"));
  };
  const adder = form(t("account.addPasskey"), addPasskey,
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, t("account.addPasskey"))));
  /** @param {Passkey} passkey @param {boolean} [asked] */
  const remove = (passkey, asked = false) => acted(async () => {
    const sure = asked || await confirmAction({ title: t("account.removePasskeyTitle"),
      message: t("account.removePasskeyMessage", { id: shortId(passkey.credential_id) }), confirm: t("account.removePasskey") });
    if (!sure) return;
    try {
      await api.delete(`/api/user/passkey?credential_id=${encodeURIComponent(passkey.credential_id)}`);
    } catch (error) {
      if (!needsVerification(error)) throw error;
      verifyThen(api, error.message, () => void remove(passkey, true), { twoFactor: twoFactorOn, passkey: true });
      return;
    }
    await reloadPasskeys();
    shell.say(t("account.passkeyRemoved", { id: shortId(passkey.credential_id) }));
  });
  drawPasskeys(passkeys);

  const notify = form(t("account.notifications"), async (element) => {
    const threshold = valueOf(element, "quota_warning_threshold").trim();
    /** @type {Record<string, unknown>} */
    const body = { notify_type: valueOf(element, "notify_type"), webhook_url: valueOf(element, "webhook_url").trim(),
      notification_email: valueOf(element, "notification_email").trim(), record_ip_log: checked(element, "record_ip_log") };
    if (threshold) {
      if (!/^\d+$/.test(threshold)) throw refuse("quota_warning_threshold", t("account.wholePoints"));
      body.quota_warning_threshold = Number(threshold);
    }
    await api.put("/api/user/setting", body);
    shell.say(t("account.settingsSaved"));
  },
  field(t("account.notifyBy"), "notify_type", { type: "select", value: String(settings.notify_type ?? "email"),
    options: [{ value: "email", label: t("field.email") }, { value: "webhook", label: t("account.webhook") }] }),
  field(t("account.warnBelow"), "quota_warning_threshold",
    { inputmode: "numeric", value: settings.quota_warning_threshold ? String(settings.quota_warning_threshold) : "" }),
  field(t("account.notificationEmail"), "notification_email", { type: "email", value: String(settings.notification_email ?? ""),
    hint: t("account.notificationEmailHint") }),
  field(t("account.webhookUrl"), "webhook_url", { type: "url", value: String(settings.webhook_url ?? "") }),
  checkbox(t("account.recordIp"), "record_ip_log", settings.record_ip_log === true),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("account.saveSettings"))));

  replace(main,
    heading(t("page.account")),
    h("div", { class: "card-grid" },
      section("profile-heading", t("account.profile"), profile),
      section("password-heading", t("field.password"), password),
      section("email-heading", t("field.emailAddress"), email),
      token,
      section("twofa-heading", t("login.twoFactor"), twoFactorArea),
      section("passkeys-heading", t("account.passkeys"),
        h("p", {}, t("account.passkeysIntro")),
        passkeyArea),
      section("settings-heading", t("account.notificationsPrivacy"), notify)));
}

/**
 * The set-up dialog: the QR code (drawn by the server), the secret for typing by hand, the backup codes
 * (shown this once), and the code that turns 2FA on.
 * @param {import("../types.js").PageContext} ctx
 * @param {TwoFactorSetup} setup
 * @param {() => void} done
 */
function openTwoFactorSetup({ api, shell }, setup, done) {
  const dialog = openDialog(t("account.setUpTwoFactor"), () => URL.revokeObjectURL(qr.src));
  const qr = h("img", { class: "qr", width: 222, height: 222,
    alt: t("account.qrAlt") });
  api.blob("/api/user/2fa/qr").then((image) => { qr.src = URL.createObjectURL(image); },
    (error) => qr.replaceWith(h("p", { class: "form-error", role: "alert" }, error instanceof Error ? error.message : String(error))));
  const enable = form(t("account.turnOnForm"), async (element) => {
    await api.post("/api/user/2fa/enable", { code: valueOf(element, "code").trim() });
    dialog.close();
    shell.say(t("account.twoFactorOn"));
    done();
  },
  field(t("account.codeFromApp"), "code", { autocomplete: "one-time-code", inputmode: "numeric", required: true }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    h("button", { type: "submit" }, t("account.turnOn"))));
  dialog.body.append(
    h("p", {}, t("account.step1")),
    qr,
    secretBox(t("account.keyByHand"), setup.secret, t("account.sameSecret")),
    h("p", {}, t("account.step2")),
    h("ul", { class: "backup-codes", "aria-label": t("account.backupCodes") }, setup.backup_codes.map((c) => h("li", {}, h("code", {}, c)))),
    h("p", {}, t("account.step3")),
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
  const manage = form(t("account.manageForm"), async () => {},
    field(t("account.codeOrBackup"), "code", { autocomplete: "one-time-code" }),
    h("div", { class: "actions inline" },
      h("button", { type: "button", class: "secondary", onclick: () => void renew() }, t("account.newBackupCodes")),
      h("button", { type: "button", class: "danger", onclick: () => void off() }, t("account.turnOff"))));
  const renew = () => run(manage, async () => {
    /** @type {import("../generated/api.js").BackupCodes} */
    const made = await api.post("/api/user/2fa/backup_codes", { code: valueOf(manage, "code").trim() });
    replace(codes, h("p", {}, t("account.newCodesShown")),
      h("ul", { class: "backup-codes", "aria-label": t("account.newBackupCodes") }, made.backup_codes.map((c) => h("li", {}, h("code", {}, c)))));
  });
  const off = () => run(manage, async () => {
    const code = valueOf(manage, "code").trim();
    if (!code) throw refuse("code", t("account.enterCode"));
    const sure = await confirmAction({ title: t("account.turnOffTitle"),
      message: t("account.turnOffMessage"), confirm: t("account.turnOff") });
    if (!sure) return;
    await api.post("/api/user/2fa/disable", { code });
    shell.say(t("account.twoFactorIsOff"));
    changed();
  });
  return [h("p", {}, `${t(status.locked ? "account.onLocked" : "account.onStatus")} `
    + t("account.backupLeft", { count: status.backup_codes_remaining })), manage, codes];
}

/**
 * A passkey's id as people read it: its first 12 characters.
 * @param {string} credentialId
 */
function shortId(credentialId) {
  return credentialId.length > 12 ? `${credentialId.slice(0, 12)}…` : credentialId;
}

const ATTACHMENT = /** @type {Record<string, () => string>} */ ({ platform: () => t("passkey.platform"),
  "cross-platform": () => t("passkey.crossPlatform") });

/**
 * The user's passkeys as a table, each with its Remove button.
 * @param {PasskeyStatus} status
 * @param {(passkey: Passkey) => void} remove
 */
function passkeyList(status, remove) {
  if (status.credentials.length === 0) return h("p", {}, t("account.noPasskey"));
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("account.yourPasskeys") },
    h("table", { class: "stacking" }, h("caption", {}, t("account.yourPasskeysCount", { count: status.count })),
      h("thead", {}, h("tr", {}, [t("passkey.col"), t("passkey.kind"), t("passkey.added"), t("passkey.lastUsed"), t("col.actions")].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, status.credentials.map((p) => h("tr", {},
        h("th", { scope: "row", "data-label": t("passkey.col") }, h("code", {}, shortId(p.credential_id))),
        h("td", { "data-label": t("passkey.kind") }, ATTACHMENT[p.attachment]?.() ?? t("passkey.notSaid")),
        h("td", { "data-label": t("passkey.added") }, dateTime(p.created_at)),
        h("td", { "data-label": t("passkey.lastUsed") }, dateTime(p.last_used_at)),
        h("td", { "data-label": t("col.actions") }, h("button", { type: "button", class: "danger",
          "aria-label": rowLabel(t("account.removePasskey"), shortId(p.credential_id)), onclick: () => remove(p) }, t("account.remove"))))))));
}
