/**
 * Forms: labelled fields, and the server's refusals shown where they belong. A refusal whose message
 * names a field (`password: must be 8–64 characters`) appears under that field, which is marked invalid
 * and focused, with the field named by its label instead (`New password: must be 8–64 characters`);
 * any other refusal appears at the top of the form. The words after the field are always the server's
 * (or, for a refusal made in the page, the catalogue's).
 */

import { ApiError } from "./api.js";
import { h, uid } from "./dom.js";
import { t } from "./i18n.js";

/**
 * @typedef {object} FieldOptions
 * @property {string} [type]  the input type (default text); "textarea" and "select" make those
 * @property {string} [hint]  a line of help under the field
 * @property {string} [value]
 * @property {boolean} [required]
 * @property {string} [autocomplete]
 * @property {string} [inputmode]
 * @property {string} [min]
 * @property {string} [max]
 * @property {string} [step]
 * @property {boolean} [readonly]
 * @property {{value: string, label: string}[]} [options]  for a select
 */

/**
 * A labelled control with room for its hint and its error.
 * @param {string} label  the visible label
 * @param {string} name  the control's name: the API's field name, so refusals find it
 * @param {FieldOptions} [options]
 */
export function field(label, name, options = {}) {
  const id = uid(`f-${name}`);
  const hintId = `${id}-hint`;
  const errorId = `${id}-error`;
  /** @type {HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement} */
  let control;
  const common = {
    id, name, required: options.required ?? false, autocomplete: options.autocomplete ?? false,
    "aria-describedby": options.hint ? hintId : false, readonly: options.readonly ?? false,
  };
  if (options.type === "textarea") {
    control = h("textarea", { ...common, rows: 3 });
    control.value = options.value ?? "";
  } else if (options.type === "select") {
    control = h("select", common,
      (options.options ?? []).map((o) => h("option", { value: o.value }, o.label)));
    control.value = options.value ?? "";
  } else {
    control = h("input", {
      ...common, type: options.type ?? "text", inputmode: options.inputmode ?? false,
      min: options.min ?? false, max: options.max ?? false, step: options.step ?? false,
    });
    control.value = options.value ?? "";
  }
  return h("div", { class: "field" },
    h("label", { for: id }, label),
    control,
    options.hint ? h("p", { class: "hint", id: hintId }, options.hint) : null,
    h("p", { class: "field-error", id: errorId, hidden: true }));
}

/**
 * A checkbox with its label after it (and a line of help under both, when given).
 * @param {string} label
 * @param {string} name
 * @param {boolean} checked
 * @param {(checked: boolean) => void} [onchange]
 * @param {string} [hint]
 */
export function checkbox(label, name, checked, onchange, hint) {
  const id = uid(`f-${name}`);
  const hintId = `${id}-hint`;
  const box = h("input", { type: "checkbox", id, name, "aria-describedby": hint ? hintId : false });
  box.checked = checked;
  if (onchange) box.addEventListener("change", () => onchange(box.checked));
  return h("div", { class: "field check" }, box, h("label", { for: id }, label),
    hint ? h("p", { class: "hint", id: hintId }, hint) : null,
    h("p", { class: "field-error", id: `${id}-error`, hidden: true }));
}

/**
 * A form with a place for refusals that name no field.
 * @param {string} label  the form's accessible name
 * @param {(form: HTMLFormElement) => Promise<void>} submit  runs on submit; an ApiError it throws is shown
 * @param {...import("./dom.js").Child} children
 */
export function form(label, submit, ...children) {
  const alert = h("p", { class: "form-error", role: "alert", hidden: true });
  const element = h("form", { "aria-label": label, novalidate: true }, alert, ...children);
  element.addEventListener("submit", (event) => {
    event.preventDefault();
    void run(element, () => submit(element));
  });
  return element;
}

/**
 * Run `work` with the form's buttons disabled (but those marked `data-while-busy`, such as a Stop button
 * that must work while the form is busy), showing what it throws.
 * @param {HTMLFormElement} element
 * @param {() => Promise<void>} work
 */
