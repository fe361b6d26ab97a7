/**
 * The create / edit form of an API key, in a dialog: name, quota or unlimited, expiry, model limits, IP
 * allow list and group (`POST /api/token/`, `PUT /api/token/`). Opening it reads the models and groups
 * the user may use (`GET /api/user/models`, `GET /api/user/self/groups`). A created key is shown once,
 * with a Copy button. On edit, the quota and the expiry are sent only when they were changed in the form.
 */

import { h, replace, uid } from "../dom.js";
import { checkbox, checked, field, form, refuse, valueOf } from "../forms.js";
import { fromLocalInput, toLocalInput } from "../site.js";
import { openDialog } from "../widgets/dialog.js";
import { secretBox } from "../widgets/secret-once.js";
import { t } from "../i18n.js";

const DAY = 86400;
/** The description the server gives the auto group when the site gave it none (worded here instead). */
const AUTO_DEFAULT = "the usable AutoGroups";

/**
 * @param {import("../types.js").PageContext} ctx
 * @param {import("../types.js").ApiKey | null} key  null: create a new key
 * @param {() => void} onSaved
 */
export function openKeyForm({ api, site, session }, key, onSaved) {
  const dialog = openDialog(key ? t("keys.editDialog", { name: key.name || `#${key.id}` }) : t("keys.createDialog"));
  // a new key starts with one unit of quota ($1, or QuotaPerUnit points): the form submits as it opens
  const quotaText = site.quotaToInput(key ? key.remain_quota : site.status.quota_per_unit);
  const expiryText = toLocalInput(key && key.expired_time > 0 ? key.expired_time : Math.floor(Date.now() / 1000) + 30 * DAY);
  const quota = field(t("keys.quota", { unit: site.quotaUnit }), "remain_quota", { type: "number", inputmode: "decimal",
    step: "any", min: "0", value: quotaText,
    hint: site.inCurrency ? t("keys.quotaHintMoney", { unit: site.quotaUnit }) : t("keys.quotaHintPoints") });
  const expiry = field(t("keys.expiresAt"), "expired_time", { type: "datetime-local", value: expiryText,
    hint: t("common.browserZone") });
  const legendId = uid("models");
  const modelList = h("div", { class: "checks" }, h("p", { class: "loading" }, t("keys.loadingModels")));
  const models = h("fieldset", { name: "model_limits", id: legendId, tabindex: "-1" },
    h("legend", {}, t("keys.modelsLegend")), modelList,
    h("p", { class: "field-error", id: `${legendId}-error`, hidden: true }));
  const groupField = field(t("col.group"), "group", { type: "select", value: key ? key.group : "",
    options: [{ value: key ? key.group : "", label: key && key.group ? key.group : t("keys.yourGroup") }],
    hint: t("keys.groupHint") });
  /** @param {HTMLElement} element @param {boolean} shown */
  const show = (element, shown) => element.toggleAttribute("hidden", !shown);

  const unlimited = checkbox(t("keys.unlimitedQuota"), "unlimited_quota", key ? key.unlimited_quota : false,
    (on) => show(quota, !on));
  const never = checkbox(t("keys.neverExpires"), "never_expires", key ? key.expired_time === -1 : true,
    (on) => show(expiry, !on));
  const limited = checkbox(t("keys.limitModels"), "model_limits_enabled",
    key ? key.model_limits_enabled : false, (on) => show(models, on));
  show(quota, !(key ? key.unlimited_quota : false));
  show(expiry, !(key ? key.expired_time === -1 : true));
  show(models, key ? key.model_limits_enabled : false);

  const editor = form(key ? t("keys.editForm") : t("keys.createDialog"), async (f) => {
    /** @type {Record<string, unknown>} */
    const body = { name: valueOf(f, "name").trim(), unlimited_quota: checked(f, "unlimited_quota"),
      model_limits_enabled: checked(f, "model_limits_enabled"), allow_ips: valueOf(f, "allow_ips"),
      group: valueOf(f, "group"),
      model_limits: [...f.querySelectorAll("input[name=model]:checked")]
        .map((box) => /** @type {HTMLInputElement} */ (box).value).join(",") };
    if (!body.unlimited_quota && (!key || valueOf(f, "remain_quota") !== quotaText)) {
      const points = site.quotaFromInput(valueOf(f, "remain_quota"));
      if (Number.isNaN(points)) throw refuse("remain_quota", t("common.mustBeNumber"));
      body.remain_quota = points;
    }
    const neverNow = checked(f, "never_expires");
    if (neverNow) {
      if (!key || key.expired_time !== -1) body.expired_time = -1;
    } else if (!key || key.expired_time === -1 || valueOf(f, "expired_time") !== expiryText) {
      const at = fromLocalInput(valueOf(f, "expired_time"));
      if (Number.isNaN(at)) throw refuse("expired_time", t("common.mustBeDate"));
      body.expired_time = at;
    }
    if (key) {
      await api.put("/api/token/", { ...body, id: key.id });
      onSaved();
      dialog.close();
      return;
    }
    /** @type {import("../types.js").ApiKey} */
    const made = await api.post("/api/token/", body);
    onSaved();
    const done = h("button", { type: "button", onclick: () => dialog.close() }, t("common.done"));
    replace(dialog.body, secretBox(t("keys.yourNew"), made.key,
      t("keys.copyNow")), h("div", { class: "actions" }, done));
    done.focus();
  },
  field(t("col.name"), "name", { value: key ? key.name : "", required: true, autocomplete: "off" }),
  unlimited, quota, never, expiry, limited, models,
  field(t("keys.allowIps"), "allow_ips", { type: "textarea", value: key ? key.allow_ips : "",
    hint: t("keys.allowIpsHint") }),
  groupField,
  h("div", { class: "actions" },
    h("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, t("common.cancel")),
    h("button", { type: "submit" }, key ? t("common.save") : t("keys.createKey"))));
  dialog.body.append(editor);
  editor.querySelector("input")?.focus();

  const chosen = new Set((key ? key.model_limits : "").split(",").map((m) => m.trim()).filter(Boolean));
  void (async () => {
    try {
      /** @type {[string[], Record<string, import("../generated/api.js").GroupInfo>]} */
      const [usable, groups] = await Promise.all([api.get("/api/user/models"), api.get("/api/user/self/groups")]);
      const names = [...new Set([...usable, ...chosen])].sort();
      replace(modelList, names.length === 0 ? h("p", {}, t("keys.noModel"))
        : names.map((name) => {
          const id = uid("model");
          const box = h("input", { type: "checkbox", name: "model", id, value: name });
          box.checked = chosen.has(name);
          return h("div", { class: "check" }, box, h("label", { for: id }, name));
        }));
      const select = groupField.querySelector("select");
      if (select) {
        const current = select.value;
        const own = session.user ? session.user.group : "";
        replace(select, h("option", { value: "" }, own ? t("keys.yourGroupIs", { group: own }) : t("keys.yourGroup")),
          Object.entries(groups).filter(([name]) => name !== "").map(([name, info]) =>
            h("option", { value: name }, name === "auto" && info.desc === AUTO_DEFAULT ? t("keys.autoGroup")
              : info.desc && info.desc !== name ? `${name} — ${info.desc}` : name)));
        if (current && !(current in groups)) select.append(h("option", { value: current }, current));
        select.value = current;
      }
    } catch (error) {
      replace(modelList, h("p", { role: "alert" }, error instanceof Error ? error.message : String(error)));
    }
  })();
}
