/**
 * `secretBox(secret, note)`: a secret (an API key) shown in full, with a Copy button. The secret sits in
 * a read-only field so it can also be selected by hand; Copy puts it on the clipboard and says so. A
 * secret of several lines (a multi-key channel's keys, one per line) is shown in a text area, one line
 * each: an `<input>` would drop the line breaks and run the keys together.
 */

import { h, uid } from "../dom.js";
import { t } from "../i18n.js";

/**
 * @param {string} label  what the secret is ("Your new API key")
 * @param {string} secret
 * @param {string} note  a line under it (that it is shown once, how to keep it)
 */
export function secretBox(label, secret, note) {
  const id = uid("secret");
  const lines = secret.split("\n").length;
  const common = { id, readonly: true, class: "secret-value", spellcheck: "false", autocomplete: "off",
    "aria-describedby": `${id}-note` };
  const input = lines > 1
    ? h("textarea", { ...common, rows: String(Math.min(lines, 10)), wrap: "off" })
    : h("input", { ...common, type: "text" });
  input.value = secret;
  const said = h("span", { class: "copied", role: "status" });
  const copy = h("button", { type: "button", class: "secondary", onclick: () => void copyText(input, said) }, t("secret.copy"));
  return h("div", { class: "secret" },
    h("label", { for: id }, label),
    h("div", { class: "secret-row" }, input, copy),
    h("p", { class: "hint", id: `${id}-note` }, note),
    said);
}

/**
 * @param {HTMLInputElement | HTMLTextAreaElement} input
 * @param {HTMLElement} said
 */
async function copyText(input, said) {
  try {
    await navigator.clipboard.writeText(input.value);
    said.textContent = t("secret.copied");
  } catch {
    input.focus();
    input.select();
    said.textContent = t("secret.copyRefused");
  }
}
