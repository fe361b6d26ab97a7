/**
 * The playground's chat (`/playground`): a chat model and one of your API keys that may call it (the key
 * list follows the model: a key's model limits and its group — or yours — must allow it), a system prompt,
 * and a conversation streamed into the page as it arrives (`POST /v1/chat/completions` with `stream: true`
 * and `stream_options.include_usage`, read with fetch and a ReadableStream), stopped with an
 * AbortController. Each turn then shows its tokens and charge from its log, looked up by the reply's
 * request id (`X-Request-Id`) with `GET /api/log/self?request_id=`: the log is written within about a
 * second of the reply, so the lookup is tried a few times, then offered again with a button.
 */

import { h, replace } from "../dom.js";
import { field, form, refuse, valueOf } from "../forms.js";
import { ApiError } from "../api.js";
import { number, t } from "../i18n.js";

/** @typedef {import("../types.js").ApiKey} ApiKey */
/** @typedef {{model_name: string, enable_groups: string[]}} Offered */
/** @typedef {{role: string, content: string}} Message */

/** Waits between the lookups of a turn's log (ms): about 8 s in all. */
const LOOKUPS = [300, 500, 700, 1000, 1500, 2000, 2000];

/**
 * Whether `key` may call `model`: its model limits allow it, and the model is offered in the key's group
 * (or the user's, for a key without one; `auto` reaches every group).
 * @param {ApiKey} key
 * @param {Offered} model
 * @param {string} userGroup
 */
export function keyMayCall(key, model, userGroup) {
  if (key.status !== 1) return false;
  if (key.model_limits_enabled) {
    const allowed = key.model_limits.split(",").map((m) => m.trim()).filter(Boolean);
    if (!allowed.includes(model.model_name)) return false;
  }
  const group = key.group || userGroup;
  return group === "auto" || model.enable_groups.includes(group);
}

/**
 * The key options of a model: the enabled keys that may call it (all the enabled keys for a model the
 * price list does not name).
 * @param {ApiKey[]} keys
 * @param {Offered[]} models
 * @param {string} userGroup
 * @param {string} modelName
 */
export function keysFor(keys, models, userGroup, modelName) {
  const model = models.find((m) => m.model_name === modelName);
  return keys.filter((k) => (model ? keyMayCall(k, model, userGroup) : k.status === 1))
    .map((k) => ({ value: String(k.id), label: k.name || `#${k.id}` }));
}

/**
 * Make a form's key list follow its model list: when the model changes, only the keys that may call it
 * are offered (the one chosen kept when it still may).
 * @param {HTMLElement} modelField
 * @param {HTMLElement} keyField
 * @param {(model: string) => {value: string, label: string}[]} optionsFor
 */
export function followModel(modelField, keyField, optionsFor) {
  modelField.querySelector("select")?.addEventListener("change", (event) => {
    const select = /** @type {HTMLSelectElement | null} */ (keyField.querySelector("select"));
    if (!select) return;
    const before = select.value;
    const options = optionsFor(/** @type {HTMLSelectElement} */ (event.target).value);
    replace(select, options.map((o) => h("option", { value: o.value }, o.label)));
    select.value = options.some((o) => o.value === before) ? before : options[0]?.value ?? "";
  });
}

/**
 * The events of a server-sent event stream, as their `data` lines joined, from a reader of bytes.
 * @param {ReadableStreamDefaultReader<Uint8Array>} reader
 * @returns {AsyncGenerator<string>}
 */
async function* events(reader) {
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value ?? new Uint8Array(), { stream: !done });
    const parts = buffer.split(/\r?\n\r?\n/);
    buffer = done ? "" : parts.pop() ?? "";
    for (const part of parts) {
      const data = part.split(/\r?\n/).filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart()).join("\n");
      if (data) yield data;
    }
    if (done) return;
  }
}

/**
 * The chat panel.
 * @param {import("../types.js").PageContext} ctx
 * @param {{models: Offered[], keys: ApiKey[], keyOf: (id: number) => Promise<string>}} options
 */
