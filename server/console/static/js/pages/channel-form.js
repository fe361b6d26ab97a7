/**
 * The create / edit form of a channel, in a dialog (`POST /api/channel/` with its `mode`: one channel,
 * one per key line, or one channel with several keys; `PUT /api/channel/`, which changes only what it is
 * sent and keeps the keys when the key field is left empty). "Fetch the upstream's models" fills the
 * model list from the upstream: a saved channel with `GET /api/channel/fetch_models/{id}`, settings not
 * saved yet (root only) with `POST /api/channel/fetch_models`.
 */

import { h } from "../dom.js";
import { field, form, refuse, showError, valueOf } from "../forms.js";
import { Role } from "../session.js";
import { openDialog } from "../widgets/dialog.js";

/** new-api's channel type numbers that Tollway knows by name (others are shown by number). */
export const CHANNEL_TYPES = /** @type {Record<number, string>} */ ({
  1: "OpenAI", 8: "Custom", 14: "Anthropic", 20: "OpenRouter", 24: "Gemini", 25: "Moonshot", 40: "SiliconFlow",
  43: "DeepSeek",
});

/** The address a channel of a type calls when its base URL is empty (`server/upstream/providers`); a
 * Custom channel (8) has none: the server refuses one without a base URL. */
export const DEFAULT_BASES = /** @type {Record<number, string>} */ ({
  1: "https://api.openai.com", 14: "https://api.anthropic.com", 20: "https://openrouter.ai/api",
  24: "https://generativelanguage.googleapis.com", 25: "https://api.moonshot.cn", 40: "https://api.siliconflow.cn",
  43: "https://api.deepseek.com",
});

/**
 * The Base URL field's hint for a channel type.
 * @param {number} type
 */
export function baseUrlHint(type) {
  if (type === 8) return "Required: a Custom channel has no default address.";
  const base = DEFAULT_BASES[type];
  return base ? `Empty for the type's default address, ${base}.` : "Empty for the type's default address.";
}

/** @param {number} type */
export function typeName(type) {
  return CHANNEL_TYPES[type] ?? `Type ${type}`;
}

/**
 * @param {import("../types.js").PageContext} ctx
 * @param {import("../types.js").Channel | null} channel  null: create
 * @param {() => void} onSaved
 */
export function openChannelForm({ api, session, shell }, channel, onSaved) {
  const dialog = openDialog(channel ? `Edit channel “${channel.name}”` : "Create a channel");
  const types = Object.entries(CHANNEL_TYPES).map(([value, label]) => ({ value, label }));
  if (channel && !(channel.type in CHANNEL_TYPES)) types.push({ value: String(channel.type), label: typeName(channel.type) });
  const models = field("Models", "models", { type: "textarea", value: channel ? channel.models : "",
    hint: "Comma-separated model names this channel serves." });
  const baseUrl = field("Base URL", "base_url", { value: channel ? channel.base_url : "", autocomplete: "off",
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
      shell.say(`${found.length} ${found.length === 1 ? "model" : "models"} fetched from the upstream.`);
    } catch (error) {
      showError(editor, error);
    }
  };

  const editor = form(channel ? "Edit channel" : "Create a channel", async (f) => {
    /** @type {Record<string, unknown>} */
    const fields = { type: Number(valueOf(f, "type")), name: valueOf(f, "name").trim(),
      base_url: valueOf(f, "base_url").trim(), models: valueOf(f, "models").trim(),
      group: valueOf(f, "group").trim(), tag: valueOf(f, "tag").trim(), test_model: valueOf(f, "test_model").trim(),
      model_mapping: valueOf(f, "model_mapping").trim(), remark: valueOf(f, "remark").trim() };
    for (const name of ["priority", "weight"]) {
      const text = valueOf(f, name).trim();
      const number = Number(text);
      if (text === "" || !Number.isInteger(number)) throw refuse(name, "must be a whole number");
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
      shell.say(`${ids.length} ${ids.length === 1 ? "channel" : "channels"} created.`);
    }
    onSaved();
    dialog.close();
  },
  field("Name", "name", { value: channel ? channel.name : "", required: true, autocomplete: "off" }),
  field("Type", "type", { type: "select", value: String(channel ? channel.type : 1), options: types }),
  channel ? null : field("How the keys are used", "mode", { type: "select", value: "single", options: [
    { value: "single", label: "One channel with this key" },
    { value: "batch", label: "One channel per key line" },
    { value: "multi_to_single", label: "One channel with several keys (one per line)" }] }),
  channel ? null : field("Key order of a multi-key channel", "multi_key_mode", { type: "select", value: "random",
    options: [{ value: "random", label: "Random" }, { value: "polling", label: "In turn" }] }),
  field("Key", "key", { type: "textarea", required: !channel, autocomplete: "off",
    hint: channel ? "Leave empty to keep the key; it is never shown here." : "One key per line for several keys." }),
  baseUrl,
  models,
  canFetch ? h("div", { class: "actions inline" }, h("button", { type: "button", class: "secondary",
    onclick: () => void fetchModels() }, "Fetch the upstream's models")) : null,
  field("Groups", "group", { value: channel ? channel.group : "default", autocomplete: "off",
    hint: "Comma-separated groups whose users this channel serves." }),
  field("Tag", "tag", { value: channel ? channel.tag : "", autocomplete: "off" }),
  field("Priority", "priority", { type: "number", inputmode: "numeric", step: "1", value: String(channel ? channel.priority : 0),
    hint: "Higher is tried first." }),
  field("Weight", "weight", { type: "number", inputmode: "numeric", step: "1", min: "0",
    value: String(channel ? channel.weight : 0) }),
  field("Test model", "test_model", { value: channel ? channel.test_model : "", autocomplete: "off",
    hint: "Empty: the first model." }),
  field("Model mapping", "model_mapping", { type: "textarea", value: channel ? channel.model_mapping : "",
    hint: "A JSON object: requested model → upstream model." }),
  field("Remark", "remark", { value: channel ? channel.remark : "", autocomplete: "off" }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
    h("button", { type: "submit" }, channel ? "Save" : "Create channel")));
  dialog.body.append(editor);
  const typeBox = /** @type {HTMLSelectElement} */ (editor.querySelector("select[name=type]"));
  const hint = /** @type {HTMLElement} */ (baseUrl.querySelector(".hint"));
  typeBox.addEventListener("change", () => { hint.textContent = baseUrlHint(Number(typeBox.value)); });
  editor.querySelector("input")?.focus();
}
