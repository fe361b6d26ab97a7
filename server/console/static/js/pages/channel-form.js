/**
 * The create / edit form of a channel, in a dialog (`POST /api/channel/` with its `mode`: one channel,
 * one per key line, or one channel with several keys; `PUT /api/channel/`, which changes only what it is
 * sent and keeps the keys when the key field is left empty). "Fetch the upstream's models" fills the
 * model list from the upstream: a saved channel with `GET /api/channel/fetch_models/{id}`, settings not
 * saved yet (root only) with `POST /api/channel/fetch_models`.
 */

import { h } from "../dom.js";
import { field, form, refuse, showError, valueOf } from "../forms.js";
import { openDialog } from "../widgets/dialog.js";
import { BALANCE_TYPES as BALANCED, CHANNEL_TYPE_NAME, ChannelType, DEFAULT_BASE, Role } from "../generated/enums.js";
import { t } from "../i18n.js";

/** The types Tollway serves, so can test (`server/upstream/providers` `SERVED_TYPES`): every type it knows
 * by name (generated/enums.js `CHANNEL_TYPE_NAME`; Custom's name is the chosen language's, `typeName`). */
export const TESTABLE_TYPES = new Set(Object.keys(CHANNEL_TYPE_NAME).map(Number));

/** The types whose upstream publishes a balance (`server/upstream/providers/balances.py` `BALANCE_TYPES`;
 * the server stores and answers it in USD). */
export const BALANCE_TYPES = new Set(BALANCED);

/**
 * The Base URL field's hint for a channel type.
 * @param {number} type
 */
export function baseUrlHint(type) {
  if (type === ChannelType.CUSTOM) return t("channel.customRequired");
  const base = DEFAULT_BASE[type];
  return base ? t("channel.defaultBase", { base }) : t("channel.defaultBaseNone");
}

/** @param {number} type */
export function typeName(type) {
  if (type === ChannelType.CUSTOM) return t("channel.custom");
  return CHANNEL_TYPE_NAME[type] ?? t("channel.typeN", { n: String(type) });
}

/**
 * @param {import("../types.js").PageContext} ctx
 * @param {import("../types.js").Channel | null} channel  null: create
 * @param {() => void} onSaved
 */
