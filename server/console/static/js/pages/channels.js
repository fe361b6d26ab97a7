/**
 * Channels (`/channels`, admins): the channels, by priority, paged on the server (`GET /api/channel/`)
 * and searched or filtered by status, type, group, model and tag (`GET /api/channel/search`); create and edit
 * (`channel-form.js`); test one (`GET /api/channel/test/{id}`: the time or the upstream's error) or all
 * (`GET /api/channel/test`, run in the background); update one balance or all
 * (`/api/channel/update_balance…`). While testing all or updating all, the page reads the run's progress
 * every 2 s (`GET /api/channel/progress`) and shows it — a bar, the counts, the failures with the
 * upstream's message — until the run ends, then reloads the list; nothing is read after that. Enable and disable
 * (`PUT /api/channel/`); copy (`POST /api/channel/copy/{id}`); a tag's channels enabled, disabled or
 * retagged at once (`/api/channel/tag/…`); a multi-key channel's keys (`POST /api/channel/multi_key/manage`);
 * the selected channels deleted or tagged (`POST /api/channel/batch`, `/batch/tag`); every disabled one
 * deleted (`DELETE /api/channel/disabled`); abilities rebuilt (`POST /api/channel/fix`). Root reveals a
 * key (`POST /api/channel/{id}/key`) after a secure verification: the 403 `VERIFICATION_REQUIRED` opens a
 * prompt for the authenticator code (`widgets/verify.js`, `POST /api/verify`), then the key is asked again. Destructive actions
 * ask first. Calls at load: `GET /api/channel/`.
 */

import { ApiError } from "../api.js";
import { h, replace, uid } from "../dom.js";
import { field, form, heading, showError, valueOf } from "../forms.js";
import { Role } from "../session.js";
import { dateTime } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { secretBox } from "../widgets/secret-once.js";
import { needsVerification, verifyThen } from "../widgets/verify.js";
import { CHANNEL_TYPES, openChannelForm, typeName } from "./channel-form.js";

/** @typedef {import("../types.js").Channel} Channel */

const CHANNEL_STATUS = /** @type {Record<number, string>} */ ({ 1: "Enabled", 2: "Disabled", 3: "Disabled automatically" });
const KEY_STATUS = /** @type {Record<number, string>} */ ({ 1: "Enabled", 2: "Disabled", 3: "Disabled automatically" });
/** How often a run's progress is read while it lasts (docs/CONSOLE.md counts these calls). */
const PROGRESS_EVERY_MS = 2000;

/** @typedef {{run: string, running: boolean, total: number, done: number, passed: number, failed: number,
 *   failures: {channel_id: number, name: string, message: string}[]}} RunProgress */

