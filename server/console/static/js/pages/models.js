/**
 * Models and prices (`/models`, every signed-in user). An admin sees every model a channel offers
 * (`GET /api/pricing/models`): its channels, groups and the price the gateway bills — dollars per million
 * input, output, cache-read and cache-write tokens, or per call — with a warning on each model that has no
 * price (every call to it is refused) and a filter showing only those; root edits one model's price in
 * place (`PUT /api/pricing/models`), the row redrawn from the reply where it stands. A user sees the
 * models they may call (`GET /api/pricing`) at the price of the group they choose (its `group_ratio`).
 * Calls at load: one (the list).
 */

import { h, replace, uid } from "../dom.js";
import { checkbox, field, form, heading, refuse, rowLabel, valueOf, withCodes } from "../forms.js";
import { LEAST_ROLE } from "../pages.js";
import { chipList } from "../widgets/chips.js";
import { openDialog } from "../widgets/dialog.js";
import { locale, number, t } from "../i18n.js";

/**
 * A model's price as the gateway bills it (docs/api/gateway.md#the-price-list); `channels` only in the
 * admins' list (`ModelPriceRow`).
 * @typedef {import("../generated/api.js").PriceRow & Partial<Pick<import("../generated/api.js").ModelPriceRow, "channels">>} PriceRow
 */


const SOURCES = /** @type {Record<string, () => string>} */ ({
  model_price: () => t("prices.source.modelPrice"), model_ratio: () => t("prices.source.modelRatio"),
  free: () => t("prices.source.free"), builtin: () => t("prices.source.builtin"),
  self_use: () => t("prices.source.selfUse"), none: () => t("prices.source.none"),
});

/** The fields of a price edit, in the order of the form, with their labels. */
const FIELDS = /** @type {[keyof PriceRow & string, () => string][]} */ ([
  ["model_ratio", () => t("prices.modelRatio")], ["completion_ratio", () => t("prices.completionRatio")],
  ["cache_ratio", () => t("prices.cacheRatio")], ["create_cache_ratio", () => t("prices.cacheWriteRatio")],
  ["model_price", () => t("prices.perCallPrice")],
]);

/**
 * Dollars with as many decimals as a small price needs (`$0.0015`), at least two.
 * @param {number} value
 */
export function dollars(value) {
  return value.toLocaleString(locale(), { style: "currency", currency: "USD", currencyDisplay: "narrowSymbol", minimumFractionDigits: 2,
    maximumFractionDigits: 6 });
}

/**
 * A price cell: the dollars times the group's ratio, or a dash.
 * @param {number | null} value
 * @param {number} ratio
 */
function price(value, ratio) {
  return value === null || value === undefined ? "—" : dollars(value * ratio);
}

/**
 * The model's name, with the unpriced warning when it has no price.
 * @param {PriceRow} row
 */
function modelCell(row) {
  return [h("span", { class: "mono" }, row.model_name), row.priced ? null
    : h("span", { class: "badge unpriced" }, t("prices.unpricedBadge"))];
}

/**
 * A model's channels as a compact list (widgets/chips.js): the first three by name (a disabled one
 * marked), then a "+N" button showing the rest.
 * @param {PriceRow} row
 */
export function channelsCell(row) {
  const named = (row.channels ?? []).map((c) => (c.enabled ? c.name : t("prices.channelOff", { name: c.name })));
  return chipList(named, { label: t("prices.channelsOf", { model: row.model_name }),
    showAll: (count) => t("prices.showAllChannels", { count, model: row.model_name }),
    showFewer: t("prices.showFewerChannels", { model: row.model_name }) });
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  if (ctx.session.role >= LEAST_ROLE.admin) await renderAdmin(ctx);
  else await renderUser(ctx);
}

/**
 * The price columns, each of a row's dollars times `ratio`.
 * @param {() => number} ratio
 * @returns {[string, (row: PriceRow) => import("../dom.js").Child][]}
 */
