/**
 * Settings (`/settings`, root): every option of `core/option_registry.py` (`GET /api/option/`), grouped
 * into sections, each with its own Save button. A section saves only the options that changed since the
 * page read them, one `PUT /api/option/` `{key, value}` each; each refusal is shown at its field (the
 * server's message starts with the option's key, the field's name). JSON options are edited as text and
 * checked as JSON in the page before anything is sent, refused in the server's words
 * (`ModelRatio: is not valid JSON`). Secret options (keys ending in Token, Secret or Key) are never
 * listed by the server: their field is empty, says "unchanged", and saves only what is typed in it.
 * Calls at load: `GET /api/option/` (1).
 *
 * `SECTIONS` names each option with its kind as the registry declares it (`bool`, `int`, `float`, `str`,
 * `text`, `json`); `tests/console/test_serving.py` checks the page and the registry list the same keys
 * with the same kinds.
 */

import { h, replace } from "../dom.js";
import { checkbox, clearErrors, field, form, heading, refuse, showError } from "../forms.js";

/** @typedef {"bool" | "int" | "float" | "str" | "text" | "json"} Kind */

/**
 * @typedef {object} OptionField
 * @property {string} key
 * @property {Kind} kind
 * @property {string} label
 * @property {string} [hint]
 * @property {string[]} [choices]  the values a `str` option may take (a select)
 */

/** @typedef {{id: string, title: string, intro: string, options: OptionField[]}} Section */

/**
 * @param {string} key
 * @param {Kind} kind
 * @param {string} label
 * @param {string} [hint]
 * @param {string[]} [choices]
 * @returns {OptionField}
 */
const o = (key, kind, label, hint, choices) => ({ key, kind, label, hint, choices });

