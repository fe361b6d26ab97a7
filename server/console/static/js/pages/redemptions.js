/**
 * Redemption codes (`/redemptions`, admins): the codes, paged and searched on the server
 * (`GET /api/redemption/`, `GET /api/redemption/search`: an id, a whole code or the start of a name);
 * create a batch (`POST /api/redemption/`: name, quota, count, expiry), whose codes are shown once with
 * Copy and a Download of a text file made in the browser (a `blob:` address on `<a download>`, which the
 * Content-Security-Policy does not govern); enable and disable (`PUT /api/redemption/?status_only=1`);
 * delete one (`DELETE /api/redemption/{id}`) or every invalid one (`DELETE /api/redemption/invalid`),
 * each after a confirmation. Calls at load: `GET /api/redemption/`.
 */

import { h, replace, uid } from "../dom.js";
import { checkbox, checked, field, form, heading, refuse, valueOf } from "../forms.js";
import { dateTime, fromLocalInput, toLocalInput } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";

/** @typedef {import("../types.js").Redemption} Redemption */

const CODE_STATUS = /** @type {Record<number, string>} */ ({ 1: "Enabled", 2: "Disabled", 3: "Used" });
const DAY = 86400;

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
    shell.say(`Redemption code ${label(code)} ${status === 1 ? "enabled" : "disabled"}.`);
    await table.reload();
  });
  /** @param {Redemption} code */
  const remove = (code) => act(async () => {
    const sure = await confirmAction({ title: "Delete this redemption code?",
      message: `Code ${label(code)} can no longer be redeemed. This cannot be undone.`, confirm: "Delete" });
    if (!sure) return;
    await api.delete(`/api/redemption/${code.id}`);
    shell.say(`Redemption code ${label(code)} deleted.`);
    await table.reload();
  });
  const removeInvalid = () => act(async () => {
    const sure = await confirmAction({ title: "Delete every invalid code?",
      message: "Every used, disabled or expired code is deleted. This cannot be undone.", confirm: "Delete invalid codes" });
    if (!sure) return;
    /** @type {number} */
    const count = await api.delete("/api/redemption/invalid");
    shell.say(`${count} invalid redemption ${count === 1 ? "code" : "codes"} deleted.`);
    await table.reload();
  });
  /** @param {Redemption} code */
  const actions = (code) => h("div", { class: "row-actions" },
    code.status === 3 ? null : h("button", { type: "button", class: "secondary",
      "aria-label": `${code.status === 1 ? "Disable" : "Enable"} ${label(code)}`, onclick: () => void toggle(code) },
    code.status === 1 ? "Disable" : "Enable"),
    h("button", { type: "button", class: "danger", "aria-label": `Delete ${label(code)}`, onclick: () => void remove(code) },
      "Delete"));

  replace(main,
    heading("Redemption codes"),
    h("p", {}, "A redemption code adds its quota to the balance of the user who redeems it, once."),
    h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => openCreateForm(ctx, () => void table.reload()) }, "Create codes"),
      h("button", { type: "button", class: "danger", onclick: () => void removeInvalid() }, "Delete invalid codes")),
    table);
  await table.configure({
    caption: "Redemption codes",
    searchLabel: "Search by id, whole code or name",
    empty: "No redemption codes yet.",
    fetch: ({ p, page_size, keyword }) => (keyword
      ? api.get("/api/redemption/search", { p, page_size, keyword })
      : api.get("/api/redemption/", { p, page_size })),
    columns: [
      { label: "Name", cell: (code) => label(code) },
      { label: "Code", cell: (code) => h("code", {}, code.key) },
      { label: "Status", cell: (code) => h("span", { class: `badge status-${code.status}` },
        CODE_STATUS[code.status] ?? String(code.status)) },
      { label: "Quota", cell: (code) => site.quota(code.quota) },
      { label: "Created", cell: (code) => dateTime(code.created_time) },
      { label: "Expires", cell: (code) => dateTime(code.expired_time) },
      { label: "Redeemed by", cell: (code) => (code.used_user_id ? `User #${code.used_user_id}, ${dateTime(code.redeemed_time)}` : "Nobody") },
      { label: "Actions", cell: actions },
    ],
  });
}

/**
 * The form that makes a batch of codes, then shows them once.
 * @param {import("../types.js").PageContext} ctx
 * @param {() => void} onSaved
 */
function openCreateForm({ api, site }, onSaved) {
  const dialog = openDialog("Create redemption codes");
  const expiry = field("Expires at", "expired_time", { type: "datetime-local",
    value: toLocalInput(Math.floor(Date.now() / 1000) + 30 * DAY), hint: "In your browser's time zone." });
  expiry.toggleAttribute("hidden", true);
  const never = checkbox("Never expires", "never_expires", true, (on) => expiry.toggleAttribute("hidden", on));
  const editor = form("Create redemption codes", async (f) => {
    const quota = site.quotaFromInput(valueOf(f, "quota"));
    if (Number.isNaN(quota)) throw refuse("quota", "must be a number");
    const count = Number(valueOf(f, "count"));
    if (valueOf(f, "count").trim() === "" || !Number.isInteger(count)) throw refuse("count", "must be a whole number");
    let expiredTime = 0;
    if (!checked(f, "never_expires")) {
      expiredTime = fromLocalInput(valueOf(f, "expired_time"));
      if (Number.isNaN(expiredTime)) throw refuse("expired_time", "must be a date and time");
    }
    const name = valueOf(f, "name").trim();
    /** @type {string[]} */
    const keys = await api.post("/api/redemption/", { name, quota, count, expired_time: expiredTime });
    onSaved();
    showCodes(dialog, name, keys);
  },
  field("Name", "name", { required: true, autocomplete: "off", hint: "A label for the batch, 1–20 characters." }),
  field(`Quota of each code (${site.quotaUnit})`, "quota", { type: "number", inputmode: "decimal", step: "any", min: "0",
    required: true }),
  field("How many codes", "count", { type: "number", inputmode: "numeric", step: "1", min: "1", value: "1",
    required: true, hint: "1 to 100." }),
  never, expiry,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
    h("button", { type: "submit" }, "Create codes")));
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
      said.textContent = "Copied to the clipboard.";
    } catch {
      box.focus();
      box.select();
      said.textContent = "The browser refused the clipboard: the codes are selected, press Ctrl+C (⌘C) to copy them.";
    }
  };
  const done = h("button", { type: "button", onclick: () => dialog.close() }, "Done");
  const file = `redemption-codes-${name.replace(/[^A-Za-z0-9_-]+/g, "-") || "batch"}.txt`;
  replace(dialog.body, h("div", { class: "secret" },
    h("label", { for: id }, keys.length === 1 ? "The new code" : `The ${keys.length} new codes`),
    box,
    h("p", { class: "hint", id: `${id}-note` },
      "Copy or download them now: each one adds its quota to whoever redeems it first. "
      + "They stay in the list for admins."),
    h("div", { class: "actions inline" },
      h("button", { type: "button", class: "secondary", onclick: () => void copy() }, "Copy"),
      h("a", { class: "button secondary", href: url, download: file }, "Download")),
    said), h("div", { class: "actions" }, done));
  done.focus();
}