function priceColumns(ratio) {
  return [
    [t("prices.input"), (row) => price(row.input_per_million, ratio())],
    [t("prices.output"), (row) => price(row.output_per_million, ratio())],
    [t("prices.cacheRead"), (row) => price(row.cache_read_per_million, ratio())],
    [t("prices.cacheWrite"), (row) => price(row.cache_write_per_million, ratio())],
    [t("prices.perCall"), (row) => price(row.per_call, ratio())],
  ];
}

/**
 * A table of rows whose body the page redraws (filtered) and whose rows it replaces one by one.
 * @param {string} caption
 * @param {[string, (row: PriceRow) => import("../dom.js").Child][]} columns
 */
function priceTable(caption, columns) {
  const captionId = uid("table-caption");
  const body = h("tbody");
  const wrap = h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-labelledby": captionId },
    h("table", { class: "stacking prices" }, h("caption", { id: captionId }, caption),
      h("thead", {}, h("tr", {}, columns.map(([label]) => h("th", { scope: "col" }, label)))), body));
  /** @param {PriceRow} row */
  const rowOf = (row) => h("tr", { "data-model": row.model_name, class: row.priced ? "" : "unpriced-row" },
    columns.map(([label, cell], i) => h(i === 0 ? "th" : "td", i === 0 ? { scope: "row", "data-label": label }
      : { "data-label": label }, cell(row))));
  /** @param {PriceRow[]} rows @param {string} empty */
  const show = (rows, empty) => replace(body, rows.length ? rows.map(rowOf)
    : h("tr", { class: "state" }, h("td", { colspan: columns.length }, empty)));
  return { wrap, body, rowOf, show };
}

/** @param {import("../types.js").PageContext} ctx */
async function renderAdmin(ctx) {
  const { main, api, session, shell } = ctx;
  const root = session.role >= LEAST_ROLE.root;
  /** @type {PriceRow[]} */
  let rows = await api.get("/api/pricing/models");
  let onlyUnpriced = false;
  let query = "";
  const warning = h("p", { class: "warning", role: "status" });

  /** @param {PriceRow} row */
  const edit = (row) => {
    const title = t("prices.editTitle", { model: row.model_name });
    const dialog = openDialog(title);
    const ratioMode = row.source !== "model_price";
    /** @type {Record<string, string>} */
    const initial = {
      model_ratio: ratioMode && row.priced ? String(row.model_ratio) : "",
      completion_ratio: ratioMode && row.priced ? String(row.completion_ratio) : "",
      cache_ratio: ratioMode && row.priced ? String(row.cache_ratio) : "",
      create_cache_ratio: ratioMode && row.priced ? String(row.create_cache_ratio) : "",
      model_price: ratioMode ? "" : String(row.model_price),
    };
    const editForm = form(title, async (element) => {
      /** @type {Record<string, string | number | null>} */
      const body = { model: row.model_name };
      for (const [name] of FIELDS) {
        const text = valueOf(element, name).trim();
        if (text === initial[name]) continue;
        const value = Number(text);
        if (text && (!Number.isFinite(value) || value < 0)) throw refuse(name, t("prices.mustBePrice"));
        body[name] = text ? value : null;
      }
      if (Object.keys(body).length === 1) {
        dialog.close();
        return;
      }
      /** @type {PriceRow} */
      const saved = await api.put("/api/pricing/models", body);
      rows = rows.map((r) => (r.model_name === saved.model_name ? saved : r));
      dialog.close();
      const old = table.body.querySelector(`tr[data-model="${CSS.escape(saved.model_name)}"]`);
      const fresh = table.rowOf(saved);
      const note = h("span", { class: "row-note" }, t("prices.savedShort"));
      fresh.lastElementChild?.append(note);
      if (old) old.replaceWith(fresh);
      showWarning();
      shell.say(t("prices.saved", { model: saved.model_name }));
      fresh.querySelector("button")?.focus({ preventScroll: true });
    },
    h("p", { class: "hint" }, t("prices.editIntro")),
    FIELDS.map(([name, label]) => field(label(), name, { value: initial[name], inputmode: "decimal",
      hint: name === "model_price" ? t("prices.perCallHint") : t("prices.emptyRemoves") })),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
      h("button", { type: "submit" }, t("common.save"))));
    dialog.body.append(editForm);
    editForm.querySelector("input")?.focus();
  };

  /** @type {[string, (row: PriceRow) => import("../dom.js").Child][]} */
  const columns = [
    [t("col.model"), modelCell],
    [t("col.channels"), channelsCell],
    [t("col.groups"), (row) => row.enable_groups.join(t("common.listSeparator")) || "—"],
    ...priceColumns(() => 1),
    [t("prices.source"), (row) => SOURCES[row.source]?.() ?? row.source],
    ...(root ? [/** @type {[string, (row: PriceRow) => import("../dom.js").Child]} */ ([t("col.actions"),
      (row) => h("button", { type: "button", class: "secondary", "aria-label": rowLabel(t("prices.edit"), row.model_name),
        onclick: () => edit(row) }, t("prices.edit"))])] : []),
  ];
  const table = priceTable(t("prices.captionAdmin"), columns);

  const showWarning = () => {
    const unpriced = rows.filter((r) => !r.priced).length;
    warning.textContent = unpriced ? t("prices.unpricedCount", { count: unpriced }) : t("prices.allPriced");
    warning.classList.toggle("ok", unpriced === 0);
  };
  const redraw = () => {
    const shown = rows.filter((r) => (!onlyUnpriced || !r.priced) && r.model_name.toLowerCase().includes(query));
    table.show(shown, rows.length ? t("prices.noneMatch") : t("prices.emptyAdmin"));
  };
  const finder = uid("find-model");
  const filters = h("div", { class: "filters" },
    h("div", { class: "field" }, h("label", { for: finder }, t("prices.find")),
      h("input", { id: finder, type: "search", autocomplete: "off",
        oninput: (/** @type {Event} */ event) => {
          query = /** @type {HTMLInputElement} */ (event.target).value.trim().toLowerCase();
          redraw();
        } })),
    checkbox(t("prices.onlyUnpriced"), "only_unpriced", false, (on) => {
      onlyUnpriced = on;
      redraw();
    }));

  replace(main,
    heading(t("page.models")),
    h("p", {}, root ? withCodes(t("prices.introRoot"), { ratio: "ModelRatio", completion: "CompletionRatio",
      cache: "CacheRatio", write: "CreateCacheRatio", price: "ModelPrice" }) : t("prices.introAdmin")),
    warning,
    filters,
    table.wrap);
  showWarning();
  redraw();
}

