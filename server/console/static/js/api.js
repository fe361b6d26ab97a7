/**
 * The console's one way to call the server: `api.get(path, query)`, `api.post(path, body)`, ….
 *
 * Every `/api` route answers the envelope `{success, message, data}`; a call resolves to `data`, or
 * throws an `ApiError` carrying the server's own message (and, when that message starts with a field
 * name — `password: must be 8–64 characters` — the field, so a form can show it next to that field).
 * A signed-in user's id goes out as `New-Api-User` with every call; the session itself is the
 * `HttpOnly` cookie the browser sends. A 401 on a call made as a signed-in user means the session ended:
 * `onSignedOut` is told.
 */

import { t } from "./i18n.js";

/** A field name at the start of a refusal: `name: …`, `channel.type: …`, `ids[2]: …`. */
const FIELD = /^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+|\[\d+\])*): (.+)$/s;

/** The envelope `code`s the console words itself, in the chosen language (other refusals: the server's message). */
const CODES = /** @type {Record<string, () => string>} */ ({
  VERIFICATION_REQUIRED: () => t("api.code.verificationRequired"),
  VERIFICATION_EXPIRED: () => t("api.code.verificationExpired"),
  CROSS_SITE_REQUEST: () => t("api.code.crossSite"),
  TOTP_CODE_REUSED: () => t("api.code.totpReused"),
});

export class ApiError extends Error {
  /**
   * @param {string} message the server's message (or what went wrong on the way)
   * @param {number} status the HTTP status (0 when the server could not be reached)
   * @param {string} [code] the envelope's `code`, when it has one: a code the console knows is shown in
   *   its own words, in the chosen language, instead of `message`
   */
  constructor(message, status, code = "") {
    super(code in CODES ? CODES[code]() : message);
    /** The server's own words. */
    this.serverMessage = message;
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    const named = FIELD.exec(message);
    /** The field the server's message names, or "". */
    this.field = named ? named[1] : "";
    /** The message without the field name (`must be 8–64 characters`), or the whole message (a code the
     * console words itself: its words). */
    this.detail = code in CODES ? this.message : named ? named[2] : this.message;
  }
}

/** @typedef {Record<string, string | number | boolean | undefined>} Query */

export class Api {
  constructor() {
    /** The signed-in user's id (0: nobody); sent as `New-Api-User`. */
    this.userId = 0;
    /** Called when a call made as a signed-in user answers 401 (the session ended). */
    this.onSignedOut = () => {};
    /** How many calls this page made (docs/CONSOLE.md counts them per page). */
    this.calls = 0;
  }

  /**
   * @param {string} path
   * @param {Query} [query]
   */
  get(path, query) {
    return this.request("GET", path, { query });
  }

  /**
   * A GET whose reply carries more than `data` beside it (`/api/pricing`'s `group_ratio`): the whole
   * envelope.
   * @param {string} path
   * @param {Query} [query]
   * @returns {Promise<Record<string, any>>}
   */
  envelope(path, query) {
    return this.request("GET", path, { query, whole: true });
  }

  /**
   * @param {string} path
   * @param {unknown} [body]
   * @param {Query} [query]
   */
  post(path, body, query) {
    return this.request("POST", path, { body, query });
  }

  /**
   * @param {string} path
   * @param {unknown} [body]
   * @param {Query} [query]
   */
  put(path, body, query) {
    return this.request("PUT", path, { body, query });
  }

  /** @param {string} path */
  delete(path) {
    return this.request("DELETE", path, {});
  }

  /**
   * A route that answers a file (an image), not the envelope: its body as a Blob, or the refusal (an
   * envelope) thrown as an `ApiError`. Sent like every call, with `New-Api-User`, which an `<img src>`
   * cannot send: a page shows the Blob through `URL.createObjectURL`.
   * @param {string} path
   * @returns {Promise<Blob>}
   */
  async blob(path) {
    const asUser = this.userId;
    /** @type {Record<string, string>} */
    const headers = asUser ? { "New-Api-User": String(asUser) } : {};
    this.calls += 1;
    let response;
    try {
      response = await fetch(new URL(path, window.location.origin), { headers, credentials: "same-origin", cache: "no-store" });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ApiError(t("api.unreachable", { reason }), 0);
    }
    if (response.ok) return response.blob();
    /** @type {any} */
    const envelope = await response.json().catch(() => null);
    const message = envelope && typeof envelope.message === "string" && envelope.message
      ? envelope.message : t("api.noMessage", { status: response.status });
    if (response.status === 401 && asUser && asUser === this.userId) this.onSignedOut();
    throw new ApiError(message, response.status);
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {{query?: Query, body?: unknown, whole?: boolean}} options
   * @returns {Promise<any>} the envelope's `data` (the envelope when `whole`)
   */
  async request(method, path, { query, body, whole }) {
    const url = new URL(path, window.location.origin);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== "") url.searchParams.set(name, String(value));
    }
    /** @type {Record<string, string>} */
    const headers = { Accept: "application/json" };
    const asUser = this.userId;
    if (asUser) headers["New-Api-User"] = String(asUser);
    /** @type {RequestInit} */
    const init = { method, headers, credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    this.calls += 1;
    let response;
    try {
      response = await fetch(url, init);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ApiError(t("api.unreachable", { reason }), 0);
    }
    /** @type {any} */
    let envelope = null;
    try {
      envelope = await response.json();
    } catch {
      envelope = null;
    }
    if (envelope === null || typeof envelope !== "object" || typeof envelope.success !== "boolean") {
      throw new ApiError(t("api.noEnvelope", { status: response.status, statusText: response.statusText }),
        response.status);
    }
    if (!envelope.success || !response.ok) {
      const message = typeof envelope.message === "string" && envelope.message
        ? envelope.message : t("api.noMessage", { status: response.status });
      if (response.status === 401 && asUser && asUser === this.userId) this.onSignedOut();
      throw new ApiError(message, response.status, typeof envelope.code === "string" ? envelope.code : "");
    }
    return whole ? envelope : envelope.data;
  }
}
