/**
 * First run (`/setup`): on a server never set up, create root (`POST /api/setup`), then sign in as root
 * (`POST /api/user/login`). Calls at load: `GET /api/setup`.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, valueOf } from "../forms.js";
import { t } from "../i18n.js";

/** @param {import("../types.js").PageContext} ctx */
export async function render({ main, api, session, site, router }) {
  /** @type {import("../types.js").SetupState} */
  const state = await api.get("/api/setup");
  if (state.status) {
    site.status.setup = true;
    await router.go("/", { replace: true });
    return;
  }
  const setup = form(t("setup.createRoot"), async (f) => {
    const username = valueOf(f, "username").trim();
    const password = valueOf(f, "password");
    await api.post("/api/setup", { username, password, confirmPassword: valueOf(f, "confirmPassword") });
    site.status.setup = true;
    await session.signedIn(await api.post("/api/user/login", { username, password }));
    await router.go("/", { replace: true });
  },
  field(t("field.username"), "username", { autocomplete: "username", required: true, value: "root" }),
  field(t("field.password"), "password", { type: "password", autocomplete: "new-password", required: true,
    hint: t("field.passwordHint") }),
  field(t("field.confirmPassword"), "confirmPassword", { type: "password", autocomplete: "new-password", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, t("setup.createRoot"))));
  replace(main, h("section", { class: "narrow" },
    heading(t("page.setup")),
    h("p", {}, t("setup.intro")),
    state.database_type ? h("p", { class: "hint" }, t("setup.database", { database: state.database_type })) : null,
    setup));
}