/** @param {import("../types.js").PageContext} ctx */
async function renderUser(ctx) {
  const { main, api, session } = ctx;
  const reply = await api.envelope("/api/pricing");
  /** @type {PriceRow[]} */
  const rows = reply.data ?? [];
  /** @type {Record<string, number>} */
  const groupRatio = reply.group_ratio ?? {};
  /** @type {Record<string, string>} */
  const usable = reply.usable_group ?? {};
  const groups = Object.keys(usable);
  const own = session.user?.group ?? "";
  let group = groups.includes(own) ? own : groups[0] ?? "";
  const ratio = () => groupRatio[group] ?? 1;

  /** @type {[string, (row: PriceRow) => import("../dom.js").Child][]} */
  const columns = [
    [t("col.model"), modelCell],
    ...priceColumns(ratio),
  ];
  const table = priceTable(t("prices.captionUser"), columns);
  const ratioLine = h("p", { class: "hint", "aria-live": "polite" });
  const redraw = () => {
    const shown = rows.filter((r) => group === "auto" || !group || r.enable_groups.includes(group));
    table.show(shown, t("prices.emptyUser"));
    ratioLine.textContent = t("prices.groupRatio", { ratio: number(ratio()) });
  };
  const picker = field(t("col.group"), "group", { type: "select", value: group,
    options: groups.map((g) => ({ value: g, label: usable[g] && usable[g] !== g ? `${g} (${usable[g]})` : g })) });
  picker.querySelector("select")?.addEventListener("change", (event) => {
    group = /** @type {HTMLSelectElement} */ (event.target).value;
    redraw();
  });

  replace(main,
    heading(t("page.models")),
    h("p", {}, t("prices.introUser")),
    groups.length > 1 ? h("div", { class: "filters" }, picker) : null,
    ratioLine,
    table.wrap);
  redraw();
}
