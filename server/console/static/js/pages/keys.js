/**
 * API keys (`/keys`, every signed-in user; everyone sees only their own keys): the list, searched and
 * paged on the server (`GET /api/token/`, `GET /api/token/search`); create and edit (`key-form.js`);
 * reveal and copy (`POST /api/token/{id}/key`); enable and disable (`PUT /api/token/?status_only=1`);
 * delete, after a confirmation (`DELETE /api/token/{id}`). Calls at load: `GET /api/token/`.
 */

import { h, replace } from "../dom.js";
import { heading, rowLabel, withCodes } from "../forms.js";
import { dateTime } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { secretBox } from "../widgets/secret-once.js";
import { openKeyForm } from "./key-form.js";
import { t } from "../i18n.js";

/** How a key is written everywhere but the reveal route's reply (`sk-` and the 48 characters). */
const KEY_PREFIX = "sk-";

/** @typedef {import("../types.js").ApiKey} ApiKey */

/** @type {Record<number, () => string>} */
const KEY_STATUS = { 1: () => t("status.enabled"), 2: () => t("status.disabled"), 3: () => t("keys.status.expired"),
  4: () => t("keys.status.exhausted") };
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
    const dialog = openDialog(t("keys.dialog", { name: label(key) }));
    // the route answers the bare key, as new-api's does; a caller sends it with its `sk-` prefix
    dialog.body.append(secretBox(t("keys.whole"), `${KEY_PREFIX}${revealed.key}`,
      t("keys.keepIt")),
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => dialog.close() }, t("common.close"))));
  });
  /** @param {ApiKey} key */
  const toggle = (key) => act(async () => {
    const status = key.status === 1 ? 2 : 1;
    await api.put("/api/token/", { id: key.id, status }, { status_only: 1 });
    shell.say(t(status === 1 ? "keys.enabled" : "keys.disabled", { name: label(key) }));
    await table.reload();
  });
  /** @param {ApiKey} key */
  const remove = (key) => act(async () => {
    const sure = await confirmAction({ title: t("keys.deleteTitle"),
      message: t("keys.deleteMessage", { name: label(key) }), confirm: t("common.delete") });
    if (!sure) return;
    await api.delete(`/api/token/${key.id}`);
    shell.say(t("keys.deleted", { name: label(key) }));
    await table.reload();
  });
  /** @param {ApiKey} key */
  const actions = (key) => h("div", { class: "row-actions" },
    h("button", { type: "button", class: "secondary", "aria-label": rowLabel(t("keys.reveal"), label(key)), onclick: () => void reveal(key) }, t("keys.reveal")),
    h("button", { type: "button", class: "secondary", "aria-label": rowLabel(t("common.edit"), label(key)),
      onclick: () => openKeyForm(ctx, key, () => void table.reload()) }, t("common.edit")),
    h("button", { type: "button", class: "secondary", "aria-label": rowLabel(key.status === 1 ? t("common.disable") : t("common.enable"), label(key)),
      onclick: () => void toggle(key) }, key.status === 1 ? t("common.disable") : t("common.enable")),
    h("button", { type: "button", class: "danger", "aria-label": rowLabel(t("common.delete"), label(key)), onclick: () => void remove(key) }, t("common.delete")));

  replace(main,
    heading(t("page.keys")),
    h("p", {}, withCodes(t("keys.intro"), { header: "Authorization: Bearer sk-…" })),
    h("div", { class: "toolbar" }, h("button", { type: "button",
      onclick: () => openKeyForm(ctx, null, () => void table.reload()) }, t("keys.create"))),
    table);
  await table.configure({
    caption: t("keys.caption"),
    searchLabel: t("keys.search"),
    empty: t("keys.empty"),
    fetch: ({ p, page_size, keyword }) => {
      if (!keyword) return api.get("/api/token/", { p, page_size });
      const byKey = WHOLE_KEY.test(keyword);
      return api.get("/api/token/search", { p, page_size, keyword: byKey ? "" : keyword, token: byKey ? keyword : "" });
    },
    columns: [
      { label: t("col.name"), cell: (key) => label(key) },
      { label: t("col.status"), cell: (key) => h("span", { class: `badge status-${key.status}` }, KEY_STATUS[key.status]?.() ?? String(key.status)) },
      { label: t("keys.remaining"), cell: (key) => (key.unlimited_quota ? t("keys.unlimited") : site.quota(key.remain_quota)) },
      { label: t("col.used"), cell: (key) => site.quota(key.used_quota) },
      { label: t("keys.expires"), cell: (key) => dateTime(key.expired_time) },
      { label: t("col.group"), cell: (key) => key.group || t("keys.yourGroup") },
      { label: t("col.actions"), cell: actions },
    ],
  });
}