/** @type {Section[]} */
export const SECTIONS = [
  { id: "site", title: "Site", intro: "What every visitor sees, and where the site lives.", options: [
    o("SystemName", "str", "Site name", "1–64 characters; shown in the console's header and title."),
    o("Logo", "str", "Logo address"),
    o("Footer", "str", "Footer"),
    o("Notice", "str", "Notice", "Markdown, shown to every signed-in user."),
    o("About", "str", "About page", "Markdown, HTML or an address."),
    o("HomePageContent", "text", "Home page content"),
    o("DocsLink", "str", "Documentation link"),
    o("ServerAddress", "str", "Server address", "The address people reach this site at, e.g. https://example.com (no trailing /)."),
    o("TopUpLink", "str", "Top-up link"),
    o("LogConsumeEnabled", "bool", "Log every model call"),
    o("DataExportEnabled", "bool", "Collect usage data for the dashboard"),
    o("DataExportInterval", "int", "Usage data interval (minutes)", "1–60."),
    o("DataExportDefaultTime", "str", "Usage data default period", undefined, ["hour", "day", "week"]),
    o("SelfUseModeEnabled", "bool", "Self-use mode"),
    o("DemoSiteEnabled", "bool", "Demo site"),
  ] },
  { id: "registration", title: "Registration and sign-in", intro: "Who may create an account and how they sign in.", options: [
    o("RegisterEnabled", "bool", "Registration open"),
    o("PasswordLoginEnabled", "bool", "Sign-in with a password"),
    o("PasswordRegisterEnabled", "bool", "Registration with a password"),
    o("EmailVerificationEnabled", "bool", "Verify the e-mail address at registration"),
    o("EmailDomainRestrictionEnabled", "bool", "Only the allowed e-mail domains"),
    o("EmailAliasRestrictionEnabled", "bool", "Refuse e-mail aliases (name+tag@…)"),
    o("EmailDomainWhitelist", "str", "Allowed e-mail domains", "Comma-separated."),
    o("QuotaForNewUser", "int", "Quota for a new user"),
    o("QuotaForInviter", "int", "Quota for the inviter"),
    o("QuotaForInvitee", "int", "Quota for the invitee"),
  ] },
  { id: "quota", title: "Quota and pricing", intro: "How quota is counted and shown, and what each model costs. JSON fields are checked before saving.", options: [
    o("QuotaPerUnit", "float", "Quota per unit (one dollar)", "Greater than 0."),
    o("general_setting.quota_display_type", "str", "Show quota as", undefined, ["USD", "CNY", "TOKENS", "CUSTOM"]),
    o("DisplayInCurrencyEnabled", "bool", "Show quota in currency"),
    o("DisplayTokenStatEnabled", "bool", "Show token statistics"),
    o("USDExchangeRate", "float", "USD exchange rate (CNY per dollar)"),
    o("custom_currency_symbol", "str", "Custom currency symbol", "Up to 8 characters."),
    o("custom_currency_exchange_rate", "float", "Custom currency per dollar"),
    o("PreConsumedQuota", "int", "Quota reserved before a call"),
    o("QuotaRemindThreshold", "int", "Low-balance reminder threshold"),
    o("RetryTimes", "int", "Retries on another channel", "0–10."),
    o("ModelRatio", "json", "Model ratios", "A JSON object: model → ratio (a number ≥ 0)."),
    o("CompletionRatio", "json", "Completion ratios", "A JSON object: model → ratio."),
    o("ModelPrice", "json", "Model prices (per call)", "A JSON object: model → price in dollars."),
    o("GroupRatio", "json", "Group ratios", "A JSON object: group → ratio; keeps \"default\"."),
    o("UserUsableGroups", "json", "Groups users may choose", "A JSON object: group → description."),
    o("AutoGroups", "json", "Groups of the auto group, in order", "A JSON array of group names."),
    o("ModelCapabilities", "json", "Model capabilities", "A JSON object: model → {capability: true|false}."),
    o("ModelRequestRateLimitGroup", "json", "Rate limits by group", "A JSON object: group → [count, success_count]."),
  ] },
  { id: "channels", title: "Channels", intro: "When a failing channel is switched off, and on again.", options: [
    o("AutomaticDisableChannelEnabled", "bool", "Disable a failing channel"),
    o("AutomaticEnableChannelEnabled", "bool", "Enable a channel again once its test passes"),
    o("ChannelDisableThreshold", "float", "Test time that disables a channel (seconds)"),
    o("AutomaticDisableStatusCodes", "str", "Status codes that disable a channel", "Codes and ranges, e.g. 401,403,500-599."),
    o("AutomaticRetryStatusCodes", "str", "Status codes retried on another channel"),
    o("AutomaticDisableKeywords", "text", "Error texts that disable a channel", "One per line."),
  ] },
  { id: "rate-limits", title: "Rate limits", intro: "Model calls per user in a window of minutes (the limits by group are under Quota and pricing).", options: [
    o("ModelRequestRateLimitEnabled", "bool", "Limit model calls per user"),
    o("ModelRequestRateLimitDurationMinutes", "int", "Window (minutes)"),
    o("ModelRequestRateLimitCount", "int", "Calls per window (0: no limit)"),
    o("ModelRequestRateLimitSuccessCount", "int", "Successful calls per window"),
  ] },
  { id: "email", title: "E-mail", intro: "The SMTP server that sends codes and reset links.", options: [
    o("SMTPServer", "str", "SMTP server"),
    o("SMTPPort", "int", "SMTP port"),
    o("SMTPAccount", "str", "SMTP account"),
    o("SMTPFrom", "str", "Sender address"),
    o("SMTPToken", "str", "SMTP password"),
    o("SMTPSSLEnabled", "bool", "SMTP over SSL"),
  ] },
  { id: "payments", title: "Payments", intro: "Online top-up through Stripe.", options: [
    o("StripeApiSecret", "str", "Stripe API secret"),
    o("StripeWebhookSecret", "str", "Stripe webhook secret"),
    o("StripePriceId", "str", "Stripe price id"),
    o("StripeUnitPrice", "float", "Price of one unit"),
    o("StripeMinTopUp", "int", "Least top-up"),
    o("StripeApiBase", "str", "Stripe API address"),
    o("payment_setting.amount_options", "json", "Amounts offered", "A JSON array of positive numbers."),
  ] },
  { id: "passkeys", title: "Passkeys", intro: "Signing in with a passkey, and the relying party it is made for.", options: [
    o("passkey.enabled", "bool", "Passkeys enabled"),
    o("passkey.rp_id", "str", "Relying party id", "A host name such as example.com; empty: the server address's."),
    o("passkey.rp_display_name", "str", "Relying party name"),
    o("passkey.origins", "str", "Accepted origins", "Comma-separated, e.g. https://example.com."),
    o("passkey.user_verification", "str", "User verification", undefined, ["required", "preferred", "discouraged"]),
    o("passkey.attachment_preference", "str", "Authenticator attachment", undefined, ["", "platform", "cross-platform"]),
    o("passkey.allow_insecure_origin", "bool", "Allow insecure (http) origins"),
  ] },
  { id: "compatibility", title: "Compatibility", intro: "For new-api's clients and console.", options: [
    o("NewApiCompatibleErrors", "bool", "Answer /api refusals with 200, as new-api does"),
    o("HeaderNavModules", "text", "Header navigation modules", "Empty or a JSON object."),
    o("SidebarModulesAdmin", "text", "Admin sidebar modules", "Empty or a JSON object."),
    o("DefaultUseAutoGroup", "bool", "Default to the auto group (kept for new-api; no effect)"),
    o("GroupGroupRatio", "json", "Group-to-group ratios (kept for new-api; no effect)"),
    o("TopupGroupRatio", "json", "Top-up ratios by group (kept for new-api; no effect)"),
    o("CacheRatio", "json", "Cache ratios (kept for new-api; no effect)"),
    o("AudioRatio", "json", "Audio ratios (kept for new-api; no effect)"),
    o("AudioCompletionRatio", "json", "Audio completion ratios (kept for new-api; no effect)"),
  ] },
];

