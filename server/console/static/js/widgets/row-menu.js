/**
 * A table row's actions: one primary button and a "More" menu button holding the rest, so a row stays
 * one line instead of a wall of buttons (docs/CONSOLE.md, "Tables").
 *
 * The menu follows the WAI-ARIA menu-button pattern: the button has `aria-haspopup="menu"` and
 * `aria-expanded`; Enter, Space or ArrowDown opens the menu on its first item, ArrowUp on its last; in the
 * menu ArrowDown/ArrowUp move (wrapping), Home/End go to the ends, a letter goes to the next item starting
 * with it, Enter or Space runs the item; Escape closes and puts the focus back on the button, Tab closes
 * and moves on from the button, and a click outside closes. The menu is a popover (the top layer), placed
 * under the button (above it when there is no room below) and kept inside the viewport, so the table's
 * scroll box never clips it, at any width; it follows the button when the page scrolls or is resized.
 * It is built when opened and removed when closed: a closed menu leaves only the button among the row's
 * controls.
 *
 * Choosing an item closes the menu and puts the focus back on the More button before the item runs, so
 * a dialog the item opens gives the focus back to it, and after the table's reload the focus (and what the
 * status line said) lands on the same row's More button (`widgets/paged-table.js`).
 *
 *     rowActions(name, {label: t("common.edit"), run: () => edit(row)},
 *       [{label: t("common.disable"), run: () => disable(row)}, {label: t("common.delete"), run, danger: true}])
 */

import { h, uid } from "../dom.js";
import { rowLabel } from "../forms.js";
import { t } from "../i18n.js";

/**
 * @typedef {object} RowAction
 * @property {string} label  what the action does ("Disable"); the row's name is added for a button
 * @property {() => void} run
 * @property {boolean} [danger]  destructive (drawn in the danger colour)
 */

/** The one menu open at a time (opening another closes it). @type {(() => void) | null} */
let closeOpen = null;

/**
 * The "More" button and its menu for the row named `name`; null when there is nothing to offer.
 * @param {string} name  the row's name, in the button's accessible name ("More alice")
 * @param {RowAction[]} items
 * @returns {HTMLElement | null}
 */
