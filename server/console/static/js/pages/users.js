/**
 * Users (`/users`, admins): the users, paged on the server and searched by keyword (an id, or a part of
 * the username, e-mail or display name) and filtered by group (`GET /api/user/`, `GET /api/user/search`);
 * create (`POST /api/user/`) and edit (`PUT /api/user/`); enable, disable, promote, demote, delete and
 * the balance added to, subtracted from or overridden (`POST /api/user/manage`); 2FA turned off
 * (`DELETE /api/user/{id}/2fa`) and passkeys removed (`DELETE /api/user/{id}/reset_passkey`). Each
 * destructive action asks first; each refusal (an admin acting on an equal or higher role: 403) shows the
 * server's message. Each row shows Edit and a More menu with the rest, only those the server takes for
 * that user and viewer (`userOffers`): an admin sees nothing on root or another admin. Calls at load:
 * `GET /api/user/` and the group filter's names (`GET /api/group/`).
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";
import { dateTime } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { rowActions } from "../widgets/row-menu.js";
import { ROLE_LABEL, Role, USER_STATUS_LABEL } from "../generated/enums.js";
import { labelOf, t } from "../i18n.js";

/** @typedef {import("../types.js").AdminUser} AdminUser */


/**
 * The row actions the server takes on `user` from a viewer of `role` (server/accounts/service.py and
 * server/components/user_rules.py), each rule once: nothing at all on a user whose role is equal to or
 * above yours unless you are root (`may_act_on`); root is never disabled, deleted or demoted; Disable for
 * an enabled user, Enable for a disabled one; only root promotes, and only a common user; an admin (not
 * root) is demoted; 2FA turned off only when it is on, passkeys removed only when there are some (the
 * server answers 404 otherwise). Edit and the balance: whenever you may act on the user at all.
 * @param {AdminUser} user
 * @param {number} role  the viewer's
 */
