/**
 * The channel page's dialogs (split from `channels.js` to keep each module short): the selected
 * channels' tag (`POST /api/channel/batch/tag`), a tag's channels enabled, disabled or retagged at once
 * (`/api/channel/tag/…`), and a multi-key channel's keys (`POST /api/channel/multi_key/manage`).
 */

import { h, replace } from "../dom.js";
import { field, form, rowLabel, showError, valueOf } from "../forms.js";
import { openDialog } from "../widgets/dialog.js";
import { CHANNEL_STATUS_LABEL } from "../generated/enums.js";
import { labelOf, number, t } from "../i18n.js";

/** @typedef {import("../types.js").Channel} Channel */

/** A channel's (and a multi-key channel's key's) status. */

/**
 * Set the tag of the selected channels (`POST /api/channel/batch/tag`; empty clears it).
 * @param {import("../types.js").PageContext} ctx
 * @param {() => number[]} chosen
 * @param {() => void} onSaved
 * @param {(work: () => Promise<void>) => Promise<void>} act
 */
export function openBatchTag({ api, shell }, chosen, onSaved, act) {
  void act(async () => {
    const ids = chosen();
    const dialog = openDialog(t("channels.tagSelectedDialog"));
    dialog.body.append(form(t("channels.tagSelectedDialog"), async (f) => {
      /** @type {number} */
      const count = await api.post("/api/channel/batch/tag", { ids, tag: valueOf(f, "tag").trim() });
      shell.say(t("channels.tagged", { count }));
      onSaved();
      dialog.close();
    },
    field(t("channels.tag"), "tag", { autocomplete: "off", hint: t("channels.tagHint", { count: ids.length }) }),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
      h("button", { type: "submit" }, t("channels.setTag")))));
    dialog.body.querySelector("input")?.focus();
  });
}

/**
 * Every channel of a tag at once: enable, disable, or rename the tag (`/api/channel/tag/…`).
 * @param {import("../types.js").PageContext} ctx
 * @param {string} tag
 * @param {() => void} onSaved
 */
export function openTag({ api, shell }, tag, onSaved) {
  const dialog = openDialog(t("channels.taggedDialog", { tag }));
  /** @param {string} path @param {boolean} enabled */
  const bulk = (path, enabled) => async () => {
    const editor = /** @type {HTMLFormElement} */ (dialog.body.querySelector("form"));
    try {
      /** @type {number} */
      const count = await api.post(path, { tag });
      shell.say(t(enabled ? "channels.tagEnabled" : "channels.tagDisabled", { count, tag }));
      onSaved();
      dialog.close();
    } catch (error) {
      showError(editor, error);
    }
  };
  dialog.body.append(form(t("channels.renameForm"), async (f) => {
    /** @type {number} */
    const count = await api.put("/api/channel/tag", { tag, new_tag: valueOf(f, "new_tag").trim() });
    shell.say(t("channels.renamed", { count, tag }));
    onSaved();
    dialog.close();
  },
  h("div", { class: "actions inline" },
    h("button", { type: "button", class: "secondary", onclick: () => void bulk("/api/channel/tag/enabled", true)() },
      t("channels.enableAll")),
    h("button", { type: "button", class: "secondary", onclick: () => void bulk("/api/channel/tag/disabled", false)() },
      t("channels.disableAll"))),
  field(t("channels.newTag"), "new_tag", { value: tag, autocomplete: "off" }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.close")),
    h("button", { type: "submit" }, t("channels.renameTag")))));
}

/**
 * A multi-key channel's keys, each enabled or disabled by hand (`POST /api/channel/multi_key/manage`).
 * @param {import("../types.js").PageContext} ctx
 * @param {Channel} c
 * @param {() => void} onSaved
 */
export function openKeys({ api }, c, onSaved) {
  const dialog = openDialog(t("channels.keysDialog", { name: c.name }), onSaved);
  const list = h("div", {}, h("p", { class: "loading" }, t("channels.loadingKeys")));
  dialog.body.append(list, h("div", { class: "actions" },
    h("button", { type: "button", onclick: () => dialog.close() }, t("common.close"))));
  const load = async () => {
    try {
      /** @type {import("../generated/api.js").KeyStatusPage} */
      const page = await api.post("/api/channel/multi_key/manage", { channel_id: c.id, action: "get_key_status", page_size: 100 });
      replace(list, h("p", {}, t("channels.keysEnabled", { enabled: number(page.enabled_count), total: number(page.total) })),
        h("ul", { class: "checks" }, page.keys.map((k) => h("li", {},
          h("span", { class: "mono" }, k.key_preview), ` — ${labelOf(CHANNEL_STATUS_LABEL, k.status)}${k.reason ? ` (${k.reason})` : ""} `,
          h("button", { type: "button", class: "secondary", "aria-label": rowLabel(k.status === 1 ? t("common.disable") : t("common.enable"), t("channels.keyN", { n: String(k.index + 1) })),
            onclick: () => void change(k.status === 1 ? "disable_key" : "enable_key", k.index) },
          k.status === 1 ? t("common.disable") : t("common.enable"))))));
    } catch (error) {
      replace(list, h("p", { role: "alert" }, error instanceof Error ? error.message : String(error)));
    }
  };
  /** @param {string} action @param {number} index */
  const change = async (action, index) => {
    try {
      await api.post("/api/channel/multi_key/manage", { channel_id: c.id, action, key_index: index });
    } catch (error) {
      replace(list, h("p", { role: "alert" }, error instanceof Error ? error.message : String(error)));
      return;
    }
    await load();
  };
  void load();
}
