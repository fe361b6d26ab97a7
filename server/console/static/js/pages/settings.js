/**
 * Settings (`/settings`, root): every option, in the sections `GET /api/option/schema` serves, one section
 * shown at a time: a list of the sections beside it (above it on a phone), the chosen one named in the
 * address (`/settings?section=<id>`, so a reload or a link opens it). Each section has its own Save
 * button in a save bar that stays in view at the bottom of the section, with the count of its unsaved
 * changes (also shown beside its entry in the list); moving to another section keeps the edits, shown
 * again on coming back. The page knows no option of its own: the server's schema (declared once, in
 * core/option_registry.py) gives each option's section, label, hint, kind, bounds and whether it is a
 * write-only secret, and the field is built from that — a checkbox for a switch, a list for a few allowed
 * values, a number, a line of text, a text area for several lines and for JSON, a password field for a
 * secret. A section saves only the options that changed since the page read them (`GET /api/option/`),
 * one `PUT /api/option/` `{key, value}` each; each refusal is shown at its field (the server's message
 * starts with the option's key, the field's name). JSON options are edited as indented text and checked as
 * JSON in the page before anything is sent, refused in the server's words (`ModelRatio: is not valid
 * JSON`). A secret is never listed by the server: its field is empty, says "unchanged", and saves only
 * what is typed in it. Calls at load: `GET /api/option/schema` and `GET /api/option/` (2, at once).
 */

import { h, replace } from "../dom.js";
import { checkbox, clearErrors, field, form, heading, refuse, showError } from "../forms.js";
import { number, t, tOr } from "../i18n.js";

/** @typedef {import("../types.js").OptionField} OptionField */
/** @typedef {import("../types.js").OptionSection} OptionSection */
/** @typedef {import("../types.js").OptionValue} OptionValue */

const SITE_NAME = "SystemName";  // the shell shows it: updated as soon as it is saved

/**
 * The bounds the server checks, told under the field ("From 0 to 10.", "1–64 characters.").
 * @param {OptionField} option
 */
function boundsText(option) {
  const { minimum: lo, maximum: hi, min_length: fewest, max_length: most } = option;
  if (lo !== null && hi !== null) return t("settings.fromTo", { lo: String(lo), hi: String(hi) });
  if (lo !== null) return option.exclusive_minimum ? t("settings.greater", { lo: String(lo) }) : t("settings.atLeast", { lo: String(lo) });
  if (hi !== null) return t("settings.atMost", { hi: String(hi) });
  if (most !== null) return fewest ? t("settings.chars", { fewest: String(fewest), most: String(most) }) : t("settings.upTo", { most: String(most) });
  return "";
}

/**
 * The help under a field: the option's hint, then its bounds.
 * @param {OptionField} option
 */