export function userOffers(user, role) {
  const may = role === Role.ROOT || role > user.role;
  const below = user.role < Role.ROOT;
  return {
    manage: may,
    enable: may && user.status !== 1,
    disable: may && below && user.status === 1,
    promote: may && role === Role.ROOT && user.role < Role.ADMIN,
    demote: may && below && user.role >= Role.ADMIN,
    reset2fa: may && user.two_factor_enabled,
    resetPasskeys: may && user.passkey_count > 0,
    delete: may && below,
  };
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, site, shell, session } = ctx;
  /** @type {PagedTable<AdminUser>} */
  const table = new PagedTable();
  /** @param {AdminUser} user */
  const label = (user) => user.username;
  let group = "";

  /** @param {() => Promise<void>} work */
  const act = async (work) => {
    try {
      await work();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };
  /**
   * @param {AdminUser} user
   * @param {string} action
   * @param {string} done  the message said after it (from `t()`)
   * @param {{title: string, message: string, confirm: string}} [ask]
   */
  const manage = (user, action, done, ask) => act(async () => {
    if (ask && !(await confirmAction(ask))) return;
    await api.post("/api/user/manage", { id: user.id, action });
    shell.say(done);
    await table.reload();
  });
  /**
   * @param {AdminUser} _user
   * @param {string} path
   * @param {string} done  the message said after it (from `t()`)
   * @param {{title: string, message: string, confirm: string}} ask
   */
  const reset = (_user, path, done, ask) => act(async () => {
    if (!(await confirmAction(ask))) return;
    await api.delete(path);
    shell.say(done);
    await table.reload();  // the row no longer offers what was reset
  });

  /** @param {AdminUser} user */
  const actions = (user) => {
    const name = label(user);
    const offers = userOffers(user, session.role);
    if (!offers.manage) return "—";
    /** @type {(import("../widgets/row-menu.js").RowAction | null)[]} */
    const more = [
      { label: t("users.balanceAction"), run: () => openQuotaForm(ctx, user, () => void table.reload()) },
      offers.enable ? { label: t("common.enable"), run: () => void manage(user, "enable", t("users.enabled", { name })) } : null,
      offers.disable ? { label: t("common.disable"), run: () => void manage(user, "disable", t("users.disabled", { name }), {
        title: t("users.disableTitle"), message: t("users.disableMessage", { name }), confirm: t("common.disable") }) } : null,
      offers.promote ? { label: t("users.promote"), run: () => void manage(user, "promote", t("users.promoted", { name })) } : null,
      offers.demote ? { label: t("users.demote"), run: () => void manage(user, "demote", t("users.demoted", { name }), {
        title: t("users.demoteTitle"), message: t("users.demoteMessage", { name }), confirm: t("users.demote") }) } : null,
      offers.reset2fa ? { label: t("users.reset2fa"), run: () => void reset(user, `/api/user/${user.id}/2fa`, t("users.twoFactorOff", { name }), {
        title: t("users.reset2faTitle"), message: t("users.reset2faMessage", { name }), confirm: t("users.turnOff2fa") }) } : null,
      offers.resetPasskeys ? { label: t("users.resetPasskeys"), run: () => void reset(user, `/api/user/${user.id}/reset_passkey`,
        t("users.passkeysRemoved", { name }), { title: t("users.resetPasskeysTitle"),
          message: t("users.resetPasskeysMessage", { name }), confirm: t("users.removePasskeys") }) } : null,
      offers.delete ? { label: t("common.delete"), danger: true, run: () => void manage(user, "delete", t("users.deleted", { name }), {
        title: t("users.deleteTitle"), message: t("users.deleteMessage", { name }), confirm: t("common.delete") }) } : null,
    ];
    return rowActions(name, { label: t("common.edit"), run: () => openUserForm(ctx, user, () => void table.reload()) },
      more.filter((a) => a !== null));
  };

  const groupSelect = h("select", { id: "users-group", name: "group" }, h("option", { value: "" }, t("users.everyGroup")));
  const readGroups = () => act(async () => {
    /** @type {string[]} */
    const names = await api.get("/api/group/");
    groupSelect.append(...names.map((name) => h("option", { value: name }, name)));
  });
  groupSelect.addEventListener("change", () => {
    group = groupSelect.value;
    void table.search(table.query.keyword);
  });

  replace(main,
    heading(t("page.users")),
    h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => openUserForm(ctx, null, () => void table.reload()) }, t("users.create"))),
    h("div", { class: "filters" },
      h("div", { class: "field" }, h("label", { for: "users-group" }, t("col.group")), groupSelect)),
    table);
  void readGroups();
  await table.configure({
    caption: t("users.caption"),
    searchLabel: t("users.search"),
    empty: t("users.empty"),
    fetch: ({ p, page_size, keyword }) => (keyword || group
      ? api.get("/api/user/search", { p, page_size, keyword, group })
      : api.get("/api/user/", { p, page_size })),
    columns: [
      { label: t("field.username"), cell: (user) => label(user) },
      { label: t("col.id"), cell: (user) => String(user.id), numeric: true },
      { label: t("field.displayName"), cell: (user) => user.display_name || "—" },
      { label: t("users.role"), cell: (user) => labelOf(ROLE_LABEL, user.role) },
      { label: t("col.status"), cell: (user) => h("span", { class: `badge status-${user.status}` },
        labelOf(USER_STATUS_LABEL, user.status)) },
      { label: t("col.group"), cell: (user) => user.group },
      { label: t("dash.balance"), cell: (user) => site.quota(user.quota), numeric: true },
      { label: t("col.used"), cell: (user) => site.quota(user.used_quota), numeric: true },
      { label: t("users.lastSignIn"), cell: (user) => dateTime(user.last_login_at) },
      { label: t("col.actions"), cell: actions },
    ],
  });
}

/**
 * Create a user (username, password, display name, role) or edit one (username, display name, group,
 * remark, a new password).
 * @param {import("../types.js").PageContext} ctx
 * @param {AdminUser | null} user
 * @param {() => void} onSaved
 */
