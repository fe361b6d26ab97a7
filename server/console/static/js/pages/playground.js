/**
 * Playground (`/playground`, every signed-in user): speech — a model that speaks (`GET /api/user/models`
 * with `capability=speech_output`), one of Gemini's prebuilt voices and a text, sent to the gateway's G1
 * route (`POST /v1beta/models/{model}:generateContent`) with one of your API keys; the base64 PCM of the
 * answer is wrapped in a WAV header here and played from a `blob:` address. And a moderation tester
 * (`POST /v1/moderations`) showing whether the text is flagged, by category, with the scores. The gateway's
 * routes are outside `/api` and take the key (revealed with `POST /api/token/{id}/key` when first used),
 * not the session. And a chat (`chat.js`): a conversation streamed from a chat model. Calls at load: the
 * speaking and the moderation models, the price list (`GET /api/pricing`: the models you may call and the
 * groups that offer them, for the chat), and your keys (4).
 */

import { h, replace } from "../dom.js";
import { field, form, heading, refuse, valueOf } from "../forms.js";
import { ApiError } from "../api.js";
import { number, t } from "../i18n.js";
import { chatPanel, followModel, keysFor } from "./chat.js";

/** Gemini's prebuilt voices (a selection; the upstream knows more). */
export const VOICES = ["Kore", "Puck", "Charon", "Aoede", "Fenrir", "Leda", "Orus", "Zephyr"];
const KEY_PREFIX = "sk-";
const DEFAULT_RATE = 24000;

/**
 * 16-bit little-endian mono PCM as a WAV file.
 * @param {Uint8Array<ArrayBuffer>} pcm
 * @param {number} rate  samples per second
 */
export function wavOf(pcm, rate) {
  const header = new DataView(new ArrayBuffer(44));
  const text = (/** @type {number} */ at, /** @type {string} */ s) => {
    for (let i = 0; i < s.length; i += 1) header.setUint8(at + i, s.charCodeAt(i));
  };
  text(0, "RIFF");
  header.setUint32(4, 36 + pcm.length, true);
  text(8, "WAVE");
  text(12, "fmt ");
  header.setUint32(16, 16, true);  // the fmt chunk's size
  header.setUint16(20, 1, true);  // PCM
  header.setUint16(22, 1, true);  // mono
  header.setUint32(24, rate, true);
  header.setUint32(28, rate * 2, true);  // bytes per second
  header.setUint16(32, 2, true);  // bytes per frame
  header.setUint16(34, 16, true);  // bits per sample
  text(36, "data");
  header.setUint32(40, pcm.length, true);
  return new Blob([header.buffer, pcm], { type: "audio/wav" });
}

/**
 * The sample rate a mime type names (`audio/L16;codec=pcm;rate=24000`), else 24 kHz.
 * @param {string} mime
 */
export function rateOf(mime) {
  const found = /(?:^|;)\s*rate=(\d+)/i.exec(mime);
  return found ? Number(found[1]) : DEFAULT_RATE;
}

