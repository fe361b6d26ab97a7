/**
 * The colour theme: light, dark, or the system's (the default). The choice is remembered in this
 * browser (`localStorage` `tollway.theme`) and shown as `data-theme="light" | "dark"` on `<html>` —
 * absent for the system's, when console.css follows `prefers-color-scheme`. `theme-first.js`, a classic
 * script in the head of index.html, applies the remembered choice before the first paint (no flash of
 * the other theme); this module is the header's switch.
 */

const STORED = "tollway.theme";  // theme-first.js reads the same key

/** @typedef {"system" | "light" | "dark"} Theme */

/** The choices of the switch, in its order. */
export const THEMES = /** @type {const} */ (["system", "light", "dark"]);

/**
 * The remembered choice ("system" when none, or when storage cannot be read).
 * @returns {Theme}
 */
export function chosenTheme() {
  let stored = "";
  try {
    stored = window.localStorage.getItem(STORED) ?? "";
  } catch {
    stored = "";
  }
  return stored === "light" || stored === "dark" ? stored : "system";
}

/**
 * Show the page in `theme` and remember it.
 * @param {Theme} theme
 */
export function chooseTheme(theme) {
  try {
    if (theme === "system") window.localStorage.removeItem(STORED);
    else window.localStorage.setItem(STORED, theme);
  } catch {
    // private browsing: the choice lasts until the page is reloaded
  }
  applyTheme(theme);
}

/**
 * Set `<html data-theme>` for `theme` (removed for the system's).
 * @param {Theme} theme
 */
export function applyTheme(theme) {
  if (theme === "system") document.documentElement.removeAttribute("data-theme");
  else document.documentElement.dataset.theme = theme;
}
