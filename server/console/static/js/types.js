/**
 * The shapes of the API replies the console reads (the subset it uses; `/api/openapi.json` has them all),
 * and the contract of a page module. Types only: nothing here runs.
 */

/**
 * `GET /api/status`: the site's public settings.
 * @typedef {object} Status
 * @property {string} system_name
 * @property {string} version
 * @property {boolean} setup
 * @property {number} quota_per_unit
 * @property {boolean} display_in_currency
 * @property {string} quota_display_type  USD, CNY, TOKENS or CUSTOM
 * @property {number} usd_exchange_rate
 * @property {string} custom_currency_symbol
 * @property {number} custom_currency_exchange_rate
 * @property {boolean} email_verification
 * @property {boolean} passkey_login  passkeys are on: sign-in with one, and adding one
 * @property {string} logo  the site's logo image address ("" for none)
 * @property {string} footer_html  root's footer text: Markdown or HTML ("" for none)
 */

/**
 * `GET /api/setup`.
 * @typedef {object} SetupState
 * @property {boolean} status  whether the first-run setup is done
 * @property {boolean} root_init
 * @property {string} database_type
 */

/**
 * `POST /api/user/login` (and `/login/2fa`) when a session was opened.
 * @typedef {object} LoginView
 * @property {number} id
 * @property {string} username
 * @property {string} display_name
 * @property {number} role
 * @property {number} status
 * @property {string} group
 */

/**
 * `GET /api/user/self`.
 * @typedef {LoginView & {email: string, quota: number, used_quota: number, request_count: number}} SelfUser
 */

/**
 * One page of a list route.
 * @template T
 * @typedef {object} Paged
 * @property {T[]} items
 * @property {number} total
 * @property {number} page
 * @property {number} page_size
 */

/**
 * An API key (`/api/token/…`); `key` is masked except in the create reply.
 * @typedef {object} ApiKey
 * @property {number} id
 * @property {string} key
 * @property {number} status  1 enabled, 2 disabled, 3 expired, 4 exhausted
 * @property {string} name
 * @property {number} created_time
 * @property {number} accessed_time
 * @property {number} expired_time  unix seconds, -1 never
 * @property {number} remain_quota
 * @property {number} used_quota
 * @property {boolean} unlimited_quota
 * @property {boolean} model_limits_enabled
 * @property {string} model_limits
 * @property {string} allow_ips
 * @property {string} group
 */

/**
 * One hour of one model's usage (`GET /api/data/self`).
 * @typedef {object} UsageBucket
 * @property {string} model_name
 * @property {number} created_at  the hour's start, unix seconds
 * @property {number} token_used
 * @property {number} count
 * @property {number} quota
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

/**
 * A redemption code (`/api/redemption/…`, admins), shown in full.
 * @typedef {object} Redemption
 * @property {number} id
 * @property {string} key
 * @property {number} status  1 enabled, 2 disabled, 3 used
 * @property {string} name
 * @property {number} quota
 * @property {number} created_time
 * @property {number} redeemed_time
 * @property {number} expired_time  0 never
 * @property {number} used_user_id
 * @property {string} used_username  "" until used
 */

/**
 * A top-up order (`GET /api/user/topup`, admins).
 * @typedef {object} TopUp
 * @property {number} id
 * @property {number} user_id
 * @property {string} username  the owner's
 * @property {number} amount
 * @property {number} money
 * @property {string} trade_no
 * @property {string} payment_method
 * @property {string} payment_provider
 * @property {number} create_time
 * @property {number} complete_time
 * @property {string} status  pending, success, failed, expired or review
 */

/**
 * A user as admins see them (`GET /api/user/`, `/api/user/search`).
 * @typedef {object} AdminUser
 * @property {number} id
 * @property {string} username
 * @property {string} display_name
 * @property {string} email
 * @property {number} role  1 user, 10 admin, 100 root
 * @property {number} status  1 enabled, 2 disabled
 * @property {string} group
 * @property {number} quota
 * @property {number} used_quota
 * @property {number} request_count
 * @property {string} remark
 * @property {number} last_login_at
 * @property {boolean} two_factor_enabled
 * @property {number} passkey_count
 */

/**
 * `POST /api/user/manage`: the target after the action.
 * @typedef {object} ManageResult
 * @property {number} role
 * @property {number} status
 * @property {number} quota
 */

/**
 * A channel (`/api/channel/…`, admins); `key` is always "" in replies.
 * @typedef {object} Channel
 * @property {number} id
 * @property {number} type
 * @property {string} name
 * @property {number} status  1 enabled, 2 disabled by an admin, 3 disabled automatically
 * @property {string} models
 * @property {string} group
 * @property {number} priority
 * @property {number} weight
 * @property {string} base_url
 * @property {string} test_model
 * @property {string} tag
 * @property {string} remark
 * @property {string} model_mapping
 * @property {number} balance
 * @property {number} balance_updated_time
 * @property {number} test_time
 * @property {number} response_time  ms
 * @property {{is_multi_key: boolean, multi_key_size: number}} channel_info
 */

/**
 * `GET /api/option/`: one option's stored text (secrets are never listed).
 * @typedef {object} OptionValue
 * @property {string} key
 * @property {string} value
 */

/**
 * How one option is edited (`GET /api/option/schema`, declared in core/option_registry.py).
 * @typedef {object} OptionField
 * @property {string} key
 * @property {"str" | "text" | "int" | "float" | "bool" | "json"} kind
 * @property {string} label
 * @property {string} hint
 * @property {boolean} secret  write-only: never listed; sent only when something is typed
 * @property {string[] | null} choices  the only values it takes (a select)
 * @property {number | null} minimum
 * @property {boolean} exclusive_minimum  the minimum itself is refused
 * @property {number | null} maximum
 * @property {number | null} min_length
 * @property {number | null} max_length
 */

/**
 * A section of the options (`GET /api/option/schema`): a heading of the Settings page.
 * @typedef {object} OptionSection
 * @property {string} id
 * @property {string} title
 * @property {string} intro
 * @property {OptionField[]} options
 */

export {};