export async function run(element, work) {
  clearErrors(element);
  const buttons = [...element.querySelectorAll("button")].filter((b) => !b.hasAttribute("data-while-busy"));
  for (const b of buttons) b.disabled = true;
  element.setAttribute("aria-busy", "true");
  try {
    await work();
  } catch (error) {
    showError(element, error);
  } finally {
    element.removeAttribute("aria-busy");
    for (const b of buttons) b.disabled = false;
  }
}

/** @param {HTMLFormElement} element */
export function clearErrors(element) {
  for (const p of element.querySelectorAll(".field-error, .form-error")) {
    p.textContent = "";
    p.setAttribute("hidden", "");
  }
  for (const control of element.querySelectorAll("[aria-invalid]")) {
    control.removeAttribute("aria-invalid");
    const errorId = `${control.id}-error`;
    const described = (control.getAttribute("aria-describedby") ?? "").split(" ").filter((x) => x && x !== errorId);
    if (described.length) control.setAttribute("aria-describedby", described.join(" "));
    else control.removeAttribute("aria-describedby");
  }
}

/**
 * Show a refusal at the field it names, else at the top of the form.
 * @param {HTMLFormElement} element
 * @param {unknown} error
 */
export function showError(element, error) {
  const message = error instanceof Error ? error.message : String(error);
  const name = error instanceof ApiError ? error.field : "";
  const control = name ? element.querySelector(`[name="${CSS.escape(name)}"]`) : null;
  const errorLine = control ? element.querySelector(`#${CSS.escape(control.id)}-error`) : null;
  if (control instanceof HTMLElement && errorLine) {
    // named by the field's label, not by the API's field name (`remain_quota: …` → `Quota ($): …`)
    const label = "labels" in control && control.labels instanceof NodeList ? control.labels[0]?.textContent ?? "" : "";
    errorLine.textContent = label && error instanceof ApiError && error.field
      ? t("form.fieldError", { label, detail: error.detail }) : message;
    errorLine.removeAttribute("hidden");
    control.setAttribute("aria-invalid", "true");
    const described = (control.getAttribute("aria-describedby") ?? "").split(" ").filter(Boolean);
    control.setAttribute("aria-describedby", [...described, errorLine.id].join(" "));
    control.focus();
    return;
  }
  const alert = element.querySelector(".form-error");
  if (alert) {
    alert.textContent = message;
    alert.removeAttribute("hidden");
  }
}

/**
 * The text of a named control of a form ("" when there is none).
 * @param {HTMLFormElement} element
 * @param {string} name
 */
export function valueOf(element, name) {
  const control = element.elements.namedItem(name);
  if (control instanceof HTMLInputElement || control instanceof HTMLTextAreaElement
    || control instanceof HTMLSelectElement) return control.value;
  return "";
}

/**
 * Whether a named checkbox of a form is ticked.
 * @param {HTMLFormElement} element
 * @param {string} name
 */
export function checked(element, name) {
  const control = element.elements.namedItem(name);
  return control instanceof HTMLInputElement && control.checked;
}

/**
 * A refusal made in the page before asking the server, worded as the server words its own.
 * @param {string} fieldName
 * @param {string} problem
 */
export function refuse(fieldName, problem) {
  return new ApiError(`${fieldName}: ${problem}`, 400);
}

/**
 * The page's heading; focused when the page is shown, so screen readers start there.
 * @param {string} text
 */
export function heading(text) {
  return h("h1", { tabindex: "-1" }, text);
}

/**
 * A message whose `{name}` placeholders are drawn as code (`Authorization: Bearer …` inside a sentence
 * of the chosen language).
 * @param {string} message  from `t()`, those placeholders left unfilled
 * @param {Record<string, string>} codes  placeholder → the code shown there
 * @returns {import("./dom.js").Leaf[]}
 */
export function withCodes(message, codes) {
  return message.split(/(\{\w+\})/).map((part) => {
    const name = part.startsWith("{") ? part.slice(1, -1) : "";
    return name in codes ? h("code", {}, codes[name]) : part;
  }).filter((part) => part !== "");
}

/**
 * The accessible name of a row's action button: the action and the row it acts on ("Edit alice").
 * @param {string} action
 * @param {string} name
 */
export function rowLabel(action, name) {
  return t("common.rowAction", { action, name });
}