export function openChannelForm({ api, session, shell }, channel, onSaved) {
  const dialog = openDialog(channel ? t("channel.editDialog", { name: channel.name }) : t("channel.createDialog"));
  const types = Object.keys(CHANNEL_TYPE_NAME).map((value) => ({ value, label: typeName(Number(value)) }));
  if (channel && !(channel.type in CHANNEL_TYPE_NAME)) types.push({ value: String(channel.type), label: typeName(channel.type) });
  const models = field(t("channels.models"), "models", { type: "textarea", value: channel ? channel.models : "",
    hint: t("channel.modelsHint") });
  const baseUrl = field(t("channel.baseUrl"), "base_url", { value: channel ? channel.base_url : "", autocomplete: "off",
    hint: baseUrlHint(channel ? channel.type : 1) });
  const canFetch = channel !== null || session.role >= Role.ROOT;
  const fetchModels = async () => {
    const editor = /** @type {HTMLFormElement} */ (dialog.body.querySelector("form"));
    try {
      /** @type {string[]} */
      const found = channel
        ? await api.get(`/api/channel/fetch_models/${channel.id}`)
        : await api.post("/api/channel/fetch_models", { type: Number(valueOf(editor, "type")),
          key: valueOf(editor, "key"), base_url: valueOf(editor, "base_url").trim() });
      const box = /** @type {HTMLTextAreaElement} */ (models.querySelector("textarea"));
      box.value = found.join(",");
      shell.say(t("channel.fetched", { count: found.length }));
    } catch (error) {
      showError(editor, error);
    }
  };

  const editor = form(channel ? t("channel.editForm") : t("channel.createDialog"), async (f) => {
    /** @type {Record<string, unknown>} */
    const fields = { type: Number(valueOf(f, "type")), name: valueOf(f, "name").trim(),
      base_url: valueOf(f, "base_url").trim(), models: valueOf(f, "models").trim(),
      group: valueOf(f, "group").trim(), tag: valueOf(f, "tag").trim(), test_model: valueOf(f, "test_model").trim(),
      model_mapping: valueOf(f, "model_mapping").trim(), remark: valueOf(f, "remark").trim() };
    for (const name of ["priority", "weight"]) {
      const text = valueOf(f, name).trim();
      const number = Number(text);
      if (text === "" || !Number.isInteger(number)) throw refuse(name, t("common.mustBeWhole"));
      fields[name] = number;
    }
    const key = valueOf(f, "key");
    if (channel) {
      if (key.trim()) fields.key = key;
      await api.put("/api/channel/", { ...fields, id: channel.id });
    } else {
      /** @type {number[]} */
      const ids = await api.post("/api/channel/", { mode: valueOf(f, "mode"), channel: { ...fields, key },
        multi_key_mode: valueOf(f, "mode") === "multi_to_single" ? valueOf(f, "multi_key_mode") : undefined });
      shell.say(t("channel.created", { count: ids.length }));
    }
    onSaved();
    dialog.close();
  },
  field(t("col.name"), "name", { value: channel ? channel.name : "", required: true, autocomplete: "off" }),
  field(t("col.type"), "type", { type: "select", value: String(channel ? channel.type : 1), options: types }),
  channel ? null : field(t("channel.mode"), "mode", { type: "select", value: "single", options: [
    { value: "single", label: t("channel.single") },
    { value: "batch", label: t("channel.batch") },
    { value: "multi_to_single", label: t("channel.multi") }] }),
  channel ? null : field(t("channel.multiMode"), "multi_key_mode", { type: "select", value: "random",
    options: [{ value: "random", label: t("channel.random") }, { value: "polling", label: t("channel.polling") }] }),
  field(t("channel.key"), "key", { type: "textarea", required: !channel, autocomplete: "off",
    hint: channel ? t("channel.keepKey") : t("channel.keyPerLine") }),
  baseUrl,
  models,
  canFetch ? h("div", { class: "actions inline" }, h("button", { type: "button", class: "secondary",
    onclick: () => void fetchModels() }, t("channel.fetch"))) : null,
  field(t("channels.groups"), "group", { value: channel ? channel.group : "default", autocomplete: "off",
    hint: t("channel.groupsHint") }),
  field(t("channels.tag"), "tag", { value: channel ? channel.tag : "", autocomplete: "off" }),
  field(t("channels.priority"), "priority", { type: "number", inputmode: "numeric", step: "1", value: String(channel ? channel.priority : 0),
    hint: t("channel.priorityHint") }),
  field(t("channel.weight"), "weight", { type: "number", inputmode: "numeric", step: "1", min: "0",
    value: String(channel ? channel.weight : 0) }),
  field(t("channel.testModel"), "test_model", { value: channel ? channel.test_model : "", autocomplete: "off",
    hint: t("channel.testModelHint") }),
  field(t("channel.mapping"), "model_mapping", { type: "textarea", value: channel ? channel.model_mapping : "",
    hint: t("channel.mappingHint") }),
  field(t("users.remark"), "remark", { value: channel ? channel.remark : "", autocomplete: "off" }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    h("button", { type: "submit" }, channel ? t("common.save") : t("channels.create"))));
  dialog.body.append(editor);
  const typeBox = /** @type {HTMLSelectElement} */ (editor.querySelector("select[name=type]"));
  const hint = /** @type {HTMLElement} */ (baseUrl.querySelector(".hint"));
  typeBox.addEventListener("change", () => { hint.textContent = baseUrlHint(Number(typeBox.value)); });
  editor.querySelector("input")?.focus();
}
