/**
 * API keys (`/keys`, every signed-in user; everyone sees only their own keys): the list, searched and
 * paged on the server (`GET /api/token/`, `GET /api/token/search`); create and edit (`key-form.js`);
 * reveal and copy (`POST /api/token/{id}/key`); enable and disable (`PUT /api/token/?status_only=1`);
 * delete, after a confirmation (`DELETE /api/token/{id}`). Each row shows Edit and a More menu with the rest
 * (Enable only when the server would take it: `keyOffers`), and its model limits as three chips and "+N".
 * Calls at load: `GET /api/token/`.
 */

import { h, replace } from "../dom.js";
import { heading, withCodes } from "../forms.js";
import { dateTime } from "../site.js";
import { chipList } from "../widgets/chips.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { rowActions } from "../widgets/row-menu.js";
import { secretBox } from "../widgets/secret-once.js";
import { openKeyForm } from "./key-form.js";
import { KEY_STATUS_LABEL } from "../generated/enums.js";
import { labelOf, t } from "../i18n.js";

/** How a key is written everywhere but the reveal route's reply (`sk-` and the 48 characters). */
const KEY_PREFIX = "sk-";

/** @typedef {import("../types.js").ApiKey} ApiKey */

const WHOLE_KEY = /^(sk-)?[A-Za-z0-9]{48}$/;

/**
 * The row actions the server takes on a key (server/keys/service.py `_check_enable`): Disable for an
 * enabled key; Enable for any other, unless it would at once be expired (`expired_time` past) or used up
 * (no remaining quota and not unlimited) — its expiry or quota is edited first. Edit, Reveal and Delete
 * always.
 * @param {ApiKey} key
 * @param {number} now  unix seconds
 */
export function keyOffers(key, now) {
  const expired = key.expired_time !== -1 && key.expired_time <= now;
  const usedUp = !key.unlimited_quota && key.remain_quota <= 0;
  return { disable: key.status === 1, enable: key.status !== 1 && !expired && !usedUp };
}

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
    /** @type {import("../generated/api.js").RevealedKey} */
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
  const actions = (key) => {
    const offers = keyOffers(key, Math.floor(Date.now() / 1000));
    return rowActions(label(key), { label: t("common.edit"), run: () => openKeyForm(ctx, key, () => void table.reload()) }, [
      { label: t("keys.reveal"), run: () => void reveal(key) },
      ...(offers.disable ? [{ label: t("common.disable"), run: () => void toggle(key) }] : []),
      ...(offers.enable ? [{ label: t("common.enable"), run: () => void toggle(key) }] : []),
      { label: t("common.delete"), danger: true, run: () => void remove(key) },
    ]);
  };
  /** @param {ApiKey} key */
  const models = (key) => (key.model_limits_enabled
    ? chipList(key.model_limits.split(","), { label: t("keys.modelsOf", { name: label(key) }),
      showAll: (count) => t("keys.showAllModels", { count, name: label(key) }),
      showFewer: t("keys.showFewerModels", { name: label(key) }), empty: t("keys.noModelAllowed") })
    : t("keys.everyModel"));

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
      { label: t("col.status"), cell: (key) => h("span", { class: `badge status-${key.status}` }, labelOf(KEY_STATUS_LABEL, key.status)) },
      { label: t("keys.remaining"), cell: (key) => (key.unlimited_quota ? t("keys.unlimited") : site.quota(key.remain_quota)),
        numeric: true },
      { label: t("col.used"), cell: (key) => site.quota(key.used_quota), numeric: true },
      { label: t("keys.expires"), cell: (key) => dateTime(key.expired_time) },
      { label: t("col.group"), cell: (key) => key.group || t("keys.yourGroup") },
      { label: t("channels.models"), cell: models },
      { label: t("col.actions"), cell: actions },
    ],
  });
}