export function chatPanel(ctx, { models, keys, keyOf }) {
  const { api, session, site } = ctx;
  const userGroup = session.user?.group ?? "default";
  const usable = models.filter((m) => keys.some((k) => keyMayCall(k, m, userGroup)));
  const first = usable[0] ?? models[0];
  /** @type {Message[]} */
  let history = [];
  /** @type {AbortController | null} */
  let streaming = null;
  const conversation = h("div", { class: "conversation", role: "log", "aria-label": t("chat.conversation") });

  const keyOptions = (/** @type {string} */ modelName) => keysFor(keys, models, userGroup, modelName);
  const keyField = field(t("col.apiKey"), "key", { type: "select", options: keyOptions(first?.model_name ?? ""),
    value: keyOptions(first?.model_name ?? "")[0]?.value ?? "", hint: t("chat.keyHint") });
  const modelField = field(t("col.model"), "model", { type: "select", value: first?.model_name ?? "",
    options: models.map((m) => ({ value: m.model_name, label: m.model_name })),
    hint: models.length ? "" : t("chat.noModels") });
  followModel(modelField, keyField, keyOptions);
  const stop = h("button", { type: "button", class: "secondary", disabled: true, "data-while-busy": true,
    onclick: () => streaming?.abort() }, t("chat.stop"));
  const clear = h("button", { type: "button", class: "secondary", onclick: () => {
    history = [];
    replace(conversation);
  } }, t("chat.clear"));

  const chatForm = form(t("chat.title"), async (element) => {
    const model = valueOf(element, "model");
    const text = valueOf(element, "message").trim();
    if (!model) throw refuse("model", t("chat.noModels"));
    if (!text) throw refuse("message", t("play.typeSomething"));
    const id = Number(valueOf(element, "key"));
    if (!id) throw refuse("key", t("chat.noKey"));
    const key = await keyOf(id);
    const system = valueOf(element, "system").trim();
    const asked = [...history, { role: "user", content: text }];
    const reply = h("div", { class: "turn-text" });
    const meta = h("p", { class: "turn-meta hint" }, t("chat.waiting"));
    const turn = h("div", { class: "turn" }, h("p", { class: "turn-user" }, h("strong", {}, t("chat.you")), " ", text),
      h("div", { class: "turn-assistant" }, h("strong", {}, t("chat.said", { model })), " ", reply), meta);
    conversation.append(turn);
    const controller = new AbortController();
    streaming = controller;
    stop.disabled = false;
    let content = "";
    let requestId = "";
    let cut = false;
    try {
      let response;
      try {
        response = await fetch("/v1/chat/completions", {
          method: "POST", credentials: "omit", cache: "no-store", signal: controller.signal,
          headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
          body: JSON.stringify({ model, stream: true, stream_options: { include_usage: true },
            messages: system ? [{ role: "system", content: system }, ...asked] : asked }),
        });
      } catch (error) {
        turn.remove();
        throw new ApiError(t("play.unreachable", { reason: error instanceof Error ? error.message : String(error) }), 0);
      }
      requestId = response.headers.get("X-Request-Id") ?? "";
      if (!response.ok || !response.body) {
        /** @type {any} */
        const answer = await response.json().catch(() => null);
        turn.remove();
        throw new ApiError(typeof answer?.error?.message === "string" ? answer.error.message
          : t("api.noMessage", { status: response.status }), response.status);
      }
      const input = /** @type {HTMLTextAreaElement | null} */ (element.elements.namedItem("message"));
      if (input) input.value = "";
      try {
        for await (const data of events(response.body.getReader())) {
          if (data === "[DONE]") break;
          /** @type {any} */
          const chunk = JSON.parse(data);
          if (chunk.error) {
            meta.textContent = "";
            reply.append(h("p", { class: "form-error server-text" }, String(chunk.error.message ?? "")));
            break;
          }
          const piece = chunk.choices?.[0]?.delta?.content;
          if (typeof piece === "string" && piece) {
            content += piece;
            reply.textContent = content;
          }
        }
      } catch (error) {
        if (!(error instanceof DOMException && error.name === "AbortError")) throw error;
        cut = true;
      }
    } finally {
      streaming = null;
      stop.disabled = true;
    }
    history = [...asked, { role: "assistant", content }];
    meta.textContent = cut ? t("chat.stopped") : "";
    if (requestId) void showCharge(meta, requestId, cut);
  },
  modelField,
  keyField,
  field(t("chat.system"), "system", { type: "textarea", hint: t("chat.systemHint") }),
  conversation,
  field(t("chat.message"), "message", { type: "textarea" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("chat.send")), stop, clear));

  /**
   * The tokens and charge of a turn, from its log.
   * @param {HTMLElement} meta
   * @param {string} requestId
   * @param {boolean} cut
   */
  const showCharge = async (meta, requestId, cut) => {
    const prefix = cut ? `${t("chat.stopped")} ` : "";
    meta.textContent = prefix + t("chat.lookingUp");
    for (const wait of LOOKUPS) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      try {
        /** @type {import("../types.js").Paged<import("./logs.js").LogRow>} */
        const page = await api.get("/api/log/self", { request_id: requestId, type: 2, p: 1, page_size: 1 });
        const log = page.items[0];
        if (log) {
          meta.textContent = prefix + t("chat.charge", { prompt: number(log.prompt_tokens),
            completion: number(log.completion_tokens), charge: site.quota(log.quota) });
          meta.dataset.requestId = requestId;
          return;
        }
      } catch (error) {
        meta.textContent = prefix + (error instanceof Error ? error.message : String(error));
        return;
      }
    }
    replace(meta, prefix + t("chat.notLogged"), " ", h("button", { type: "button", class: "secondary",
      onclick: () => void showCharge(meta, requestId, cut) }, t("chat.lookAgain")));
  };

  return h("section", { class: "panel chat", "aria-labelledby": "chat-heading" },
    h("h2", { id: "chat-heading" }, t("chat.title")), chatForm);
}
