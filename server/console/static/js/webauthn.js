/**
 * Passkeys in the browser: the server's ceremony options (`{"publicKey": {…}}`, binary fields as
 * base64url) turned into what `navigator.credentials.create()` / `.get()` take (ArrayBuffers), and the
 * browser's credential turned back into the JSON the `finish` routes read (`id`, `rawId`, `type`,
 * `response{…}`, `clientExtensionResults`, binary fields as base64url). Converted by hand, field by
 * field, so it works in browsers without `PublicKeyCredential.parseCreationOptionsFromJSON`.
 */

import { t } from "./i18n.js";

/** Whether this browser can use passkeys at all. */
export function passkeysSupported() {
  return typeof window.PublicKeyCredential === "function" && !!navigator.credentials;
}

/**
 * base64url (padding optional) → bytes.
 * @param {string} text
 * @returns {ArrayBuffer}
 */
export function fromBase64Url(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes.buffer;
}

/**
 * bytes → base64url without padding.
 * @param {ArrayBuffer | ArrayBufferView} data
 */
export function toBase64Url(data) {
  const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * @typedef {{type: string, id: string, transports?: string[]}} DescriptorJSON
 * @typedef {{publicKey: Record<string, any>}} CeremonyOptions  a `begin` route's `options`
 */

/** @param {DescriptorJSON[] | undefined} list */
function descriptors(list) {
  return (list ?? []).map((d) => /** @type {PublicKeyCredentialDescriptor} */ (
    { ...d, type: "public-key", id: fromBase64Url(d.id), transports: /** @type {any} */ (d.transports) }));
}

/**
 * A registration `begin`'s options as `navigator.credentials.create()` takes them.
 * @param {CeremonyOptions} options
 * @returns {CredentialCreationOptions}
 */
export function creationOptions(options) {
  const o = options.publicKey;
  /** @type {PublicKeyCredentialCreationOptions} */
  const publicKey = { ...o, rp: o.rp, pubKeyCredParams: o.pubKeyCredParams, challenge: fromBase64Url(o.challenge),
    user: { ...o.user, id: fromBase64Url(o.user.id) }, excludeCredentials: descriptors(o.excludeCredentials) };
  return { publicKey };
}

/**
 * A login or verification `begin`'s options as `navigator.credentials.get()` takes them.
 * @param {CeremonyOptions} options
 * @returns {CredentialRequestOptions}
 */
export function requestOptions(options) {
  const o = options.publicKey;
  return { publicKey: { ...o, challenge: fromBase64Url(o.challenge), allowCredentials: descriptors(o.allowCredentials) } };
}

/**
 * The fields every credential JSON has.
 * @param {PublicKeyCredential} credential
 */
function common(credential) {
  /** @type {Record<string, unknown>} */
  const json = { id: credential.id, rawId: toBase64Url(credential.rawId), type: credential.type,
    clientExtensionResults: credential.getClientExtensionResults() };
  if (credential.authenticatorAttachment) json.authenticatorAttachment = credential.authenticatorAttachment;
  return json;
}

/**
 * Ask the browser for a new passkey with a registration `begin`'s options; its answer as the JSON of
 * `POST /api/user/passkey/register/finish`. Throws when the person cancels (the browser's error).
 * @param {CeremonyOptions} options
 */
export async function createCredential(options) {
  const credential = /** @type {PublicKeyCredential | null} */ (await navigator.credentials.create(creationOptions(options)));
  if (!credential) throw new Error(t("passkey.noneMade"));
  const response = /** @type {AuthenticatorAttestationResponse} */ (credential.response);
  return { ...common(credential), response: { clientDataJSON: toBase64Url(response.clientDataJSON),
    attestationObject: toBase64Url(response.attestationObject),
    transports: typeof response.getTransports === "function" ? response.getTransports() : [] } };
}

/**
 * Ask the browser to sign a login or verification `begin`'s challenge with a passkey; its answer as the
 * JSON of the matching `finish` route.
 * @param {CeremonyOptions} options
 */
export async function getCredential(options) {
  const credential = /** @type {PublicKeyCredential | null} */ (await navigator.credentials.get(requestOptions(options)));
  if (!credential) throw new Error(t("passkey.noneGiven"));
  const response = /** @type {AuthenticatorAssertionResponse} */ (credential.response);
  /** @type {Record<string, unknown>} */
  const answer = { clientDataJSON: toBase64Url(response.clientDataJSON),
    authenticatorData: toBase64Url(response.authenticatorData), signature: toBase64Url(response.signature) };
  if (response.userHandle) answer.userHandle = toBase64Url(response.userHandle);
  return { ...common(credential), response: answer };
}

/**
 * What a browser's refusal means to the person (the browser's own wording is for developers).
 * @param {unknown} error
 */
export function browserRefusal(error) {
  if (error instanceof DOMException && error.name === "NotAllowedError") {
    return t("passkey.cancelled");
  }
  if (error instanceof DOMException && error.name === "InvalidStateError") {
    return t("passkey.already");
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * One passkey ceremony against the API: `{path}/begin` gives the options, the browser makes (`create`) or
 * signs with (`get`) a passkey — its refusal told in words for people (`browserRefusal`) —, and the answer
 * goes to `{path}/finish`, whose reply is returned.
 * @param {{post: (path: string, body?: unknown) => Promise<any>}} api
 * @param {string} path e.g. `/api/user/passkey/login`
 * @param {"create" | "get"} kind
 * @returns {Promise<any>}
 */
export async function ceremony(api, path, kind) {
  /** @type {import("./generated/api.js").PasskeyOptions} */
  const begun = await api.post(`${path}/begin`);
  // the API declares `options` an opaque object: its shape is WebAuthn's, read field by field above
  const options = /** @type {CeremonyOptions} */ (begun.options);
  let answer;
  try {
    answer = kind === "create" ? await createCredential(options) : await getCredential(options);
  } catch (error) {
    throw new Error(browserRefusal(error));
  }
  return api.post(`${path}/finish`, answer);
}
