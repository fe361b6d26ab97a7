/**
 * The console's own types (what a page gets, what a page module is, a page of a list route), and short
 * names for the API's reply shapes: those are generated from the OpenAPI document into
 * `generated/api.js` (`python -m scripts.console_types`), never declared here. Types only: nothing here runs.
 */

/** @typedef {import("./generated/api.js").Status} Status  `GET /api/status`: the site's public settings */
/** @typedef {import("./generated/api.js").SetupState} SetupState  `GET /api/setup` */
/** @typedef {import("./generated/api.js").LoginView} LoginView  `POST /api/user/login` when a session was opened */
/** @typedef {import("./generated/api.js").SelfView} SelfUser  `GET /api/user/self` */
/** @typedef {import("./generated/api.js").TokenView} ApiKey  an API key; `key` is masked except in the create reply */
/** @typedef {import("./generated/api.js").UsageBucket} UsageBucket  one hour of one model's usage */
/** @typedef {import("./generated/api.js").RedemptionView} Redemption  a redemption code (admins) */
/** @typedef {import("./generated/api.js").TopUpView} TopUp  a top-up order */
/** @typedef {import("./generated/api.js").UserView} AdminUser  a user as admins see them */
/** @typedef {import("./generated/api.js").ManageResult} ManageResult  `POST /api/user/manage` */
/** @typedef {import("./generated/api.js").ChannelView} Channel  a channel; `key` is always "" */
/** @typedef {import("./generated/api.js").Option} OptionValue  `GET /api/option/`: one option's stored text */
/** @typedef {import("./generated/api.js").OptionField} OptionField  how one option is edited */
/** @typedef {import("./generated/api.js").OptionSection} OptionSection  a section of the Settings page */

/**
 * One page of a list route (the document's `Paged_<Item>_`, for any item; the logs page reads two kinds).
 * @template T
 * @typedef {object} Paged
 * @property {T[]} items
 * @property {number} total
 * @property {number} page
 * @property {number} page_size
 */

/**
 * What a page gets when it is shown.
 * @typedef {object} PageContext
 * @property {HTMLElement} main  the element the page fills
 * @property {import("./api.js").Api} api
 * @property {import("./session.js").Session} session
 * @property {import("./site.js").Site} site
 * @property {import("./router.js").Router} router
 * @property {import("./shell.js").Shell} shell
 * @property {URL} url  the address the page was opened with
 */

/**
 * A page module (`js/pages/<name>.js`).
 * @typedef {object} PageModule
 * @property {(ctx: PageContext) => Promise<void> | void} render
 */

export {};