/** @param {number} ms */
const pause = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, shell, session } = ctx;
  /** @type {PagedTable<Channel>} */
  const table = new PagedTable();
  /** @type {Set<number>} */
  const selected = new Set();
  const filters = { status: "", type: "", group: "", model: "", tag: "" };

  /** @param {() => Promise<void>} work */
  const act = async (work) => {
    try {
      await work();
    } catch (error) {
      shell.say(error instanceof Error ? error.message : String(error));
    }
  };
  /**
   * @param {{title: string, message: string, confirm: string} | null} ask
   * @param {() => Promise<string>} work  what to say when done
   */
  const acted = (ask, work) => act(async () => {
    if (ask && !(await confirmAction(ask))) return;
    shell.say(await work());
    await table.reload();
  });

  const runArea = h("div", { class: "run-progress" });
  /**
   * Show a run's progress in `runArea`.
   * @param {RunProgress} p
   * @param {string} running  what is being done ("Testing every channel")
   * @param {string} ended  what was done ("Every channel tested")
   */
  const showRun = (p, running, ended) => {
    const label = p.running
      ? `${running}: ${p.done} of ${p.total} done, ${p.failed} failed so far.`
      : `${ended}: ${p.passed} passed, ${p.failed} failed, of ${p.total}.`;
    replace(runArea, h("div", { role: "status" }, h("p", {}, label)),
      h("progress", { max: String(Math.max(p.total, 1)), value: String(p.running ? p.done : Math.max(p.total, 1)),
        "aria-label": running }),
      p.failures.length ? h("ul", { class: "run-failures", "aria-label": "Failures" }, p.failures.map((f) =>
        h("li", {}, `#${f.channel_id} ${f.name}: ${f.message}`))) : null);
  };
  /** @param {string} run @returns {Promise<RunProgress>} */
  const progressOf = (run) => api.get("/api/channel/progress", { run });

  const testAll = () => act(async () => {
    await api.get("/api/channel/test");
    shell.say("Testing every channel started.");
    for (;;) {
      const p = await progressOf("test");
      showRun(p, "Testing every channel", "Every channel tested");
      if (!p.running) break;
      await pause(PROGRESS_EVERY_MS);
      if (!runArea.isConnected) return; // the page was left: stop reading
    }
    shell.say("Testing every channel ended; the list shows each channel's last test.");
    await table.reload();
  });
  const updateAll = () => act(async () => {
    let settled = false;
    /** @type {Promise<{updated: number, failed: number}>} */
    const call = api.get("/api/channel/update_balance");
    call.finally(() => { settled = true; }).catch(() => {});
    shell.say("Updating every balance…");
    for (;;) {
      await Promise.race([pause(PROGRESS_EVERY_MS), call.catch(() => {})]);
      if (settled || !runArea.isConnected) break;
      const p = await progressOf("balance");
      if (p.running) showRun(p, "Updating every balance", "Every balance updated");
    }
    const result = await call;
    showRun(await progressOf("balance"), "Updating every balance", "Every balance updated");
    shell.say(`Balances updated: ${result.updated}, failed: ${result.failed}.`);
    await table.reload();
  });

  /** @param {Channel} c */
  const test = (c) => act(async () => {
    shell.say(`Testing channel “${c.name}”…`);
    try {
      /** @type {{time: number}} */
      const result = await api.get(`/api/channel/test/${c.id}`);
      shell.say(`Channel “${c.name}” answered in ${result.time.toFixed(2)} s.`);
    } catch (error) {
      shell.say(`Channel “${c.name}” failed the test: ${error instanceof Error ? error.message : String(error)}`);
    }
    await table.reload();
  });
  /** @param {Channel} c */
  const reveal = async (c) => {
    try {
      /** @type {{key: string}} */
      const revealed = await api.post(`/api/channel/${c.id}/key`);
      const dialog = openDialog(`Key of channel “${c.name}”`);
      dialog.body.append(secretBox("The channel's key", revealed.key,
        "Anyone holding this key can spend the provider account: keep it like a password."),
      h("div", { class: "actions" }, h("button", { type: "button", onclick: () => dialog.close() }, "Close")));
    } catch (error) {
      if (needsVerification(error)) {
        verifyThen(api, error.message, () => void reveal(c));
      } else {
        shell.say(error instanceof Error ? error.message : String(error));
      }
    }
  };
  /** @param {Channel} c */
  const actions = (c) => {
    /** @param {string} text @param {() => void} onclick @param {string} [kind] */
    const button = (text, onclick, kind = "secondary") => h("button", { type: "button", class: kind,
      "aria-label": `${text} ${c.name}`, onclick }, text);
    return h("div", { class: "row-actions" },
      button("Test", () => void test(c)),
      button("Edit", () => openChannelForm(ctx, c, () => void table.reload())),
      c.status === 1
        ? button("Disable", () => void acted(null, async () => {
          await api.put("/api/channel/", { id: c.id, status: 2 });
          return `Channel “${c.name}” disabled.`;
        }))
        : button("Enable", () => void acted(null, async () => {
          await api.put("/api/channel/", { id: c.id, status: 1 });
          return `Channel “${c.name}” enabled.`;
        })),
      button("Balance", () => void acted(null, async () => {
        /** @type {{balance: number}} */
        const result = await api.get(`/api/channel/update_balance/${c.id}`);
        return `Channel “${c.name}” balance: ${result.balance}.`;
      })),
      button("Copy", () => void acted(null, async () => {
        await api.post(`/api/channel/copy/${c.id}`);
        return `Channel “${c.name}” copied as “${c.name}_copy”.`;
      })),
      c.channel_info.is_multi_key ? button("Keys", () => openKeys(ctx, c, () => void table.reload())) : null,
      c.tag ? button("Tag", () => openTag(ctx, c.tag, () => void table.reload())) : null,
      session.role >= Role.ROOT ? button("Reveal key", () => void reveal(c)) : null,
      button("Delete", () => void acted({ title: "Delete this channel?",
        message: `Channel “${c.name}” stops serving at once. This cannot be undone.`, confirm: "Delete" }, async () => {
        await api.delete(`/api/channel/${c.id}`);
        return `Channel “${c.name}” deleted.`;
      }), "danger"));
  };

  /** @param {Channel} c */
  const selector = (c) => {
    const box = h("input", { type: "checkbox", "aria-label": `Select ${c.name}` });
    box.checked = selected.has(c.id);
    box.addEventListener("change", () => {
      if (box.checked) selected.add(c.id);
      else selected.delete(c.id);
    });
    return box;
  };
  const chosen = () => {
    if (selected.size === 0) throw new ApiError("ids: select one channel or more first", 400);
    return [...selected];
  };

  /** @param {string} label @param {string} name @param {{value: string, label: string}[]} options */
  const filter = (label, name, options) => {
    const id = uid(`filter-${name}`);
    const select = h("select", { id, name }, options.map((o) => h("option", { value: o.value }, o.label)));
    select.addEventListener("change", () => {
      filters[/** @type {"status" | "type"} */ (name)] = select.value;
      void table.search(table.query.keyword);
    });
    return h("div", { class: "field" }, h("label", { for: id }, label), select);
  };
  /** @param {string} label @param {"group" | "model" | "tag"} name */
  const textFilter = (label, name) => {
    const id = uid(`filter-${name}`);
    const input = h("input", { id, name, type: "text", autocomplete: "off" });
    input.addEventListener("change", () => {
      filters[name] = input.value.trim();
      void table.search(table.query.keyword);
    });
    return h("div", { class: "field" }, h("label", { for: id }, label), input);
  };

  replace(main,
    heading("Channels"),
    h("p", {}, "Channels are the upstream providers and keys that serve model calls."),
    h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => openChannelForm(ctx, null, () => void table.reload()) }, "Create channel"),
      h("button", { type: "button", class: "secondary", onclick: () => void testAll() }, "Test all channels"),
      h("button", { type: "button", class: "secondary", onclick: () => void updateAll() }, "Update all balances"),
      h("button", { type: "button", class: "secondary", onclick: () => void table.reload() }, "Reload the list"),
      h("button", { type: "button", class: "secondary", onclick: () => void acted(null, async () => {
        /** @type {{success: number, fails: number}} */
        const fixed = await api.post("/api/channel/fix");
        return `Abilities rebuilt: ${fixed.success} channels, ${fixed.fails} failed.`;
      }) }, "Fix abilities"),
      h("button", { type: "button", class: "danger", onclick: () => void acted({ title: "Delete every disabled channel?",
        message: "Every channel disabled by an admin or automatically is deleted. This cannot be undone.",
        confirm: "Delete disabled channels" }, async () => {
        /** @type {number} */
        const count = await api.delete("/api/channel/disabled");
        return `${count} disabled ${count === 1 ? "channel" : "channels"} deleted.`;
      }) }, "Delete disabled channels")),
    runArea,
    h("div", { class: "filters" },
      filter("Status", "status", [{ value: "", label: "Any status" }, { value: "enabled", label: "Enabled" },
        { value: "disabled", label: "Disabled" }]),
      filter("Type", "type", [{ value: "", label: "Any type" },
        ...Object.entries(CHANNEL_TYPES).map(([value, label]) => ({ value, label }))]),
      textFilter("Group", "group"),
      textFilter("Model", "model"),
      textFilter("Tag", "tag")),
    h("div", { class: "toolbar" },
      h("button", { type: "button", class: "secondary", onclick: () => openBatchTag(ctx, chosen, () => void table.reload(), act) },
        "Tag the selected"),
      h("button", { type: "button", class: "danger", onclick: () => void acted(null, async () => {
        const ids = chosen();
        if (!(await confirmAction({ title: "Delete the selected channels?",
          message: `${ids.length} ${ids.length === 1 ? "channel stops" : "channels stop"} serving at once. This cannot be undone.`,
          confirm: "Delete selected" }))) return "Nothing deleted.";
        /** @type {number} */
        const count = await api.post("/api/channel/batch", { ids });
        selected.clear();
        return `${count} ${count === 1 ? "channel" : "channels"} deleted.`;
      }) }, "Delete the selected")),
    table);
  await table.configure({
    caption: "Channels",
    searchLabel: "Search by id, name, base URL or whole key",
    empty: () => (Object.values(filters).some(Boolean) ? "No channel matches these filters."
      : "No channels yet. Create one to serve model calls."),
    fetch: ({ p, page_size, keyword }) => {
      const { status, type, group, model, tag } = filters;
      return keyword || group || model || tag
        ? api.get("/api/channel/search", { p, page_size, keyword, status, type, group, model, tag })
        : api.get("/api/channel/", { p, page_size, status, type });
    },
    columns: [
      { label: "Name", cell: (c) => c.name },
      { label: "Select", cell: selector },
      { label: "Id", cell: (c) => String(c.id) },
      { label: "Type", cell: (c) => typeName(c.type) },
      { label: "Status", cell: (c) => h("span", { class: `badge status-${c.status}` }, CHANNEL_STATUS[c.status] ?? String(c.status)) },
      { label: "Groups", cell: (c) => c.group },
      { label: "Models", cell: (c) => h("span", { class: "mono" }, c.models.split(",").join(", ")) },
      { label: "Tag", cell: (c) => c.tag || "—" },
      { label: "Priority", cell: (c) => String(c.priority) },
      { label: "Last test", cell: (c) => (c.test_time ? `${dateTime(c.test_time)}, ${c.response_time} ms` : "Never") },
      { label: "Balance", cell: (c) => (c.balance_updated_time ? String(c.balance) : "—") },
      { label: "Actions", cell: actions },
    ],
  });
}

