/*
 * A classic (blocking) script in the head of index.html: before anything is drawn, show the page in the
 * theme this browser chose (`localStorage` `tollway.theme`: "light" or "dark"; none for the system's),
 * as `<html data-theme>`. The header's switch is js/theme.js, which writes the same key.
 */
{
  try {
    const theme = window.localStorage.getItem("tollway.theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch {
    // storage refused (private browsing): the system's theme
  }
}
