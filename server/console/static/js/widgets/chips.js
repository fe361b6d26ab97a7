/**
 * A compact list of names in a table cell (a channel's models, a key's model limits): the first few as
 * chips, then a "+N" button that shows the rest in place — a disclosure (`aria-expanded`,
 * `aria-controls`), so it works by keyboard and a screen reader hears how many are hidden ("Show all 7
 * models of openai-main"). Pressed again it shows the first few only.
 *
 *     chipList(["gpt-4o", "gpt-4o-mini", …], {label: t("channels.modelsOf", {name}), more: (n) => …})
 */

import { h, uid } from "../dom.js";
import { number, t } from "../i18n.js";

/** How many chips a row shows before "+N". */
export const SHOWN = 3;

/**
 * @param {string[]} names
 * @param {object} options
 * @param {string} options.label  the list's accessible name ("Models of openai-main")
 * @param {(count: string) => string} options.showAll  the "+N" button's accessible name, given the whole count
 * @param {string} options.showFewer  its accessible name once expanded
 * @param {string} [options.empty]  shown when there are no names
 */
export function chipList(names, { label, showAll, showFewer, empty = "—" }) {
  const items = names.map((n) => n.trim()).filter(Boolean);
  if (items.length === 0) return empty;
  const id = uid("chips");
  const chips = items.map((name, i) => h("li", { class: "chip", title: name, hidden: i >= SHOWN }, name));
  const list = h("ul", { id, class: "chips", "aria-label": label }, chips);
  if (items.length <= SHOWN) return list;
  const rest = items.length - SHOWN;
  const collapsed = t("table.plusMore", { count: number(rest) });
  const toggle = h("button", { type: "button", class: "chip-more", "aria-expanded": "false", "aria-controls": id,
    "aria-label": showAll(number(items.length)) }, collapsed);
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    chips.forEach((chip, i) => { chip.hidden = !open && i >= SHOWN; });
    toggle.setAttribute("aria-expanded", String(open));
    toggle.setAttribute("aria-label", open ? showFewer : showAll(number(items.length)));
    toggle.textContent = open ? t("table.fewer") : collapsed;
  });
  return h("div", { class: "chip-list" }, list, toggle);
}