function hintOf(option) {
  const hint = option.hint ? tOr(`opt.${option.key}.hint`, option.hint) : "";
  return [hint, boundsText(option)].filter(Boolean).join(" ") || undefined;
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
 * @param {string} stored  "" for a secret, which is never listed
 * @returns {{element: HTMLElement, initial: string}}
 */
function control(option, stored) {
  const { key, kind } = option;
  const label = tOr(`opt.${key}.label`, option.label);
  if (kind === "bool") {
    const initial = stored === "true" ? "true" : "false";
    return { element: checkbox(label, key, initial === "true", undefined, hintOf(option)), initial };
  }
  if (option.secret) {
    const hint = [t("settings.writeOnly"), hintOf(option)].filter(Boolean).join(" ");
    return { element: field(label, key, { type: "password", autocomplete: "new-password", hint }), initial: "" };
  }
  const hint = hintOf(option);
  if (option.choices) {
    const options = option.choices.map((value) => ({ value, label: value || t("settings.none") }));
    return { element: field(label, key, { type: "select", options, value: stored, hint }), initial: stored };
  }
  if (kind === "json") {
    const initial = jsonText(stored);
    return { element: field(label, key, { type: "textarea", value: initial, hint }), initial };
  }
  if (kind === "text") return { element: field(label, key, { type: "textarea", value: stored, hint }), initial: stored };
  if (kind === "int" || kind === "float") {
    const min = option.minimum === null || option.exclusive_minimum ? undefined : String(option.minimum);
    const max = option.maximum === null ? undefined : String(option.maximum);
    return { element: field(label, key, { type: "number", value: stored, hint, min, max,
      step: kind === "int" ? "1" : "any", inputmode: kind === "int" ? "numeric" : "decimal" }), initial: stored };
  }
  return { element: field(label, key, { value: stored, hint }), initial: stored };
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

/**
 * The options of a section that would be saved now: those changed since read (or saved), and each
 * secret with something typed in it.
 * @param {HTMLFormElement} element
 * @param {OptionSection} section
 * @param {Map<string, string>} saved
 */
function changedOptions(element, section, saved) {
  return section.options.filter((option) => option.secret
    ? current(element, option.key) !== "" : current(element, option.key) !== saved.get(option.key));
}

/**
 * The section the address names (`?section=<id>`), else the first.
 * @param {URL} url
 * @param {OptionSection[]} schema
 */
function chosenSection(url, schema) {
  const wanted = url.searchParams.get("section");
  return schema.find((section) => section.id === wanted)?.id ?? schema[0]?.id ?? "";
}

/** @param {import("../types.js").PageContext} ctx */
export async function render(ctx) {
  const { main, api, shell, url } = ctx;
  /** @type {[OptionSection[], OptionValue[]]} */
  const [schema, listed] = await Promise.all([api.get("/api/option/schema"), api.get("/api/option/")]);
  const stored = new Map(listed.map((option) => [option.key, option.value]));
  let shown = chosenSection(url, schema);

  const panes = schema.map((section) => {
    /** @type {Map<string, string>} the text each control started from (after a save: what was saved) */
    const saved = new Map();
    const controls = section.options.map((option) => {
      const made = control(option, option.secret ? "" : stored.get(option.key) ?? "");
      saved.set(option.key, made.initial);
      return made.element;
    });
    const headingId = `section-${section.id}`;
    const title = tOr(`optsec.${section.id}.title`, section.title);
    const unsaved = h("span", { class: "unsaved" });
    const mark = h("span", { class: "unsaved-mark" });
    /** Tell how many options would be saved, in the save bar and beside the section's entry. */
    const count = () => {
      const changed = changedOptions(sectionForm, section, saved).length;
      unsaved.textContent = changed ? t("settings.unsaved", { count: changed }) : t("settings.allSaved");
      mark.textContent = changed ? t("settings.unsavedShort", { count: changed }) : "";
    };
    const sectionForm = form(title, async (element) => {
      const changed = changedOptions(element, section, saved);
      if (!changed.length) {
        shell.say(t("settings.nothingChanged", { section: title }));
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
              throw refuse(option.key, t("settings.notJson"));
            }
          }
          await api.put("/api/option/", { key: option.key, value: option.kind === "bool" ? text === "true" : text });
          done += 1;
          if (option.secret) {
            const input = element.elements.namedItem(option.key);
            if (input instanceof HTMLInputElement) input.value = "";
          } else {
            saved.set(option.key, text);
          }
          if (option.key === SITE_NAME) shell.setSiteName(text.trim());
        } catch (error) {
          refusals.push(error);
        }
      }
      count();
      clearErrors(element);
      for (const error of refusals.reverse()) showError(element, error);  // the first refused field ends focused
      const refused = refusals.length;
      shell.say(t(refused ? "settings.savedRefused" : "settings.saved",
        { section: title, count: done, refused: number(refused) }));
    },
    h("p", {}, tOr(`optsec.${section.id}.intro`, section.intro)),
    controls,
    h("div", { class: "save-bar" }, unsaved,
      h("button", { type: "submit" }, t("settings.save", { section: title }))));
    sectionForm.addEventListener("input", count);
    sectionForm.addEventListener("change", count);
    count();
    const pane = h("section", { class: "panel settings-section", "aria-labelledby": headingId, hidden: section.id !== shown },
      h("h2", { id: headingId }, title), sectionForm);
    const link = h("a", { href: `/settings?section=${encodeURIComponent(section.id)}`,
      "aria-current": section.id === shown ? "page" : false,
      onclick: (/** @type {MouseEvent} */ event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();  // in place: the edits of every section are kept (the router would redraw)
        show(section.id);
      } }, h("span", {}, title), mark);
    return { id: section.id, pane, link };
  });

  /**
   * Show one section, named in the address (a reload or a link opens it).
   * @param {string} id
   */
  const show = (id) => {
    shown = id;
    for (const { id: each, pane, link } of panes) {
      pane.hidden = each !== id;
      if (each === id) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    const address = new URL(window.location.href);
    address.searchParams.set("section", id);
    window.history.replaceState(null, "", address);
  };

  replace(main,
    heading(t("page.settings")),
    h("p", {}, t("settings.intro")),
    h("div", { class: "settings" },
      h("nav", { class: "section-list", "aria-label": t("settings.sections") },
        h("ul", {}, panes.map(({ link }) => h("li", {}, link)))),
      h("div", { class: "settings-panes" }, panes.map(({ pane }) => pane))));
}
