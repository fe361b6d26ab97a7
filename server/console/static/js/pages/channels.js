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
 * ask first. Each row shows Edit and a More menu with the rest, only those the server takes for that row and
 * viewer (`channelOffers`); its models as three chips and "+N"; its balance in US dollars (as stored).
 * Calls at load: `GET /api/channel/`.
 */

import { ApiError } from "../api.js";
import { h, replace, uid } from "../dom.js";
import { heading, rowLabel } from "../forms.js";
import { dateTime } from "../site.js";
import { chipList } from "../widgets/chips.js";
import { confirmAction, openDialog } from "../widgets/dialog.js";
import { PagedTable } from "../widgets/paged-table.js";
import { rowActions } from "../widgets/row-menu.js";
import { secretBox } from "../widgets/secret-once.js";
import { needsVerification, verifyOrSetUp } from "../widgets/verify.js";
import { CHANNEL_STATUS_LABEL, CHANNEL_TYPE_NAME, Role } from "../generated/enums.js";
import { openBatchTag, openKeys, openTag } from "./channel-dialogs.js";
import { BALANCE_TYPES, TESTABLE_TYPES, openChannelForm, typeName } from "./channel-form.js";
import { labelOf, number, t, usd } from "../i18n.js";

/** @typedef {import("../types.js").Channel} Channel */

/**
 * The row actions the server takes for a channel, offered to a viewer of `role` (each rule once, as the
 * server states it): a test only for a type Tollway serves (`UpstreamAdmin.testable`); Disable for an
 * enabled channel, Enable for one disabled by hand or automatically; a balance update only for a
 * single-key channel of a type that publishes a balance (`server/upstream/providers/balances.py`
 * `BALANCE_TYPES`); the keys of a multi-key channel; the tag's dialog for a tagged one; the key revealed
 * only by root (`POST /api/channel/{id}/key` is a root route). Edit, Copy and Delete always.
 * @param {Channel} c
 * @param {number} role  the viewer's
 */
export function channelOffers(c, role) {
  return {
    test: TESTABLE_TYPES.has(c.type),
    enable: c.status !== 1,
    balance: BALANCE_TYPES.has(c.type) && !c.channel_info.is_multi_key,
    keys: c.channel_info.is_multi_key,
    tag: Boolean(c.tag),
    reveal: role >= Role.ROOT,
  };
}
/** How often a run's progress is read while it lasts (docs/CONSOLE.md counts these calls). */
const PROGRESS_EVERY_MS = 2000;

/** @typedef {import("../generated/api.js").RunProgress} RunProgress */

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
    /** @type {Promise<import("../generated/api.js").BalanceRun>} */
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
      /** @type {import("../generated/api.js").TestTime} */
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
      /** @type {import("../generated/api.js").KeyReveal} */
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
    const offers = channelOffers(c, session.role);
    /** @param {number} status @param {string} done  what is said after it */
    const setStatus = (status, done) => () => void acted(null, async () => {
      await api.put("/api/channel/", { id: c.id, status });
      return done;
    });
    /** @type {import("../widgets/row-menu.js").RowAction[]} */
    const more = [
      offers.test ? { label: t("channels.test"), run: () => void test(c) } : null,
      offers.enable ? { label: t("common.enable"), run: setStatus(1, t("channels.enabled", { name: c.name })) }
        : { label: t("common.disable"), run: setStatus(2, t("channels.disabled", { name: c.name })) },
      offers.balance ? { label: t("channels.updateBalance"), run: () => void acted(null, async () => {
        /** @type {import("../generated/api.js").BalanceData} */
        const result = await api.get(`/api/channel/update_balance/${c.id}`);
        return t("channels.balanceIs", { name: c.name, balance: usd(result.balance) });
      }) } : null,
      { label: t("secret.copy"), run: () => void acted(null, async () => {
        await api.post(`/api/channel/copy/${c.id}`);
        return t("channels.copied", { name: c.name, copy: `${c.name}_copy` });
      }) },
      offers.keys ? { label: t("channels.keys"), run: () => openKeys(ctx, c, () => void table.reload()) } : null,
      offers.tag ? { label: t("channels.tag"), run: () => openTag(ctx, c.tag, () => void table.reload()) } : null,
      offers.reveal ? { label: t("channels.revealKey"), run: () => void reveal(c) } : null,
      { label: t("common.delete"), danger: true, run: () => void acted({ title: t("channels.deleteTitle"),
        message: t("channels.deleteMessage", { name: c.name }), confirm: t("common.delete") }, async () => {
        await api.delete(`/api/channel/${c.id}`);
        return t("channels.deleted", { name: c.name });
      }) },
    ].filter((a) => a !== null);
    return rowActions(c.name, { label: t("common.edit"), run: () => openChannelForm(ctx, c, () => void table.reload()) },
      more);
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
        /** @type {import("../generated/api.js").FixResult} */
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
        ...Object.keys(CHANNEL_TYPE_NAME).map((value) => ({ value, label: typeName(Number(value)) }))]),
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
      { label: t("channels.select"), cell: selector, quietHeader: true },
      { label: t("col.id"), cell: (c) => String(c.id), numeric: true },
      { label: t("col.type"), cell: (c) => typeName(c.type) },
      { label: t("col.status"), cell: (c) => h("span", { class: `badge status-${c.status}` }, labelOf(CHANNEL_STATUS_LABEL, c.status)) },
      { label: t("channels.groups"), cell: (c) => c.group.split(",").join(", ") },
      { label: t("channels.models"), cell: (c) => chipList(c.models.split(","), { label: t("channels.modelsOf", { name: c.name }),
        showAll: (count) => t("channels.showAllModels", { count, name: c.name }), showFewer: t("channels.showFewerModels", { name: c.name }) }) },
      { label: t("channels.tag"), cell: (c) => c.tag || "—" },
      { label: t("channels.priority"), cell: (c) => number(c.priority), numeric: true },
      { label: t("channels.lastTest"), cell: (c) => (c.test_time ? t("channels.lastTestAt", { time: dateTime(c.test_time), ms: number(c.response_time) }) : t("common.never")) },
      { label: t("dash.balance"), cell: (c) => (c.balance_updated_time ? usd(c.balance) : "—"), numeric: true },
      { label: t("col.actions"), cell: actions },
    ],
  });
}