/**
 * Set the tag of the selected channels (`POST /api/channel/batch/tag`; empty clears it).
 * @param {import("../types.js").PageContext} ctx
 * @param {() => number[]} chosen
 * @param {() => void} onSaved
 * @param {(work: () => Promise<void>) => Promise<void>} act
 */
function openBatchTag({ api, shell }, chosen, onSaved, act) {
  void act(async () => {
    const ids = chosen();
    const dialog = openDialog("Tag the selected channels");
    dialog.body.append(form("Tag the selected channels", async (f) => {
      /** @type {number} */
      const count = await api.post("/api/channel/batch/tag", { ids, tag: valueOf(f, "tag").trim() });
      shell.say(`${count} ${count === 1 ? "channel" : "channels"} tagged.`);
      onSaved();
      dialog.close();
    },
    field("Tag", "tag", { autocomplete: "off", hint: `For ${ids.length} selected; empty removes the tag.` }),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
      h("button", { type: "submit" }, "Set tag"))));
    dialog.body.querySelector("input")?.focus();
  });
}

/**
 * Every channel of a tag at once: enable, disable, or rename the tag (`/api/channel/tag/…`).
 * @param {import("../types.js").PageContext} ctx
 * @param {string} tag
 * @param {() => void} onSaved
 */
function openTag({ api, shell }, tag, onSaved) {
  const dialog = openDialog(`Channels tagged “${tag}”`);
  /** @param {string} path @param {string} done */
  const bulk = (path, done) => async () => {
    const editor = /** @type {HTMLFormElement} */ (dialog.body.querySelector("form"));
    try {
      /** @type {number} */
      const count = await api.post(path, { tag });
      shell.say(`${count} ${count === 1 ? "channel" : "channels"} tagged “${tag}” ${done}.`);
      onSaved();
      dialog.close();
    } catch (error) {
      showError(editor, error);
    }
  };
  dialog.body.append(form("Rename the tag", async (f) => {
    /** @type {number} */
    const count = await api.put("/api/channel/tag", { tag, new_tag: valueOf(f, "new_tag").trim() });
    shell.say(`Tag “${tag}” renamed on ${count} ${count === 1 ? "channel" : "channels"}.`);
    onSaved();
    dialog.close();
  },
  h("div", { class: "actions inline" },
    h("button", { type: "button", class: "secondary", onclick: () => void bulk("/api/channel/tag/enabled", "enabled")() },
      "Enable all"),
    h("button", { type: "button", class: "secondary", onclick: () => void bulk("/api/channel/tag/disabled", "disabled")() },
      "Disable all")),
  field("New tag", "new_tag", { value: tag, autocomplete: "off" }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Close"),
    h("button", { type: "submit" }, "Rename tag"))));
}

