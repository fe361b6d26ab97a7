/**
 * Modal dialogs on the native `<dialog>` (focus kept inside, Escape closes, the page behind inert), and
 * `confirmAction`, which every destructive action awaits before it asks the server.
 */

import { h, uid } from "../dom.js";
import { t } from "../i18n.js";

/**
 * @typedef {object} Dialog
 * @property {HTMLDialogElement} element
 * @property {HTMLElement} body  where the dialog's content goes
 * @property {() => void} close
 */

/**
 * Open a modal dialog titled `title`; it is removed from the page when closed.
 * @param {string} title
 * @param {(() => void)} [onClose]
 * @returns {Dialog}
 */
export function openDialog(title, onClose) {
  const titleId = uid("dialog-title");
  const body = h("div", { class: "dialog-body" });
  const element = h("dialog", { "aria-labelledby": titleId },
    h("h2", { id: titleId }, title), body);
  element.addEventListener("close", () => {
    element.remove();
    if (onClose) onClose();
  });
  document.body.append(element);
  element.showModal();
  return { element, body, close: () => element.close() };
}

/**
 * Ask before a destructive action. Resolves true when the user confirms; Cancel, Escape and closing
 * resolve false. The focus starts on Cancel.
 * @param {{title: string, message: string, confirm: string}} text
 * @returns {Promise<boolean>}
 */
export function confirmAction({ title, message, confirm }) {
  return new Promise((resolve) => {
    let confirmed = false;
    const dialog = openDialog(title, () => resolve(confirmed));
    const cancel = h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel"));
    const yes = h("button", {
      type: "button", class: "danger",
      onclick: () => { confirmed = true; dialog.close(); },
    }, confirm);
    dialog.body.append(h("p", {}, message), h("div", { class: "actions" }, cancel, yes));
    cancel.focus();
  });
}
