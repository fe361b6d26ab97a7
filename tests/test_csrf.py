"""Login CSRF and its kin (docs/SECURITY.md): a page of another site must not be able to log a visitor's
browser in as someone else, nor change anything with the visitor's session.

Two rules, each tested against the served app:
- a route that reads a JSON body reads it only when labelled `application/json` or `application/<x>+json`
  (parameters allowed); any other body — `text/plain`, a form, no label — is a 415 naming the label, in both
  error modes, and nothing happens (server/web/body.py). A property test checks the label rule itself.
- every state-changing route but the API-key and passthrough ones (`same_site_only`) refuses a request a
  browser sent from another site: `Sec-Fetch-Site: cross-site`, or an `Origin` that is not this server's
  own (the request's `Host` and scheme, `PUBLIC_URL`, the `ServerAddress` option): 403
  `CROSS_SITE_REQUEST`, and no session is set. A request with neither header (not a browser) is admitted.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.auth.origin import origin_of
from server.web.access import Access, same_site_only
from server.web.body import is_json_media_type
from tests.conftest import Stack
from tests.harness import (
    ERROR_MODES,
    Running,
    add_user,
    data_of,
    fails,
    logged_in,
    make_config,
    serve,
    set_error_mode,
)
from tests.test_auth import user_count

PASSWORD = "password123"
LOGIN = {"username": "alice", "password": PASSWORD}
# what a cross-site `<form enctype="text/plain">` sends: one field named `{"username":…,"pad":"` whose
# value is `"}`, joined by `=` — a JSON object a lenient server would read
FORM_AS_JSON = b'{"username": "alice", "password": "password123", "pad": "=x"}'
EVIL = "https://evil.example"


def session_cookies(response: httpx.Response) -> list[str]:
    return [h for h in response.headers.get_list("set-cookie") if h.strip().startswith("session=")]


async def post_login(running: Running, content: bytes, headers: dict[str, str]) -> httpx.Response:
    return await running.client().post("/api/user/login", content=content, headers=headers)


def cross_site(response: httpx.Response) -> None:
    """The cross-site refusal: 403 `CROSS_SITE_REQUEST` (kept in both error modes), no session set."""
    fails(response, 403, "cross-site request refused")
    assert response.json()["code"] == "CROSS_SITE_REQUEST"
    assert session_cookies(response) == []


# ---- JSON bodies only as JSON ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ERROR_MODES)
@pytest.mark.parametrize(("label", "named"), [
    ("text/plain", "text/plain"),
    ("text/plain;charset=UTF-8", "text/plain"),
    ("application/x-www-form-urlencoded", "application/x-www-form-urlencoded"),
    ("multipart/form-data; boundary=xyz", "multipart/form-data"),
    ("text/json", "text/json"),
    ("application/jsonp", "application/jsonp"),
    ("application/json-patch", "application/json-patch"),
    (None, "missing"),
], ids=["text-plain", "text-plain-charset", "form-urlencoded", "multipart", "text-json", "jsonp",
        "json-prefix", "no-label"])
async def test_a_login_body_not_labelled_json_is_a_415_and_sets_no_session(
        embedded_app: Running, mode: str, label: str | None, named: str) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    await set_error_mode(embedded_app, mode)
    headers = {} if label is None else {"Content-Type": label}
    response = await post_login(embedded_app, FORM_AS_JSON, headers)
    message = fails(response, 415, "Content-Type: ", prefix=True)  # its status in both error modes
    assert named in message and "application/json" in message
    assert session_cookies(response) == []


@pytest.mark.parametrize("label", [
    "application/json", "application/json;charset=utf-8", "Application/JSON; Charset=UTF-8",
    "application/merge-patch+json", "application/vnd.api+json; charset=utf-8",
])
async def test_json_labels_with_parameters_and_suffixes_are_read_and_text_plain_is_not(
        embedded_app: Running, label: str) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    accepted = await post_login(embedded_app, FORM_AS_JSON, {"Content-Type": label})
    assert data_of(accepted)["username"] == "alice"
    assert len(session_cookies(accepted)) == 1
    refused = await post_login(embedded_app, FORM_AS_JSON, {"Content-Type": "text/plain"})
    fails(refused, 415, "Content-Type: text/plain", prefix=True)


async def test_a_form_post_changes_nothing_on_a_session_route(embedded_app: Running) -> None:
    """A logged-in user's own session (here with no `Origin`, as an old browser might send) cannot be made
    to act through a form: the 415 comes before the service is called."""
    await add_user(embedded_app.state, "alice", PASSWORD)
    alice = await logged_in(embedded_app, "alice")
    response = await alice.post("/api/token/", content=b'{"name": "planted"}',
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
    fails(response, 415, "Content-Type: application/x-www-form-urlencoded", prefix=True)
    assert data_of(await alice.get("/api/token/"))["total"] == 0
    created = await alice.post("/api/token/", json={"name": "mine"})  # the console's way still works
    assert data_of(created)["name"] == "mine"


async def test_a_body_less_request_needs_no_label_but_an_empty_labelled_one_is_no_body(
        embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    alice = await logged_in(embedded_app, "alice")
    setup = await alice.post("/api/user/2fa/setup")  # a route that reads no body: no label needed
    assert data_of(setup)["secret"]
    empty = await alice.post("/api/token/", content=b"", headers={"Content-Type": "text/plain"})
    fails(empty, 400, "request body must be a JSON object")  # no body to label: the body's own 400
    fails(await alice.post("/api/token/", content=b"x", headers={"Content-Type": "text/plain"}), 415)


MEDIA_TYPES = ("application", "text", "multipart", "image", "audio", "message", "font", "model", "video")
SUBTYPES = ("json", "plain", "x-www-form-urlencoded", "form-data", "xml", "octet-stream", "jsonp",
            "javascript")
TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-_", min_size=1, max_size=12).filter(
    lambda t: t[0].isalnum())


def casing(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if flip else c for c, flip in zip(text, flips + [False] * len(text),
                                                             strict=False))


@given(kind=st.one_of(st.sampled_from(MEDIA_TYPES), TOKEN),
       subtype=st.one_of(st.sampled_from(SUBTYPES), TOKEN),
       suffix=st.sampled_from(["", "+json", "+xml", "-json", "json"]),
       params=st.lists(st.tuples(st.sampled_from(["charset", "boundary", "q", "profile"]), TOKEN),
                       max_size=3),
       space=st.sampled_from(["", " ", "  "]),
       flips=st.lists(st.booleans(), max_size=60))
def test_the_label_rule_is_application_json_or_a_json_suffix_in_any_case_with_any_parameters(
        kind: str, subtype: str, suffix: str, params: list[tuple[str, str]], space: str,
        flips: list[bool]) -> None:
    full_subtype = subtype + suffix
    expected = kind == "application" and (full_subtype == "json" or (suffix == "+json" and subtype != ""))
    label = casing(f"{kind}/{full_subtype}", flips) + "".join(f";{space}{k}={v}" for k, v in params)
    assert is_json_media_type(space + label + space) is expected, label


@pytest.mark.parametrize("label", ["", ";", "application", "application/", "/json", "application/+json",
                                   "application /json", "application/ json", "*/*", "application/*"])
def test_a_label_that_is_no_json_media_type_is_refused(label: str) -> None:
    assert not is_json_media_type(label)


# ---- the cross-site refusal ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ERROR_MODES)
@pytest.mark.parametrize("origin", [EVIL, "null", "http://127.0.0.1:1", "https://{host}", "http://{host}/",
                                    "http://{host}.evil.example"])
async def test_a_login_from_another_site_is_refused_and_from_this_one_admitted(
        embedded_app: Running, mode: str, origin: str) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    await set_error_mode(embedded_app, mode)
    host = embedded_app.url.removeprefix("http://")
    refused = await embedded_app.client().post("/api/user/login", json=LOGIN,
                                               headers={"Origin": origin.format(host=host)})
    cross_site(refused)
    admitted = await embedded_app.client().post("/api/user/login", json=LOGIN,
                                                headers={"Origin": embedded_app.url})
    assert data_of(admitted)["username"] == "alice" and len(session_cookies(admitted)) == 1


@pytest.mark.parametrize(("fetch_site", "origin", "refused"), [
    ("cross-site", None, True),
    ("Cross-Site", "{url}", True),  # the browser says so, whatever Origin claims
    ("same-site", EVIL, True),  # a sibling subdomain is another origin
    ("same-origin", "{url}", False),
    ("none", None, False),  # typed or bookmarked: no page sent it
    ("same-site", None, False),
])
async def test_sec_fetch_site_cross_site_is_refused(embedded_app: Running, fetch_site: str,
                                                    origin: str | None, refused: bool) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    headers = {"Sec-Fetch-Site": fetch_site}
    if origin is not None:
        headers["Origin"] = origin.format(url=embedded_app.url)
    response = await embedded_app.client().post("/api/user/login", json=LOGIN, headers=headers)
    if refused:
        cross_site(response)
    else:
        assert data_of(response)["username"] == "alice"
    # the same request cross-site is always refused (so this test cannot pass without the rule)
    cross_site(await embedded_app.client().post("/api/user/login", json=LOGIN,
                                                headers={"Sec-Fetch-Site": "cross-site"}))


async def test_every_way_to_get_a_session_refuses_another_site(embedded_app: Running) -> None:
    """The password login's second step, the passkey login, setup and registration answer the cross-site
    refusal before they look at the body: nothing is created, no session is set."""
    await add_user(embedded_app.state, "alice", PASSWORD)
    api = embedded_app.client()
    bodies = {"/api/user/login/2fa": {"code": "123456"}, "/api/user/passkey/login/begin": None,
              "/api/user/passkey/login/finish": {"id": "x", "rawId": "x", "type": "public-key",
                                                 "response": {}},
              "/api/setup": {"username": "root", "password": "rootpassword",
                             "confirmPassword": "rootpassword"},
              "/api/user/register": {"username": "mallory", "password": PASSWORD},
              "/api/user/reset": {"email": "a@example.com", "token": "t", "password": PASSWORD}}
    for path, body in bodies.items():
        cross_site(await api.post(path, json=body, headers={"Origin": EVIL}))
    assert await user_count(embedded_app.state) == 1  # no root set up, nobody registered


async def test_a_session_cannot_be_used_from_another_site_but_reads_are_untouched(
        embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    alice = await logged_in(embedded_app, "alice")
    evil = {"Origin": EVIL}
    cross_site(await alice.post("/api/token/", json={"name": "planted"}, headers=evil))
    cross_site(await alice.put("/api/user/self", json={"display_name": "owned"}, headers=evil))
    listed = data_of(await alice.get("/api/token/", headers=evil))  # a GET changes nothing: admitted
    assert listed["total"] == 0
    assert data_of(await alice.get("/api/user/self"))["display_name"] == "alice"
    assert data_of(await alice.post("/api/token/", json={"name": "mine"},
                                    headers={"Origin": embedded_app.url}))["name"] == "mine"


@pytest.fixture
async def public_app(embedded_stack: Stack, tmp_path: Path) -> AsyncIterator[Running]:
    """Served behind a proxy that rewrites `Host` to the internal address: users reach PUBLIC_URL."""
    config = make_config(embedded_stack.database_url, tmp_path, public_url="https://ai.example.com")
    async with serve(config) as running:
        yield running


async def test_public_url_is_this_sites_origin_whatever_the_host(public_app: Running) -> None:
    await add_user(public_app.state, "alice", PASSWORD)
    admitted = await public_app.client().post("/api/user/login", json=LOGIN,
                                              headers={"Origin": "https://ai.example.com"})
    assert data_of(admitted)["username"] == "alice"
    cross_site(await public_app.client().post("/api/user/login", json=LOGIN,
                                              headers={"Origin": "https://ai.example.com:8443"}))


async def test_the_server_address_option_is_this_sites_origin_from_when_it_is_set(
        embedded_app: Running) -> None:
    public = "https://ai.example.com"
    await add_user(embedded_app.state, "alice", PASSWORD)
    # the request arrived at 127.0.0.1: ai.example.com is another site, until root sets ServerAddress
    cross_site(await embedded_app.client().post("/api/user/login", json=LOGIN, headers={"Origin": public}))
    await embedded_app.state.options.put("ServerAddress", public)
    admitted = await embedded_app.client().post("/api/user/login", json=LOGIN, headers={"Origin": public})
    assert data_of(admitted)["username"] == "alice"


async def test_the_requests_own_host_and_forwarded_scheme_are_its_origin(embedded_app: Running) -> None:
    await add_user(embedded_app.state, "alice", PASSWORD)
    api = embedded_app.client()
    behind_tls = {"Host": "ai.example.com", "X-Forwarded-Proto": "https", "Origin": "https://ai.example.com"}
    assert data_of(await api.post("/api/user/login", json=LOGIN, headers=behind_tls))["username"] == "alice"
    plain = {"Host": "ai.example.com", "Origin": "https://ai.example.com"}  # arrived over http: not ours
    cross_site(await api.post("/api/user/login", json=LOGIN, headers=plain))
    port = {"Host": "ai.example.com:8080", "Origin": "http://ai.example.com:8080"}
    assert data_of(await api.post("/api/user/login", json=LOGIN, headers=port))["username"] == "alice"


def filled(path: str) -> str:
    return re.sub(r"<[^>]+>", "1", path)


async def test_every_state_changing_route_refuses_another_site(embedded_app: Running) -> None:
    """Over the whole route table: each `same_site_only` route answers the cross-site refusal (before it
    looks at credentials or the body); the session-setting ones are among them; the routes authenticated by
    an API key and the payment webhook are not."""
    routes = [(method, route.path, route.ctx) for route in embedded_app.app.router.routes
              for method in route.methods]
    guarded = {(m, "/" + p) for m, p, ctx in routes if same_site_only(m, ctx)}
    assert {("POST", "/api/user/login"), ("POST", "/api/user/login/2fa"), ("POST", "/api/setup"),
            ("POST", "/api/user/passkey/login/finish"), ("POST", "/api/user/register"),
            ("PUT", "/api/user/self"), ("DELETE", "/api/user/self")} <= guarded
    assert ("POST", "/api/stripe/webhook") not in guarded
    assert not [p for m, p, ctx in routes if ctx.access is Access.API_KEY and (m, "/" + p) in guarded]
    assert not [p for m, p, _ in routes if m in ("GET", "HEAD", "OPTIONS") and (m, "/" + p) in guarded]
    api = embedded_app.client()
    wrong = []
    for method, path in sorted(guarded):
        kwargs: dict[str, Any] = {"json": {}} if method in ("POST", "PUT", "PATCH") else {}
        response = await api.request(method, filled(path), headers={"Origin": EVIL}, **kwargs)
        if response.status_code != 403 or response.json().get("code") != "CROSS_SITE_REQUEST":
            wrong.append(f"{method} {path}: {response.status_code} {response.text[:100]}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("value", "origin"), [
    ("https://A.Example", "https://a.example"), ("https://a.example:443", "https://a.example"),
    ("http://a.example:80", "http://a.example"), ("http://a.example:8080", "http://a.example:8080"),
    ("http://[::1]:3000", "http://[::1]:3000"), ("null", None), ("https://a.example/path", None),
    ("https://user@a.example", None), ("ftp://a.example", None), ("http://a.example:99999", None), ("", None),
])
def test_origins_are_compared_as_scheme_host_and_port(value: str, origin: str | None) -> None:
    assert origin_of(value) == origin
