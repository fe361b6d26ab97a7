/**
 * Redemption codes (`/redemptions`, admins): the codes, paged and searched on the server
 * (`GET /api/redemption/`, `GET /api/redemption/search`: an id, a whole code or the start of a name);
 * create a batch (`POST /api/redemption/`: name, quota, count, expiry), whose codes are shown once with
 * Copy and a Download of a text file made in the browser (a `blob:` address on `<a download>`, which the
 * Content-Security-Policy does not govern); enable and disable (`PUT /api/redemption/?status_only=1`);
 * delete one (`DELETE /api/redemption/{id}`) or every invalid one (`DELETE /api/redemption/invalid`),
 * each after a confirmation. Each row shows Copy (while the code can be redeemed) and a More menu with the
 * rest (`codeOffers`). A used code names who redeemed it (the reply's `used_username`). Calls at
 * load: `GET /api/redemption/`.
 */

import { h, replace, uid } from "../dom.js";
import { checkbox, checked, field, form, heading, refuse, valueOf } from "../forms.js";
import { dateTime, fromLocalInput, toLocalInput } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { rowActions } from "../widgets/row-menu.js";
import { REDEMPTION_STATUS_LABEL } from "../generated/enums.js";
import { labelOf, t } from "../i18n.js";

/** @typedef {import("../types.js").Redemption} Redemption */

const DAY = 86400;

/**
 * The row actions the server takes on a code (server/redemptions/service.py): a used code is never
 * enabled or disabled again, only deleted; an unused one is disabled when enabled, enabled when disabled.
 * Copying (in the browser) is offered for a code that can still be redeemed.
 * @param {Redemption} code
 */
export function codeOffers(code) {
  return { copy: code.status === 1, disable: code.status === 1, enable: code.status === 2 };
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, site, shell } = ctx;
  /** @type {PagedTable<Redemption>} */
  const table = new PagedTable();
  /** @param {Redemption} code */
  const label = (code) => `${code.name} #${code.id}`;

  /** @param {() => Promise<void>} work */
  const act = async (work) => {
    try {
      await work();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };
  /** @param {Redemption} code */
  const toggle = (code) => act(async () => {
    const status = code.status === 1 ? 2 : 1;
    await api.put("/api/redemption/", { id: code.id, status }, { status_only: 1 });
    shell.say(t(status === 1 ? "redeem.enabled" : "redeem.disabled", { name: label(code) }));
    await table.reload();
  });
  /** @param {Redemption} code */
  const remove = (code) => act(async () => {
    const sure = await confirmAction({ title: t("redeem.deleteTitle"),
      message: t("redeem.deleteMessage", { name: label(code) }), confirm: t("common.delete") });
    if (!sure) return;
    await api.delete(`/api/redemption/${code.id}`);
    shell.say(t("redeem.deleted", { name: label(code) }));
    await table.reload();
  });
  const removeInvalid = () => act(async () => {
    const sure = await confirmAction({ title: t("redeem.deleteInvalidTitle"),
      message: t("redeem.deleteInvalidMessage"), confirm: t("redeem.deleteInvalid") });
    if (!sure) return;
    /** @type {number} */
    const count = await api.delete("/api/redemption/invalid");
    shell.say(t("redeem.invalidDeleted", { count }));
    await table.reload();
  });
  /** @param {Redemption} code */
  const copy = (code) => act(async () => {
    try {
      await navigator.clipboard.writeText(code.key);
      shell.say(t("redeem.codeCopied", { name: label(code) }));
    } catch {
      shell.say(t("redeem.codeCopyRefused", { name: label(code) }));
    }
  });
  /** @param {Redemption} code */
  const actions = (code) => {
    const offers = codeOffers(code);
    return rowActions(label(code), offers.copy ? { label: t("secret.copy"), run: () => void copy(code) } : null, [
      ...(offers.disable ? [{ label: t("common.disable"), run: () => void toggle(code) }] : []),
      ...(offers.enable ? [{ label: t("common.enable"), run: () => void toggle(code) }] : []),
      { label: t("common.delete"), danger: true, run: () => void remove(code) },
    ]);
  };

  replace(main,
    heading(t("page.redemptions")),
    h("p", {}, t("redeem.intro")),
    h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => openCreateForm(ctx, () => void table.reload()) }, t("redeem.createCodes")),
      h("button", { type: "button", class: "danger", onclick: () => void removeInvalid() }, t("redeem.deleteInvalid"))),
    table);
  await table.configure({
    caption: t("redeem.caption"),
    searchLabel: t("redeem.search"),
    empty: t("redeem.empty"),
    fetch: async ({ p, page_size, keyword }) => {
      /** @type {import("../types.js").Paged<Redemption>} */
      const page = await (keyword ? api.get("/api/redemption/search", { p, page_size, keyword })
        : api.get("/api/redemption/", { p, page_size }));
      return page;
    },
    columns: [
      { label: t("col.name"), cell: (code) => label(code) },
      { label: t("redeem.code"), cell: (code) => h("code", { class: "code-text" }, code.key) },
      { label: t("col.status"), cell: (code) => h("span", { class: `badge status-${code.status}` },
        labelOf(REDEMPTION_STATUS_LABEL, code.status)) },
      { label: t("col.quota"), cell: (code) => site.quota(code.quota), numeric: true },
      { label: t("col.created"), cell: (code) => dateTime(code.created_time) },
      { label: t("keys.expires"), cell: (code) => dateTime(code.expired_time) },
      { label: t("redeem.redeemedBy"), cell: (code) => (code.used_user_id ? t("redeem.byUser", { user: code.used_username || `#${code.used_user_id}`, time: dateTime(code.redeemed_time) }) : t("redeem.nobody")) },
      { label: t("col.actions"), cell: actions },
    ],
  });
}