/**
 * Whether an option is a secret: the server never lists it (the registry's rule).
 * @param {string} key
 */
export function isSecret(key) {
  return /(token|secret|key)$/i.test(key);
}

/**
 * The text a JSON option is edited as: indented when it parses, else as stored.
 * @param {string} stored
 */
function jsonText(stored) {
  try {
    return JSON.stringify(JSON.parse(stored), null, 2);
  } catch {
    return stored;
  }
}

/**
 * The control of an option, with the text it starts from (what "changed" is compared with).
 * @param {OptionField} option
 * @param {string | undefined} stored  undefined for a secret
 * @returns {{element: HTMLElement, initial: string}}
 */
function control(option, stored) {
  const { key, kind, label } = option;
  if (kind === "bool") {
    const initial = stored === "true" ? "true" : "false";
    return { element: checkbox(label, key, initial === "true"), initial };
  }
  if (stored === undefined) {
    return { element: field(label, key, { type: "password", autocomplete: "new-password",
      hint: "Write-only: leave empty to keep the saved value unchanged." }), initial: "" };
  }
  if (option.choices) {
    const options = option.choices.map((value) => ({ value, label: value || "(none)" }));
    return { element: field(label, key, { type: "select", options, value: stored, hint: option.hint }), initial: stored };
  }
  if (kind === "json") {
    const initial = jsonText(stored);
    return { element: field(label, key, { type: "textarea", value: initial, hint: option.hint }), initial };
  }
  if (kind === "text") return { element: field(label, key, { type: "textarea", value: stored, hint: option.hint }), initial: stored };
  if (kind === "int" || kind === "float") {
    return { element: field(label, key, { type: "number", value: stored, hint: option.hint,
      step: kind === "int" ? "1" : "any", inputmode: kind === "int" ? "numeric" : "decimal" }), initial: stored };
  }
  return { element: field(label, key, { value: stored, hint: option.hint }), initial: stored };
}

/**
 * What a control holds now ("true"/"false" for a checkbox).
 * @param {HTMLFormElement} element
 * @param {string} key
 */
function current(element, key) {
  const named = element.elements.namedItem(key);
  if (named instanceof HTMLInputElement && named.type === "checkbox") return named.checked ? "true" : "false";
  if (named instanceof HTMLInputElement || named instanceof HTMLTextAreaElement
    || named instanceof HTMLSelectElement) return named.value;
  return "";
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, shell } = ctx;
  /** @type {{key: string, value: string}[]} */
  const listed = await api.get("/api/option/");
  const stored = new Map(listed.map((option) => [option.key, option.value]));

  const sections = SECTIONS.map((section) => {
    /** @type {Map<string, string>} the text each control started from (after a save: what was saved) */
    const saved = new Map();
    const controls = section.options.map((option) => {
      const made = control(option, isSecret(option.key) ? undefined : stored.get(option.key) ?? "");
      saved.set(option.key, made.initial);
      return made.element;
    });
    const headingId = `section-${section.id}`;
    const sectionForm = form(section.title, async (element) => {
      const changed = section.options.filter((option) => isSecret(option.key)
        ? current(element, option.key) !== "" : current(element, option.key) !== saved.get(option.key));
      if (!changed.length) {
        shell.say(`Nothing changed in ${section.title}.`);
        return;
      }
      /** @type {unknown[]} */
      const refusals = [];
      let done = 0;
      for (const option of changed) {
        const text = current(element, option.key);
        try {
          if (option.kind === "json") {
            try {
              JSON.parse(text);
            } catch {
              throw refuse(option.key, "is not valid JSON");
            }
          }
          await api.put("/api/option/", { key: option.key, value: option.kind === "bool" ? text === "true" : text });
          done += 1;
          if (isSecret(option.key)) {
            const input = element.elements.namedItem(option.key);
            if (input instanceof HTMLInputElement) input.value = "";
          } else {
            saved.set(option.key, text);
          }
          if (option.key === "SystemName") shell.setSiteName(text.trim());
        } catch (error) {
          refusals.push(error);
        }
      }
      clearErrors(element);
      for (const error of refusals.reverse()) showError(element, error);  // the first refused field ends focused
      const refused = refusals.length;
      shell.say(`${section.title}: ${done} ${done === 1 ? "option" : "options"} saved`
        + (refused ? `, ${refused} refused.` : "."));
    },
    h("p", {}, section.intro),
    controls,
    h("div", { class: "actions inline" }, h("button", { type: "submit" }, `Save ${section.title}`)));
    return h("section", { class: "panel", "aria-labelledby": headingId },
      h("h2", { id: headingId }, section.title), sectionForm);
  });

  replace(main,
    heading("Settings"),
    h("p", {}, "The site's options. Each section saves only what changed in it; secret fields are never shown "
      + "and keep their value unless something is typed in them."),
    sections);
}
