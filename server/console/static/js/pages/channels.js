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
import { field, form, heading, rowLabel, showError, valueOf } from "../forms.js";
import { Role } from "../session.js";
import { dateTime } from "../site.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { secretBox } from "../widgets/secret-once.js";
import { needsVerification, verifyOrSetUp } from "../widgets/verify.js";
import { CHANNEL_TYPES, openChannelForm, typeName } from "./channel-form.js";
import { number, t } from "../i18n.js";

/** @typedef {import("../types.js").Channel} Channel */

/** A channel's (and a multi-key channel's key's) status. */
const CHANNEL_STATUS = /** @type {Record<number, () => string>} */ ({ 1: () => t("status.enabled"),
  2: () => t("status.disabled"), 3: () => t("status.autoDisabled") });
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
      ? t("channels.running", { what: running, done: number(p.done), total: number(p.total), failed: number(p.failed) })
      : t("channels.ended", { what: ended, passed: number(p.passed), failed: number(p.failed), total: number(p.total) });
    replace(runArea, h("div", { role: "status" }, h("p", {}, label)),
      h("progress", { max: String(Math.max(p.total, 1)), value: String(p.running ? p.done : Math.max(p.total, 1)),
        "aria-label": running }),
      p.failures.length ? h("ul", { class: "run-failures", "aria-label": t("channels.failures") }, p.failures.map((f) =>
        h("li", {}, `#${f.channel_id} ${f.name}: ${f.message}`))) : null);
  };
  /** @param {string} run @returns {Promise<RunProgress>} */
  const progressOf = (run) => api.get("/api/channel/progress", { run });

  const testAll = () => act(async () => {
    await api.get("/api/channel/test");
    shell.say(t("channels.testStarted"));
    for (;;) {
      const p = await progressOf("test");
      showRun(p, t("channels.testingAll"), t("channels.allTested"));
      if (!p.running) break;
      await pause(PROGRESS_EVERY_MS);
      if (!runArea.isConnected) return; // the page was left: stop reading
    }
    shell.say(t("channels.testEnded"));
    await table.reload();
  });
  const updateAll = () => act(async () => {
    let settled = false;
    /** @type {Promise<{updated: number, failed: number}>} */
    const call = api.get("/api/channel/update_balance");
    call.finally(() => { settled = true; }).catch(() => {});
    shell.say(t("channels.updatingAllDots"));
    for (;;) {
      await Promise.race([pause(PROGRESS_EVERY_MS), call.catch(() => {})]);
      if (settled || !runArea.isConnected) break;
      const p = await progressOf("balance");
      if (p.running) showRun(p, t("channels.updatingAll"), t("channels.allUpdated"));
    }
    const result = await call;
    showRun(await progressOf("balance"), t("channels.updatingAll"), t("channels.allUpdated"));
    shell.say(t("channels.balancesUpdated", { updated: number(result.updated), failed: number(result.failed) }));
    await table.reload();
  });

  /** @param {Channel} c */
  const test = (c) => act(async () => {
    shell.say(t("channels.testing", { name: c.name }));
    try {
      /** @type {{time: number}} */
      const result = await api.get(`/api/channel/test/${c.id}`);
      shell.say(t("channels.answered", { name: c.name, seconds: number(result.time, { minimumFractionDigits: 2, maximumFractionDigits: 2 }) }));
    } catch (error) {
      shell.say(t("channels.testFailed", { name: c.name, message: error instanceof Error ? error.message : String(error) }));
    }
    await table.reload();
  });
  /** @param {Channel} c */
  const reveal = async (c) => {
    try {
      /** @type {{key: string}} */
      const revealed = await api.post(`/api/channel/${c.id}/key`);
      const dialog = openDialog(t("channels.keyDialog", { name: c.name }));
      dialog.body.append(secretBox(t("channels.theKey"), revealed.key,
        t("channels.keepKey")),
      h("div", { class: "actions" }, h("button", { type: "button", onclick: () => dialog.close() }, t("common.close"))));
    } catch (error) {
      if (needsVerification(error)) {
        await verifyOrSetUp(api, error.message, () => void reveal(c), (path) => void ctx.router.go(path))
          .catch((failed) => shell.say(failed instanceof Error ? failed.message : String(failed)));
      } else {
        shell.say(error instanceof Error ? error.message : String(error));
      }
    }
  };
  /** @param {Channel} c */
  const actions = (c) => {
    /** @param {string} text @param {() => void} onclick @param {string} [kind] */
    const button = (text, onclick, kind = "secondary") => h("button", { type: "button", class: kind,
      "aria-label": rowLabel(text, c.name), onclick }, text);
    return h("div", { class: "row-actions" },
      button(t("channels.test"), () => void test(c)),
      button(t("common.edit"), () => openChannelForm(ctx, c, () => void table.reload())),
      c.status === 1
        ? button(t("common.disable"), () => void acted(null, async () => {
          await api.put("/api/channel/", { id: c.id, status: 2 });
          return t("channels.disabled", { name: c.name });
        }))
        : button(t("common.enable"), () => void acted(null, async () => {
          await api.put("/api/channel/", { id: c.id, status: 1 });
          return t("channels.enabled", { name: c.name });
        })),
      button(t("dash.balance"), () => void acted(null, async () => {
        /** @type {{balance: number}} */
        const result = await api.get(`/api/channel/update_balance/${c.id}`);
        return t("channels.balanceIs", { name: c.name, balance: number(result.balance) });
      })),
      button(t("secret.copy"), () => void acted(null, async () => {
        await api.post(`/api/channel/copy/${c.id}`);
        return t("channels.copied", { name: c.name, copy: `${c.name}_copy` });
      })),
      c.channel_info.is_multi_key ? button(t("channels.keys"), () => openKeys(ctx, c, () => void table.reload())) : null,
      c.tag ? button(t("channels.tag"), () => openTag(ctx, c.tag, () => void table.reload())) : null,
      session.role >= Role.ROOT ? button(t("channels.revealKey"), () => void reveal(c)) : null,
      button(t("common.delete"), () => void acted({ title: t("channels.deleteTitle"),
        message: t("channels.deleteMessage", { name: c.name }), confirm: t("common.delete") }, async () => {
        await api.delete(`/api/channel/${c.id}`);
        return t("channels.deleted", { name: c.name });
      }), "danger"));
  };

  /** @param {Channel} c */
  const selector = (c) => {
    const box = h("input", { type: "checkbox", "aria-label": rowLabel(t("channels.select"), c.name) });
    box.checked = selected.has(c.id);
    box.addEventListener("change", () => {
      if (box.checked) selected.add(c.id);
      else selected.delete(c.id);
    });
    return box;
  };
  const chosen = () => {
    if (selected.size === 0) throw new ApiError(t("channels.selectFirst"), 400);
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
    heading(t("page.channels")),
    h("p", {}, t("channels.intro")),
    h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => openChannelForm(ctx, null, () => void table.reload()) }, t("channels.create")),
      h("button", { type: "button", class: "secondary", onclick: () => void testAll() }, t("channels.testAll")),
      h("button", { type: "button", class: "secondary", onclick: () => void updateAll() }, t("channels.updateAll")),
      h("button", { type: "button", class: "secondary", onclick: () => void table.reload() }, t("channels.reload")),
      h("button", { type: "button", class: "secondary", onclick: () => void acted(null, async () => {
        /** @type {{success: number, fails: number}} */
        const fixed = await api.post("/api/channel/fix");
        return t("channels.fixed", { success: number(fixed.success), fails: number(fixed.fails) });
      }) }, t("channels.fix")),
      h("button", { type: "button", class: "danger", onclick: () => void acted({ title: t("channels.deleteDisabledTitle"),
        message: t("channels.deleteDisabledMessage"),
        confirm: t("channels.deleteDisabled") }, async () => {
        /** @type {number} */
        const count = await api.delete("/api/channel/disabled");
        return t("channels.disabledDeleted", { count });
      }) }, t("channels.deleteDisabled"))),
    runArea,
    h("div", { class: "filters" },
      filter(t("col.status"), "status", [{ value: "", label: t("channels.anyStatus") }, { value: "enabled", label: t("status.enabled") },
        { value: "disabled", label: t("status.disabled") }]),
      filter(t("col.type"), "type", [{ value: "", label: t("channels.anyType") },
        ...Object.keys(CHANNEL_TYPES).map((value) => ({ value, label: typeName(Number(value)) }))]),
      textFilter(t("col.group"), "group"),
      textFilter(t("col.model"), "model"),
      textFilter(t("channels.tag"), "tag")),
    h("div", { class: "toolbar" },
      h("button", { type: "button", class: "secondary", onclick: () => openBatchTag(ctx, chosen, () => void table.reload(), act) },
        t("channels.tagSelected")),
      h("button", { type: "button", class: "danger", onclick: () => void acted(null, async () => {
        const ids = chosen();
        if (!(await confirmAction({ title: t("channels.deleteSelectedTitle"),
          message: t("channels.deleteSelectedMessage", { count: ids.length }),
          confirm: t("channels.deleteSelectedConfirm") }))) return t("channels.nothingDeleted");
        /** @type {number} */
        const count = await api.post("/api/channel/batch", { ids });
        selected.clear();
        return t("channels.deletedCount", { count });
      }) }, t("channels.deleteSelected"))),
    table);
  await table.configure({
    caption: t("channels.caption"),
    searchLabel: t("channels.search"),
    empty: () => (Object.values(filters).some(Boolean) ? t("channels.noMatch")
      : t("channels.empty")),
    fetch: ({ p, page_size, keyword }) => {
      const { status, type, group, model, tag } = filters;
      return keyword || group || model || tag
        ? api.get("/api/channel/search", { p, page_size, keyword, status, type, group, model, tag })
        : api.get("/api/channel/", { p, page_size, status, type });
    },
    columns: [
      { label: t("col.name"), cell: (c) => c.name },
      { label: t("channels.select"), cell: selector },
      { label: t("col.id"), cell: (c) => String(c.id) },
      { label: t("col.type"), cell: (c) => typeName(c.type) },
      { label: t("col.status"), cell: (c) => h("span", { class: `badge status-${c.status}` }, CHANNEL_STATUS[c.status]?.() ?? String(c.status)) },
      { label: t("channels.groups"), cell: (c) => c.group },
      { label: t("channels.models"), cell: (c) => h("span", { class: "mono" }, c.models.split(",").join(", ")) },
      { label: t("channels.tag"), cell: (c) => c.tag || "—" },
      { label: t("channels.priority"), cell: (c) => String(c.priority) },
      { label: t("channels.lastTest"), cell: (c) => (c.test_time ? t("channels.lastTestAt", { time: dateTime(c.test_time), ms: number(c.response_time) }) : t("common.never")) },
      { label: t("dash.balance"), cell: (c) => (c.balance_updated_time ? String(c.balance) : "—") },
      { label: t("col.actions"), cell: actions },
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
    const dialog = openDialog(t("channels.tagSelectedDialog"));
    dialog.body.append(form(t("channels.tagSelectedDialog"), async (f) => {
      /** @type {number} */
      const count = await api.post("/api/channel/batch/tag", { ids, tag: valueOf(f, "tag").trim() });
      shell.say(t("channels.tagged", { count }));
      onSaved();
      dialog.close();
    },
    field(t("channels.tag"), "tag", { autocomplete: "off", hint: t("channels.tagHint", { count: ids.length }) }),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
      h("button", { type: "submit" }, t("channels.setTag")))));
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
  const dialog = openDialog(t("channels.taggedDialog", { tag }));
  /** @param {string} path @param {boolean} enabled */
  const bulk = (path, enabled) => async () => {
    const editor = /** @type {HTMLFormElement} */ (dialog.body.querySelector("form"));
    try {
      /** @type {number} */
      const count = await api.post(path, { tag });
      shell.say(t(enabled ? "channels.tagEnabled" : "channels.tagDisabled", { count, tag }));
      onSaved();
      dialog.close();
    } catch (error) {
      showError(editor, error);
    }
  };
  dialog.body.append(form(t("channels.renameForm"), async (f) => {
    /** @type {number} */
    const count = await api.put("/api/channel/tag", { tag, new_tag: valueOf(f, "new_tag").trim() });
    shell.say(t("channels.renamed", { count, tag }));
    onSaved();
    dialog.close();
  },
  h("div", { class: "actions inline" },
    h("button", { type: "button", class: "secondary", onclick: () => void bulk("/api/channel/tag/enabled", true)() },
      t("channels.enableAll")),
    h("button", { type: "button", class: "secondary", onclick: () => void bulk("/api/channel/tag/disabled", false)() },
      t("channels.disableAll"))),
  field(t("channels.newTag"), "new_tag", { value: tag, autocomplete: "off" }),
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.close")),
    h("button", { type: "submit" }, t("channels.renameTag")))));
}