/**
 * The form that makes a batch of codes, then shows them once.
 * @param {import("../types.js").PageContext} ctx
 * @param {() => void} onSaved
 */
function openCreateForm({ api, site }, onSaved) {
  const dialog = openDialog(t("redeem.createDialog"));
  const expiry = field(t("keys.expiresAt"), "expired_time", { type: "datetime-local",
    value: toLocalInput(Math.floor(Date.now() / 1000) + 30 * DAY), hint: t("common.browserZone") });
  expiry.toggleAttribute("hidden", true);
  const never = checkbox(t("keys.neverExpires"), "never_expires", true, (on) => expiry.toggleAttribute("hidden", on));
  const editor = form(t("redeem.createDialog"), async (f) => {
    const quota = site.quotaFromInput(valueOf(f, "quota"));
    if (Number.isNaN(quota)) throw refuse("quota", t("common.mustBeNumber"));
    const count = Number(valueOf(f, "count"));
    if (valueOf(f, "count").trim() === "" || !Number.isInteger(count)) throw refuse("count", t("common.mustBeWhole"));
    let expiredTime = 0;
    if (!checked(f, "never_expires")) {
      expiredTime = fromLocalInput(valueOf(f, "expired_time"));
      if (Number.isNaN(expiredTime)) throw refuse("expired_time", t("common.mustBeDate"));
    }
    const name = valueOf(f, "name").trim();
    /** @type {string[]} */
    const keys = await api.post("/api/redemption/", { name, quota, count, expired_time: expiredTime });
    onSaved();
    showCodes(dialog, name, keys);
  },
  field(t("col.name"), "name", { required: true, autocomplete: "off", hint: t("redeem.nameHint") }),
  field(t("redeem.quotaEach", { unit: site.quotaUnit }), "quota", { type: "number", inputmode: "decimal", step: "any", min: "0",
    required: true }),
  field(t("redeem.howMany"), "count", { type: "number", inputmode: "numeric", step: "1", min: "1", value: "1",
    required: true, hint: t("redeem.howManyHint") }),
  never, expiry,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    h("button", { type: "submit" }, t("redeem.createCodes"))));
  dialog.body.append(editor);
  editor.querySelector("input")?.focus();
}

/**
 * The new codes, shown once: in a read-only text box, with Copy and a Download of a text file.
 * @param {import("../widgets/dialog.js").Dialog} dialog
 * @param {string} name
 * @param {string[]} keys
 */
function showCodes(dialog, name, keys) {
  const text = `${keys.join("\n")}\n`;
  const id = uid("codes");
  const box = h("textarea", { id, readonly: true, class: "secret-value", rows: Math.min(keys.length, 8),
    spellcheck: "false", "aria-describedby": `${id}-note` });
  box.value = text.trimEnd();
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
  dialog.element.addEventListener("close", () => URL.revokeObjectURL(url));
  const said = h("span", { class: "copied", role: "status" });
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(box.value);
      said.textContent = t("secret.copied");
    } catch {
      box.focus();
      box.select();
      said.textContent = t("redeem.copyRefused");
    }
  };
  const done = h("button", { type: "button", onclick: () => dialog.close() }, t("common.done"));
  const file = `redemption-codes-${name.replace(/[^A-Za-z0-9_-]+/g, "-") || "batch"}.txt`;
  replace(dialog.body, h("div", { class: "secret" },
    h("label", { for: id }, t("redeem.newCodes", { count: keys.length })),
    box,
    h("p", { class: "hint", id: `${id}-note` },
      t("redeem.copyNow")),
    h("div", { class: "actions inline" },
      h("button", { type: "button", class: "secondary", onclick: () => void copy() }, t("secret.copy")),
      h("a", { class: "button secondary", href: url, download: file }, t("redeem.download"))),
    said), h("div", { class: "actions" }, done));
  done.focus();
}
