/**
 * Users (`/users`, admins): the users, paged on the server and searched by keyword (an id, or a part of
 * the username, e-mail or display name) and filtered by group (`GET /api/user/`, `GET /api/user/search`);
 * create (`POST /api/user/`) and edit (`PUT /api/user/`); enable, disable, promote, demote, delete and
 * the balance added to, subtracted from or overridden (`POST /api/user/manage`); 2FA turned off
 * (`DELETE /api/user/{id}/2fa`) and passkeys removed (`DELETE /api/user/{id}/reset_passkey`). Each
 * destructive action asks first; each refusal (an admin acting on an equal or higher role: 403) shows the
 * server's message. Calls at load: `GET /api/user/` and the group filter's names (`GET /api/group/`).
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";
import { Role } from "../session.js";
import { dateTime } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";

/** @typedef {import("../types.js").AdminUser} AdminUser */

const ROLE_NAME = /** @type {Record<number, string>} */ ({ 1: "User", 10: "Admin", 100: "Root" });
const USER_STATUS = /** @type {Record<number, string>} */ ({ 1: "Enabled", 2: "Disabled" });

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
   * @param {string} done
   * @param {{title: string, message: string, confirm: string}} [ask]
   */
  const manage = (user, action, done, ask) => act(async () => {
    if (ask && !(await confirmAction(ask))) return;
    await api.post("/api/user/manage", { id: user.id, action });
    shell.say(`${label(user)} ${done}.`);
    await table.reload();
  });
  /**
   * @param {AdminUser} user
   * @param {string} path
   * @param {string} done
   * @param {{title: string, message: string, confirm: string}} ask
   */
  const reset = (user, path, done, ask) => act(async () => {
    if (!(await confirmAction(ask))) return;
    await api.delete(path);
    shell.say(`${label(user)}: ${done}.`);
  });

  /** @param {AdminUser} user */
  const actions = (user) => {
    const name = label(user);
    /** @param {string} text @param {() => void} onclick @param {string} [kind] */
    const button = (text, onclick, kind = "secondary") => h("button", { type: "button", class: kind,
      "aria-label": `${text} ${name}`, onclick }, text);
    return h("div", { class: "row-actions" },
      button("Edit", () => openUserForm(ctx, user, () => void table.reload())),
      button("Quota", () => openQuotaForm(ctx, user, () => void table.reload())),
      user.status === 1
        ? button("Disable", () => void manage(user, "disable", "disabled", { title: "Disable this user?",
          message: `${name} is signed out everywhere and their API keys stop working until enabled again.`,
          confirm: "Disable" }))
        : button("Enable", () => void manage(user, "enable", "enabled")),
      user.role < Role.ADMIN && session.role >= Role.ROOT
        ? button("Promote", () => void manage(user, "promote", "is now an admin")) : null,
      user.role >= Role.ADMIN && user.role < Role.ROOT
        ? button("Demote", () => void manage(user, "demote", "is now a common user", { title: "Demote this admin?",
          message: `${name} loses the admin pages and routes at once.`, confirm: "Demote" })) : null,
      button("Reset 2FA", () => void reset(user, `/api/user/${user.id}/2fa`, "2FA turned off", {
        title: "Turn off this user's 2FA?",
        message: `${name} can then sign in with the password alone, until they turn 2FA on again.`, confirm: "Turn off 2FA" })),
      button("Reset passkeys", () => void reset(user, `/api/user/${user.id}/reset_passkey`, "passkeys removed", {
        title: "Remove this user's passkeys?",
        message: `Every passkey of ${name} is deleted; they sign in with the password.`, confirm: "Remove passkeys" })),
      button("Delete", () => void manage(user, "delete", "deleted", { title: "Delete this user?",
        message: `${name}'s sessions and API keys stop at once; the username stays taken. This cannot be undone.`,
        confirm: "Delete" }), "danger"));
  };

  const groupSelect = h("select", { id: "users-group", name: "group" }, h("option", { value: "" }, "Every group"));
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
    heading("Users"),
    h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => openUserForm(ctx, null, () => void table.reload()) }, "Create user")),
    h("div", { class: "filters" },
      h("div", { class: "field" }, h("label", { for: "users-group" }, "Group"), groupSelect)),
    table);
  void readGroups();
  await table.configure({
    caption: "Users",
    searchLabel: "Search by id, username, e-mail or display name",
    empty: "No users.",
    fetch: ({ p, page_size, keyword }) => (keyword || group
      ? api.get("/api/user/search", { p, page_size, keyword, group })
      : api.get("/api/user/", { p, page_size })),
    columns: [
      { label: "Username", cell: (user) => label(user) },
      { label: "Id", cell: (user) => String(user.id) },
      { label: "Display name", cell: (user) => user.display_name || "—" },
      { label: "Role", cell: (user) => ROLE_NAME[user.role] ?? String(user.role) },
      { label: "Status", cell: (user) => h("span", { class: `badge status-${user.status}` },
        USER_STATUS[user.status] ?? String(user.status)) },
      { label: "Group", cell: (user) => user.group },
      { label: "Balance", cell: (user) => site.quota(user.quota) },
      { label: "Used", cell: (user) => site.quota(user.used_quota) },
      { label: "Last sign-in", cell: (user) => dateTime(user.last_login_at) },
      { label: "Actions", cell: actions },
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
function openUserForm({ api, session }, user, onSaved) {
  const dialog = openDialog(user ? `Edit user “${user.username}”` : "Create a user");
  const editor = form(user ? "Edit user" : "Create a user", async (f) => {
    if (!user) {
      await api.post("/api/user/", { username: valueOf(f, "username").trim(), password: valueOf(f, "password"),
        display_name: valueOf(f, "display_name").trim(), role: Number(valueOf(f, "role") || Role.USER) });
    } else {
      /** @type {Record<string, unknown>} */
      const body = { id: user.id, username: valueOf(f, "username").trim(),
        display_name: valueOf(f, "display_name").trim(), group: valueOf(f, "group").trim(),
        remark: valueOf(f, "remark").trim() };
      if (valueOf(f, "password")) body.password = valueOf(f, "password");
      await api.put("/api/user/", body);
    }
    onSaved();
    dialog.close();
  },
  field("Username", "username", { value: user ? user.username : "", required: true, autocomplete: "off" }),
  field("Display name", "display_name", { value: user ? user.display_name : "", autocomplete: "off" }),
  field(user ? "New password" : "Password", "password", { type: "password", autocomplete: "new-password",
    required: !user, hint: user ? "Leave empty to keep the password; a new one signs the user out everywhere."
      : "8 to 64 characters." }),
  user ? field("Group", "group", { value: user.group, autocomplete: "off" }) : null,
  user ? field("Remark", "remark", { value: user.remark, autocomplete: "off", hint: "Seen by admins only." }) : null,
  !user && session.role >= Role.ROOT ? field("Role", "role", { type: "select", value: String(Role.USER),
    options: [{ value: String(Role.USER), label: "Common user" }, { value: String(Role.ADMIN), label: "Admin" }] }) : null,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
    h("button", { type: "submit" }, user ? "Save" : "Create user")));
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
  const dialog = openDialog(`Balance of “${user.username}”`);
  const editor = form("Change the balance", async (f) => {
    const value = site.quotaFromInput(valueOf(f, "value"));
    if (Number.isNaN(value)) throw refuse("value", "must be a number");
    const mode = valueOf(f, "mode");
    if (mode === "override") {
      const sure = await confirmAction({ title: "Replace this balance?",
        message: `${user.username}'s balance becomes ${site.quota(value)} (now ${site.quota(user.quota)}).`,
        confirm: "Replace balance" });
      if (!sure) return;
    }
    /** @type {import("../types.js").ManageResult} */
    const result = await api.post("/api/user/manage", { id: user.id, action: "add_quota", mode, value });
    shell.say(`${user.username}'s balance is now ${site.quota(result.quota)}.`);
    onSaved();
    dialog.close();
  },
  h("p", {}, `The balance now: ${site.quota(user.quota)}.`),
  field("Change", "mode", { type: "select", value: "add", options: [
    { value: "add", label: "Add to the balance" }, { value: "subtract", label: "Subtract from the balance" },
    { value: "override", label: "Replace the balance" }] }),
  field(`Amount (${site.quotaUnit})`, "value", { type: "number", inputmode: "decimal", step: "any", min: "0",
    required: true }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
    h("button", { type: "submit" }, "Apply")));
  dialog.body.append(editor);
  editor.querySelector("select")?.focus();
}