/**
 * A multi-key channel's keys, each enabled or disabled by hand (`POST /api/channel/multi_key/manage`).
 * @param {import("../types.js").PageContext} ctx
 * @param {Channel} c
 * @param {() => void} onSaved
 */
function openKeys({ api }, c, onSaved) {
  const dialog = openDialog(t("channels.keysDialog", { name: c.name }), onSaved);
  const list = h("div", {}, h("p", { class: "loading" }, t("channels.loadingKeys")));
  dialog.body.append(list, h("div", { class: "actions" },
    h("button", { type: "button", onclick: () => dialog.close() }, t("common.close"))));
  const load = async () => {
    try {
      /** @type {{keys: {index: number, status: number, key_preview: string, reason: string}[], enabled_count: number, total: number}} */
      const page = await api.post("/api/channel/multi_key/manage", { channel_id: c.id, action: "get_key_status", page_size: 100 });
      replace(list, h("p", {}, t("channels.keysEnabled", { enabled: number(page.enabled_count), total: number(page.total) })),
        h("ul", { class: "checks" }, page.keys.map((k) => h("li", {},
          h("span", { class: "mono" }, k.key_preview), ` — ${CHANNEL_STATUS[k.status]?.() ?? k.status}${k.reason ? ` (${k.reason})` : ""} `,
          h("button", { type: "button", class: "secondary", "aria-label": rowLabel(k.status === 1 ? t("common.disable") : t("common.enable"), t("channels.keyN", { n: String(k.index + 1) })),
            onclick: () => void change(k.status === 1 ? "disable_key" : "enable_key", k.index) },
          k.status === 1 ? t("common.disable") : t("common.enable"))))));
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
