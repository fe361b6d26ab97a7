/**
 * API keys (`/keys`, every signed-in user; everyone sees only their own keys): the list, searched and
 * paged on the server (`GET /api/token/`, `GET /api/token/search`); create and edit (`key-form.js`);
 * reveal and copy (`POST /api/token/{id}/key`); enable and disable (`PUT /api/token/?status_only=1`);
 * delete, after a confirmation (`DELETE /api/token/{id}`). Calls at load: `GET /api/token/`.
 */

import { h, replace } from "../dom.js";
import { heading } from "../forms.js";
import { dateTime } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { secretBox } from "../widgets/secret-once.js";
import { openKeyForm } from "./key-form.js";

/** How a key is written everywhere but the reveal route's reply (`sk-` and the 48 characters). */
const KEY_PREFIX = "sk-";

/** @typedef {import("../types.js").ApiKey} ApiKey */

export const KEY_STATUS = /** @type {Record<number, string>} */ ({ 1: "Enabled", 2: "Disabled", 3: "Expired", 4: "Exhausted" });
const WHOLE_KEY = /^(sk-)?[A-Za-z0-9]{48}$/;

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, site, shell } = ctx;
  /** @type {PagedTable<ApiKey>} */
  const table = new PagedTable();
  /** @param {ApiKey} key */
  const label = (key) => key.name || `#${key.id}`;

  /** @param {() => Promise<void>} work */
  const act = async (work) => {
    try {
      await work();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };
  /** @param {ApiKey} key */
  const reveal = (key) => act(async () => {
    /** @type {{key: string}} */
    const revealed = await api.post(`/api/token/${key.id}/key`);
    const dialog = openDialog(`API key “${label(key)}”`);
    // the route answers the bare key, as new-api's does; a caller sends it with its `sk-` prefix
    dialog.body.append(secretBox("The whole key", `${KEY_PREFIX}${revealed.key}`,
      "Anyone holding this key can spend its quota: keep it like a password."),
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => dialog.close() }, "Close")));
  });
  /** @param {ApiKey} key */
  const toggle = (key) => act(async () => {
    const status = key.status === 1 ? 2 : 1;
    await api.put("/api/token/", { id: key.id, status }, { status_only: 1 });
    shell.say(`API key “${label(key)}” ${status === 1 ? "enabled" : "disabled"}.`);
    await table.reload();
  });
  /** @param {ApiKey} key */
  const remove = (key) => act(async () => {
    const sure = await confirmAction({ title: "Delete this API key?",
      message: `Calls made with “${label(key)}” stop working at once. This cannot be undone.`, confirm: "Delete" });
    if (!sure) return;
    await api.delete(`/api/token/${key.id}`);
    shell.say(`API key “${label(key)}” deleted.`);
    await table.reload();
  });
  /** @param {ApiKey} key */
  const actions = (key) => h("div", { class: "row-actions" },
    h("button", { type: "button", class: "secondary", "aria-label": `Reveal ${label(key)}`, onclick: () => void reveal(key) }, "Reveal"),
    h("button", { type: "button", class: "secondary", "aria-label": `Edit ${label(key)}`,
      onclick: () => openKeyForm(ctx, key, () => void table.reload()) }, "Edit"),
    h("button", { type: "button", class: "secondary", "aria-label": `${key.status === 1 ? "Disable" : "Enable"} ${label(key)}`,
      onclick: () => void toggle(key) }, key.status === 1 ? "Disable" : "Enable"),
    h("button", { type: "button", class: "danger", "aria-label": `Delete ${label(key)}`, onclick: () => void remove(key) }, "Delete"));

  replace(main,
    heading("API keys"),
    h("p", {}, "Keys are what programs send to call models through this gateway (as ",
      h("code", {}, "Authorization: Bearer sk-…"), ")."),
    h("div", { class: "toolbar" }, h("button", { type: "button",
      onclick: () => openKeyForm(ctx, null, () => void table.reload()) }, "Create API key")),
    table);
  await table.configure({
    caption: "Your API keys",
    searchLabel: "Search by name or whole key",
    empty: "No API keys yet. Create one to call models.",
    fetch: ({ p, page_size, keyword }) => {
      if (!keyword) return api.get("/api/token/", { p, page_size });
      const byKey = WHOLE_KEY.test(keyword);
      return api.get("/api/token/search", { p, page_size, keyword: byKey ? "" : keyword, token: byKey ? keyword : "" });
    },
    columns: [
      { label: "Name", cell: (key) => label(key) },
      { label: "Status", cell: (key) => h("span", { class: `badge status-${key.status}` }, KEY_STATUS[key.status] ?? String(key.status)) },
      { label: "Remaining", cell: (key) => (key.unlimited_quota ? "Unlimited" : site.quota(key.remain_quota)) },
      { label: "Used", cell: (key) => site.quota(key.used_quota) },
      { label: "Expires", cell: (key) => dateTime(key.expired_time) },
      { label: "Group", cell: (key) => key.group || "Your group" },
      { label: "Actions", cell: actions },
    ],
  });
}