/** @param {string} base64 @returns {Uint8Array<ArrayBuffer>} */
function bytesOf(base64) {
  const binary = atob(base64);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * A call to the gateway (outside `/api`) with an API key; the JSON answer, or its error thrown with the
 * upstream-style message (`error.message`) as an ApiError.
 * @param {string} path
 * @param {string} key
 * @param {Record<string, string>} auth  the header the route reads the key from
 * @param {unknown} body
 * @returns {Promise<any>}
 */
async function gateway(path, key, auth, body) {
  const headers = { "Content-Type": "application/json", ...Object.fromEntries(Object.entries(auth).map(([k, v]) => [k, v + key])) };
  let response;
  try {
    response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body), credentials: "omit", cache: "no-store" });
  } catch (error) {
    throw new ApiError(t("play.unreachable", { reason: error instanceof Error ? error.message : String(error) }), 0);
  }
  /** @type {any} */
  const answer = await response.json().catch(() => null);
  if (!response.ok) {
    const message = answer && answer.error && typeof answer.error.message === "string" ? answer.error.message
      : t("api.noMessage", { status: response.status });
    throw new ApiError(message, response.status);
  }
  return answer;
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api } = ctx;
  /** @type {[string[], string[], {model_name: string, enable_groups: string[]}[], import("../types.js").Paged<import("../types.js").ApiKey>]} */
  const [speaking, moderating, offered, keys] = await Promise.all([
    api.get("/api/user/models", { capability: "speech_output" }),
    api.get("/api/user/models", { capability: "moderation" }),
    api.get("/api/pricing"),
    api.get("/api/token/", { p: 1, page_size: 100 }),
  ]);
  /** @type {Map<number, string>} */
  const revealed = new Map();
  /** @param {number} id */
  const reveal = async (id) => {
    const known = revealed.get(id);
    if (known) return known;
    /** @type {import("../generated/api.js").RevealedKey} */
    const answer = await api.post(`/api/token/${id}/key`);
    const whole = `${KEY_PREFIX}${answer.key}`;
    revealed.set(id, whole);
    return whole;
  };
  /** @param {HTMLFormElement} element */
  const keyOf = async (element) => {
    const id = Number(valueOf(element, "key"));
    if (!id) throw refuse("key", t("play.needKey"));
    return reveal(id);
  };
  const others = new Set([...speaking, ...moderating]);
  const chat = chatPanel(ctx, { models: offered.filter((m) => !others.has(m.model_name)), keys: keys.items, keyOf: reveal });
  const userGroup = ctx.session.user?.group ?? "default";
  /** the keys that may call a model (its limits and group allow it): each form's key list follows its model */
  const keyOptions = (/** @type {string} */ model) => keysFor(keys.items, offered, userGroup, model);
  const modelOptions = (/** @type {string[]} */ names) => names.map((n) => ({ value: n, label: n }));

  /**
   * A model list and a key list that follows it; the model chosen first is one a key may call.
   * @param {string[]} models
   * @param {string} [hint]
   */
  const modelAndKey = (models, hint = "") => {
    const first = models.find((m) => keyOptions(m).length) ?? models[0] ?? "";
    const model = field(t("col.model"), "model", { type: "select", options: modelOptions(models), value: first, hint });
    const key = field(t("col.apiKey"), "key", { type: "select", options: keyOptions(first),
      value: keyOptions(first)[0]?.value ?? "", hint: t("play.keyHint") });
    followModel(model, key, keyOptions);
    return [model, key];
  };
  const [speechModel, speechKey] = modelAndKey(speaking, speaking.length ? "" : t("play.noSpeakerHint"));
  const [moderationModel, moderationKey] = modelAndKey(moderating);

  const player = h("div", { class: "player", "aria-live": "polite" });
  let audioUrl = "";
  const speech = form(t("play.speech"), async (element) => {
    const model = valueOf(element, "model");
    const text = valueOf(element, "text").trim();
    if (!model) throw refuse("model", t("play.noSpeaker"));
    if (!text) throw refuse("text", t("play.typeSomething"));
    const key = await keyOf(element);
    const answer = await gateway(`/v1beta/models/${encodeURIComponent(model)}:generateContent`, key,
      { "x-goog-api-key": "" }, {
        contents: [{ role: "user", parts: [{ text }] }],
        generationConfig: { responseModalities: ["AUDIO"],
          speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: valueOf(element, "voice") } } } },
      });
    const parts = answer?.candidates?.[0]?.content?.parts ?? [];
    /** @type {{mimeType: string, data: string} | undefined} */
    const audio = parts.map((/** @type {any} */ p) => p.inlineData).find((/** @type {any} */ d) => d && typeof d.data === "string");
    if (!audio) throw new ApiError(t("play.noAudio"), 200);
    if (audioUrl) URL.revokeObjectURL(audioUrl);
    audioUrl = URL.createObjectURL(wavOf(bytesOf(audio.data), rateOf(audio.mimeType ?? "")));
    replace(player, h("audio", { controls: true, src: audioUrl, "aria-label": t("play.spoken") }),
      h("p", { class: "hint" }, t("play.audioInfo", { model, voice: valueOf(element, "voice"), mime: audio.mimeType })));
  },
  speechModel,
  field(t("play.voice"), "voice", { type: "select", options: VOICES.map((v) => ({ value: v, label: v })), value: VOICES[0] }),
  speechKey,
  field(t("play.textToSay"), "text", { type: "textarea" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("play.speak"))));

  const verdict = h("div", { "aria-live": "polite" });
  const moderation = form(t("play.moderation"), async (element) => {
    const model = valueOf(element, "model");
    const input = valueOf(element, "input").trim();
    if (!input) throw refuse("input", t("play.typeText"));
    const answer = await gateway("/v1/moderations", await keyOf(element), { Authorization: "Bearer " },
      model ? { model, input } : { input });
    /** @type {{flagged: boolean, categories: Record<string, boolean>, category_scores: Record<string, number>}} */
    const result = answer.results[0];
    const names = Object.keys(result.category_scores).sort((a, b) => result.category_scores[b] - result.category_scores[a]);
    replace(verdict, h("p", { class: result.flagged ? "flagged" : "clean" }, result.flagged ? t("play.flagged") : t("play.notFlagged")),
      h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("play.result") },
        h("table", { class: "stacking" }, h("caption", {}, t("play.categories")),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, t("play.category")), h("th", { scope: "col" }, t("play.flaggedCol")),
            h("th", { scope: "col" }, t("play.score")))),
          h("tbody", {}, names.map((n) => h("tr", {}, h("th", { scope: "row", "data-label": t("play.category") }, n),
            h("td", { "data-label": t("play.flaggedCol") }, result.categories[n] ? t("common.yes") : t("common.no")),
            h("td", { "data-label": t("play.score") }, number(result.category_scores[n], { minimumFractionDigits: 4, maximumFractionDigits: 4 }))))))));
  },
  moderationModel,
  moderationKey,
  field(t("play.textToCheck"), "input", { type: "textarea" }),
  h("div", { class: "actions inline" }, h("button", { type: "submit" }, t("play.check"))));

  replace(main,
    heading(t("page.playground")),
    h("p", {}, t("play.intro")),
    chat,
    h("section", { class: "panel", "aria-labelledby": "speech-heading" }, h("h2", { id: "speech-heading" }, t("play.speech")),
      speech, player),
    h("section", { class: "panel", "aria-labelledby": "moderation-heading" },
      h("h2", { id: "moderation-heading" }, t("play.moderation")), moderation, verdict));
}
