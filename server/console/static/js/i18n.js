/**
 * The console's languages: every string it shows is a message of a catalogue (`i18n/en.js`,
 * `i18n/zh-CN.js`: flat objects of key → message), looked up here by key with `t(key, params)`.
 *
 * - `{name}` in a message is replaced by `params.name` (`{count}` formatted as a number of the language).
 * - A plural message is two or more keys, `key.one`, `key.other` (and any other category of
 *   `Intl.PluralRules` the language needs): `t("key", {count})` picks the one of `count`.
 * - The language is the one remembered in `localStorage` (the header's switch), else the browser's
 *   (`navigator.languages`: `zh…` → Simplified Chinese, anything else → English). `<html lang>` follows it.
 * - Numbers, dates and money are formatted by `Intl` in that language: pass `locale()` to `toLocaleString`.
 *
 * docs/CONSOLE.md ("Languages") says how to add a language; `tests/console/test_i18n_catalogues.py` checks
 * that every language has every key and that every key is used.
 */

import english from "./i18n/en.js";
import chinese from "./i18n/zh-CN.js";

/** @typedef {Record<string, string>} Catalogue */

const en = /** @type {Catalogue} */ (english);

/** The languages offered, by BCP 47 tag, each with its own name (shown in the switch) and catalogue. */
export const LANGUAGES = /** @type {Record<string, {name: string, messages: Catalogue}>} */ ({
  en: { name: "English", messages: en },
  "zh-CN": { name: "简体中文", messages: /** @type {Catalogue} */ (chinese) },
});

const STORED = "tollway.language";

/**
 * The language of the browser's preferences that the console has.
 * @param {readonly string[]} preferred
 */
export function fromBrowser(preferred) {
  for (const tag of preferred) {
    const lower = tag.toLowerCase();
    if (lower.startsWith("zh")) return "zh-CN";
    if (lower.startsWith("en")) return "en";
  }
  return "en";
}

/** @returns {string} */
function initial() {
  let stored = "";
  try {
    stored = window.localStorage.getItem(STORED) ?? "";
  } catch {
    stored = "";
  }
  if (stored in LANGUAGES) return stored;
  return fromBrowser(navigator.languages?.length ? navigator.languages : [navigator.language || "en"]);
}

let current = initial();
let plurals = new Intl.PluralRules(current);

/** The chosen language's tag (`en`, `zh-CN`): the locale of every `Intl` format. */
export function locale() {
  return current;
}

/**
 * Choose a language (remembered in this browser) and set `<html lang>`; the caller redraws the page.
 * @param {string} tag
 */
export function setLanguage(tag) {
  if (!(tag in LANGUAGES)) return;
  current = tag;
  plurals = new Intl.PluralRules(tag);
  try {
    window.localStorage.setItem(STORED, tag);
  } catch {
    // private browsing: the choice lasts until the page is reloaded
  }
  document.documentElement.lang = tag;
}

/**
 * The message of `key` in the chosen language (English when the language lacks it, the key itself when
 * no catalogue has it), its `{name}` placeholders filled from `params`.
 * @param {string} key
 * @param {Record<string, string | number>} [params]
 */
export function t(key, params = {}) {
  const messages = LANGUAGES[current].messages;
  let message = messages[key] ?? en[key];
  if (message === undefined && typeof params.count === "number") {
    const category = plurals.select(params.count);
    message = messages[`${key}.${category}`] ?? messages[`${key}.other`] ?? en[`${key}.other`];
  }
  if (message === undefined) return key;
  return message.replace(/\{(\w+)\}/g, (whole, name) => {
    const value = params[name];
    if (value === undefined) return whole;
    return name === "count" && typeof value === "number" ? value.toLocaleString(current) : String(value);
  });
}

/**
 * The message of a key made at run time (a settings option's label), or `fallback` when no catalogue
 * has it: for text the server sends in English and the catalogues may not know yet.
 * @param {string} key
 * @param {string} fallback
 */
export function tOr(key, fallback) {
  const messages = LANGUAGES[current].messages;
  return messages[key] ?? en[key] ?? fallback;
}

/**
 * The label of an enum's value in the chosen language: `keys` is one of generated/enums.js's `<ENUM>_LABEL`
 * maps (value → catalogue key); a value it does not name is shown as itself.
 * @param {Readonly<Record<string | number, string>>} keys
 * @param {string | number} value
 */
export function labelOf(keys, value) {
  const key = keys[value];
  return key === undefined ? String(value) : t(key);
}

/**
 * A number in the chosen language (`1,234` / `1,234`).
 * @param {number} value
 * @param {Intl.NumberFormatOptions} [options]
 */
export function number(value, options) {
  return value.toLocaleString(current, options);
}

document.documentElement.lang = current;

/**
 * An amount of US dollars in the chosen language (`$1.50`, `US$1.50`).
 * @param {number} value
 */
export function usd(value) {
  return value.toLocaleString(current, { style: "currency", currency: "USD" });
}
