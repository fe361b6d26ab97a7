"""Schemathesis against the served API document: every operation, as root and anonymously, on the embedded
server (SQLite, in-process engine) and on MariaDB + Redis.

The model-call operations are also run a third time with a funded API key (as `Authorization: Bearer` and
`x-goog-api-key`), so they get past authentication: channels for the generated model names are not
configured, so most calls end in a documented 4xx — and the ones naming the seeded models reach the fake
Gemini / OpenAI upstreams on loopback.

No request leaves the machine: the app's upstream client reaches 127.0.0.1 only (`keep_upstreams_local`),
so the channel tests, balances and model lists of the seeded channel (and of the channels the run itself
creates, whose empty `base_url` is a real provider's address) answer their documented 502.

Checks: no 5xx (`not_a_server_error`; the one exception is the documented 502 of a route that calls a
provider for an admin, whose upstream is unreachable here by design), every response conforms to the
documented schema (`response_schema_conformance`) and has a documented status
(`status_code_conformance`). Each operation gets a fixed number of generated requests (`EXAMPLES`; in the
anonymous run, `REFUSED_EXAMPLES` for one that needs a login) with no shrinking, so the run is bounded; a
failure is reported with the request that caused it.

Left out of the root run, with the reason:
- `GET /api/user/logout` would end the root session the rest of the run uses (the anonymous run calls it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from models.topups import TopUp, TopUpRepository
from tests.conftest import Stack, _Databases, _stack
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai import FakeOpenAI
from tests.gateway import seed_channel, seed_key
from tests.harness import Api, Running, add_user, keep_upstreams_local, logged_in, make_config, serve

EXAMPLES = 25


def no_server_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """`not_a_server_error`, but a 502 is an answer where the operation documents it (the routes that call
    an upstream for an admin; `keep_upstreams_local` makes every real provider unreachable)."""
    if response.status_code == 502 and "502" in case.operation.definition.raw.get("responses", {}):
        return None
    result: bool | None = not_a_server_error(ctx, response, case)
    return result


CHECKS = [no_server_error, response_schema_conformance, status_code_conformance]
ROOT_SKIPS = {("GET", "/api/user/logout")}


REFUSED_EXAMPLES = 5
"""Generated requests per operation, in the anonymous run, for an operation that needs a login: the access
guard answers 401 before any part of the request is read (tests/test_access_matrix.py walks every route as
every role), so these check that refusal against the document, and the public operations get `EXAMPLES`."""


def fuzz(doc: dict[str, Any], base_url: str, *, headers: dict[str, str], cookies: dict[str, str],
         skip: set[tuple[str, str]], only_prefix: str = "", refused_examples: int = EXAMPLES
         ) -> tuple[int, list[str]]:
    """Run every operation of `doc` (whose path starts with `only_prefix`) against `base_url`;
    (operations run, failures). An operation that is not public gets `refused_examples` requests."""
    schema = schemathesis.openapi.from_dict(doc)
    failures: list[str] = []
    ran = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if (operation.method.upper(), operation.path) in skip or not operation.path.startswith(only_prefix):
            continue
        ran += 1
        # the documented examples too (a real model name and body reach the fake upstreams)
        examples = schema.get_strategies_from_examples(operation)
        strategy = st.one_of(operation.as_strategy(), *examples) if examples else operation.as_strategy()

        public = operation.definition.raw.get("x-access") == "public"

        @given(case=strategy)
        @settings(max_examples=EXAMPLES if public else refused_examples, deadline=None, database=None,
                  derandomize=True, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            response = case.call(base_url=base_url, headers=headers, cookies=cookies, timeout=30)
            case.validate_response(response, checks=CHECKS, headers=headers)

        try:
            run()
        except Exception as exc:  # one line per failing operation, with schemathesis' own report
            failures.append(f"{operation.label}: {exc}")
    return ran, failures


async def seed(root: Api, other: int) -> None:
    """One of each record, so that the documented example id (1) finds rows and replies are full views."""
    channel = {"name": "gem", "type": 24, "key": "AIza-key-one", "models": "gemini-2.5-flash",
               "group": "default"}
    for response in (
        await root.post("/api/channel/", json={"mode": "single", "channel": channel}),
        await root.post("/api/token/", json={"name": "seeded"}),
        await root.post("/api/user/manage", json={"id": other, "action": "disable"}),  # writes a log row
        await root.post("/api/redemption/", json={"name": "seeded", "quota": 100, "count": 1}),
    ):
        assert response.status_code == 200, response.text


async def check_stack(running: Running) -> None:
    keep_upstreams_local(running)
    root_id = await add_user(running.state, "root", role=100)
    other = await add_user(running.state, "someone")
    root = await logged_in(running, "root")
    await seed(root, other)
    async with running.state.db.transaction() as tx:  # a top-up order (only the payment routes make them)
        await TopUpRepository(tx).add(TopUp(user_id=root_id, amount=1, money=8.0, trade_no="ref_seeded",
                                            payment_method="card", payment_provider="stripe", create_time=0,
                                            complete_time=0, status="pending"))
    session = root.http.cookies["session"]
    doc = (await running.client().get("/api/openapi.json")).json()
    operations = sum(len(ops) for ops in doc["paths"].values())

    ran, failures = await asyncio.to_thread(
        fuzz, doc, running.url, headers={"New-Api-User": str(root_id)}, cookies={"session": session},
        skip=ROOT_SKIPS)
    assert ran == operations - len(ROOT_SKIPS)
    assert not failures, "\n\n".join(failures)

    ran, failures = await asyncio.to_thread(fuzz, doc, running.url, headers={}, cookies={}, skip=set(),
                                            refused_examples=REFUSED_EXAMPLES)
    assert ran == operations
    assert not failures, "\n\n".join(failures)

    async with FakeGemini() as gemini, FakeOpenAI() as openai:
        await seed_channel(running.state, type=24, base_url=gemini.url, models="gemini-2.5-flash-preview-tts")
        await seed_channel(running.state, type=1, base_url=openai.url, models="omni-moderation-latest")
        caller = await add_user(running.state, "caller", quota=10**12)
        _, key = await seed_key(running.state, caller, unlimited=True)
        gateway = sum(len(ops) for path, ops in doc["paths"].items() if path.startswith("/v1"))
        ran, failures = await asyncio.to_thread(
            fuzz, doc, running.url, headers={"Authorization": f"Bearer {key}", "x-goog-api-key": key},
            cookies={}, skip=set(), only_prefix="/v1")
        reached = (len(gemini.received), len(openai.received))
    assert ran == gateway > 0
    assert all(reached), reached  # the documented examples got through to both upstreams
    assert not failures, "\n\n".join(failures)


@pytest.fixture(params=["sqlite", "mariadb+redis"])
async def fuzz_stack(request: pytest.FixtureRequest, databases: _Databases) -> Any:
    async for s in _stack(request.param, databases):
        yield s


async def test_every_operation_conforms_to_the_document(fuzz_stack: Stack, tmp_path: Path) -> None:
    config = make_config(fuzz_stack.database_url, tmp_path, fuzz_stack.redis_url, fuzz_stack.prefix)
    async with serve(config) as running:
        await check_stack(running)