/**
 * A multi-key channel's keys, each enabled or disabled by hand (`POST /api/channel/multi_key/manage`).
 * @param {import("../types.js").PageContext} ctx
 * @param {Channel} c
 * @param {() => void} onSaved
 */
function openKeys({ api }, c, onSaved) {
  const dialog = openDialog(`Keys of channel “${c.name}”`, onSaved);
  const list = h("div", {}, h("p", { class: "loading" }, "Loading the keys…"));
  dialog.body.append(list, h("div", { class: "actions" },
    h("button", { type: "button", onclick: () => dialog.close() }, "Close")));
  const load = async () => {
    try {
      /** @type {{keys: {index: number, status: number, key_preview: string, reason: string}[], enabled_count: number, total: number}} */
      const page = await api.post("/api/channel/multi_key/manage", { channel_id: c.id, action: "get_key_status", page_size: 100 });
      replace(list, h("p", {}, `${page.enabled_count} of ${page.total} keys enabled.`),
        h("ul", { class: "checks" }, page.keys.map((k) => h("li", {},
          h("span", { class: "mono" }, k.key_preview), ` — ${KEY_STATUS[k.status] ?? k.status}${k.reason ? ` (${k.reason})` : ""} `,
          h("button", { type: "button", class: "secondary", "aria-label": `${k.status === 1 ? "Disable" : "Enable"} key ${k.index + 1}`,
            onclick: () => void change(k.status === 1 ? "disable_key" : "enable_key", k.index) },
          k.status === 1 ? "Disable" : "Enable")))));
    } catch (error) {
      replace(list, h("p", { role: "alert" }, error instanceof Error ? error.message : String(error)));
    }
  };
  /** @param {string} action @param {number} index */
  const change = async (action, index) => {
    try {
      await api.post("/api/channel/multi_key/manage", { channel_id: c.id, action, key_index: index });
    } catch (error) {
      replace(list, h("p", { role: "alert" }, error instanceof Error ? error.message : String(error)));
      return;
    }
    await load();
  };
  void load();
}