function openUserForm({ api, session, shell }, user, onSaved) {
  const dialog = openDialog(user ? t("users.editDialog", { name: user.username }) : t("users.createDialog"));
  const editor = form(user ? t("users.editForm") : t("users.createDialog"), async (f) => {
    if (!user) {
      const username = valueOf(f, "username").trim();
      await api.post("/api/user/", { username, password: valueOf(f, "password"),
        display_name: valueOf(f, "display_name").trim(), role: Number(valueOf(f, "role") || Role.COMMON) });
      shell.say(t("users.created", { name: username }));
    } else {
      /** @type {Record<string, unknown>} */
      const body = { id: user.id, username: valueOf(f, "username").trim(),
        display_name: valueOf(f, "display_name").trim(), group: valueOf(f, "group").trim(),
        remark: valueOf(f, "remark").trim() };
      if (valueOf(f, "password")) body.password = valueOf(f, "password");
      await api.put("/api/user/", body);
      shell.say(t("users.saved", { name: String(body.username) }));
    }
    onSaved();
    dialog.close();
  },
  field(t("field.username"), "username", { value: user ? user.username : "", required: true, autocomplete: "off" }),
  field(t("field.displayName"), "display_name", { value: user ? user.display_name : "", autocomplete: "off" }),
  field(user ? t("field.newPassword") : t("field.password"), "password", { type: "password", autocomplete: "new-password",
    required: !user, hint: user ? t("users.keepPassword")
      : t("field.passwordHint") }),
  user ? field(t("col.group"), "group", { value: user.group, autocomplete: "off" }) : null,
  user ? field(t("users.remark"), "remark", { value: user.remark, autocomplete: "off", hint: t("users.remarkHint") }) : null,
  !user && session.role >= Role.ROOT ? field(t("users.role"), "role", { type: "select", value: String(Role.COMMON),
    options: [{ value: String(Role.COMMON), label: t("users.commonUser") }, { value: String(Role.ADMIN), label: t("role.admin") }] }) : null,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    h("button", { type: "submit" }, user ? t("common.save") : t("users.create"))));
  dialog.body.append(editor);
  editor.querySelector("input")?.focus();
}

/**
 * Add to, subtract from or override a user's balance (`POST /api/user/manage` `add_quota` with `mode`).
 * @param {import("../types.js").PageContext} ctx
 * @param {AdminUser} user
 * @param {() => void} onSaved
 */
function openQuotaForm({ api, site, shell }, user, onSaved) {
  const dialog = openDialog(t("users.balanceDialog", { name: user.username }));
  const editor = form(t("users.changeBalance"), async (f) => {
    const value = site.quotaFromInput(valueOf(f, "value"));
    if (Number.isNaN(value)) throw refuse("value", t("common.mustBeNumber"));
    const mode = valueOf(f, "mode");
    if (mode === "override") {
      const sure = await confirmAction({ title: t("users.replaceTitle"),
        message: t("users.replaceMessage", { name: user.username, amount: site.quota(value), now: site.quota(user.quota) }),
        confirm: t("users.replaceBalance") });
      if (!sure) return;
    }
    /** @type {import("../types.js").ManageResult} */
    const result = await api.post("/api/user/manage", { id: user.id, action: "add_quota", mode, value });
    shell.say(t("users.balanceNow", { name: user.username, amount: site.quota(result.quota) }));
    onSaved();
    dialog.close();
  },
  h("p", {}, t("users.theBalanceNow", { amount: site.quota(user.quota) })),
  field(t("users.change"), "mode", { type: "select", value: "add", options: [
    { value: "add", label: t("users.add") }, { value: "subtract", label: t("users.subtract") },
    { value: "override", label: t("users.replace") }] }),
  field(t("col.amountUnit", { unit: site.quotaUnit }), "value", { type: "number", inputmode: "decimal", step: "any", min: "0",
    required: true }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    h("button", { type: "submit" }, t("users.apply"))));
  dialog.body.append(editor);
  editor.querySelector("select")?.focus();
}
