/**
 * First run (`/setup`): on a server never set up, create root (`POST /api/setup`), then sign in as root
 * (`POST /api/user/login`). Calls at load: `GET /api/setup`.
 */

import { h, replace } from "../dom.js";
import { field, form, heading, valueOf } from "../forms.js";

/** @param {import("../types.js").PageContext} ctx */
export async function render({ main, api, session, site, router }) {
  /** @type {import("../types.js").SetupState} */
  const state = await api.get("/api/setup");
  if (state.status) {
    site.status.setup = true;
    await router.go("/", { replace: true });
    return;
  }
  const setup = form("Create root", async (f) => {
    const username = valueOf(f, "username").trim();
    const password = valueOf(f, "password");
    await api.post("/api/setup", { username, password, confirmPassword: valueOf(f, "confirmPassword") });
    site.status.setup = true;
    await session.signedIn(await api.post("/api/user/login", { username, password }));
    await router.go("/", { replace: true });
  },
  field("Username", "username", { autocomplete: "username", required: true, value: "root" }),
  field("Password", "password", { type: "password", autocomplete: "new-password", required: true,
    hint: "8 to 64 characters." }),
  field("Confirm password", "confirmPassword", { type: "password", autocomplete: "new-password", required: true }),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Create root")));
  replace(main, h("section", { class: "narrow" },
    heading("Set up Tollway"),
    h("p", {}, "This server has no accounts yet. Create root, the account that manages everything; ",
      "you are signed in as root right after."),
    state.database_type ? h("p", { class: "hint" }, `Database: ${state.database_type}.`) : null,
    setup));
}