export function rowMenu(name, items) {
  if (items.length === 0) return null;
  const menuId = uid("row-menu");
  const buttonId = `${menuId}-button`;
  const button = h("button", { type: "button", id: buttonId, class: "secondary more-button",
    "aria-haspopup": "menu", "aria-expanded": "false", "aria-label": rowLabel(t("table.more"), name) },
  t("table.more"), h("span", { class: "more-caret", "aria-hidden": "true" }, "▾"));
  const wrap = h("span", { class: "row-menu" }, button);
  /** @type {HTMLElement | null} */
  let menu = null;
  /** @type {HTMLButtonElement[]} */
  let entries = [];

  /** @param {number} index */
  const focusItem = (index) => {
    const count = entries.length;
    entries[((index % count) + count) % count]?.focus();
  };
  const current = () => entries.indexOf(/** @type {HTMLButtonElement} */ (document.activeElement));

  const place = () => {
    if (!menu) return;
    if (!button.isConnected) {  // the rows were drawn again under the open menu
      close(false);
      return;
    }
    const at = button.getBoundingClientRect();
    const { innerWidth: width, innerHeight: height } = window;
    const box = menu.getBoundingClientRect();
    const gap = 4;
    let top = at.bottom + gap;
    if (top + box.height > height - gap && at.top - gap - box.height >= gap) top = at.top - gap - box.height;
    const left = Math.min(Math.max(gap, at.right - box.width), Math.max(gap, width - gap - box.width));
    menu.style.top = `${Math.max(gap, top)}px`;
    menu.style.left = `${left}px`;
  };

  /** @param {boolean} [refocus]  give the focus back to the button */
  const close = (refocus = false) => {
    if (!menu) return;
    const closing = menu;
    menu = null;
    entries = [];
    if (closeOpen === closeThis) closeOpen = null;
    button.setAttribute("aria-expanded", "false");
    button.removeAttribute("aria-controls");  // the menu is gone
    document.removeEventListener("pointerdown", onOutside, true);
    window.removeEventListener("scroll", place, true);
    window.removeEventListener("resize", place);
    if (refocus) button.focus({ preventScroll: true });
    if (closing.matches(":popover-open")) closing.hidePopover();
    closing.remove();
  };
  const closeThis = () => close(false);
  /** @param {PointerEvent} event */
  const onOutside = (event) => {
    const target = event.target;
    if (target instanceof Node && (menu?.contains(target) || button.contains(target))) return;
    close(false);
  };

  /** @param {RowAction} item */
  const choose = (item) => {
    close(true);
    item.run();
  };

  /** @param {"first" | "last"} where */
  const open = (where) => {
    if (closeOpen) closeOpen();
    entries = items.map((item) => h("button", { type: "button", role: "menuitem", tabindex: "-1",
      class: item.danger ? "menu-item danger-item" : "menu-item", onclick: () => choose(item) }, item.label));
    const opened = h("div", { id: menuId, role: "menu", class: "row-menu-list", popover: "manual",
      "aria-labelledby": buttonId }, entries);
    opened.addEventListener("keydown", onMenuKey);
    opened.addEventListener("focusout", (event) => {
      const next = event.relatedTarget;
      if (next instanceof Node && (opened.contains(next) || next === button)) return;
      if (next !== null) close(false);  // the focus went elsewhere (a click outside, a screen reader's move)
    });
    wrap.append(opened);
    menu = opened;
    opened.showPopover();
    button.setAttribute("aria-expanded", "true");
    button.setAttribute("aria-controls", menuId);
    place();
    closeOpen = closeThis;
    document.addEventListener("pointerdown", onOutside, true);
    window.addEventListener("scroll", place, true);
    window.addEventListener("resize", place);
    focusItem(where === "first" ? 0 : entries.length - 1);
  };

  /** @param {KeyboardEvent} event */
  const onMenuKey = (event) => {
    const here = current();
    switch (event.key) {
      case "ArrowDown": focusItem(here + 1); break;
      case "ArrowUp": focusItem(here - 1); break;
      case "Home": case "PageUp": focusItem(0); break;
      case "End": case "PageDown": focusItem(entries.length - 1); break;
      case "Escape": close(true); break;
      case "Tab":
        close(true);  // the Tab itself then moves on from the button
        return;
      default: {
        if (event.key.length !== 1 || event.ctrlKey || event.metaKey || event.altKey || event.key === " ") return;
        const letter = event.key.toLocaleLowerCase();
        const order = [...entries.slice(here + 1), ...entries.slice(0, here + 1)];
        const found = order.find((e) => (e.textContent ?? "").trim().toLocaleLowerCase().startsWith(letter));
        if (found) found.focus();
        break;
      }
    }
    event.preventDefault();
    event.stopPropagation();
  };

  button.addEventListener("click", () => {
    if (menu) close(true);
    else open("first");
  });
  button.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      open(event.key === "ArrowDown" ? "first" : "last");
    } else if (event.key === "Escape" && menu) {
      event.preventDefault();
      close(true);
    }
  });
  return wrap;
}

/**
 * A row's actions cell: the primary action as a button named with the row ("Edit alice"), then the "More"
 * menu with the rest (left out when empty).
 * @param {string} name  the row's name
 * @param {RowAction | null} primary
 * @param {RowAction[]} rest
 */
export function rowActions(name, primary, rest) {
  return h("div", { class: "row-actions" },
    primary ? h("button", { type: "button", class: primary.danger ? "danger" : "secondary",
      "aria-label": rowLabel(primary.label, name), onclick: () => primary.run() }, primary.label) : null,
    rowMenu(name, rest));
}
